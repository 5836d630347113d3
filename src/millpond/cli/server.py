"""``millpond server``: the KFP-compatible REST API on this machine.

Loopback by default; any other address needs a token, because the API starts processes on
this machine. The token comes from a file (``--token-file``, best), ``MILLPOND_TOKEN``, or
``--token`` (other users see a command line in ``ps``, so that one warns). The server drops
``MILLPOND_TOKEN`` from its own environment once read, so no run, worker or task inherits it.
FastAPI and uvicorn load only here.

The listening socket is bound before anything else starts (the application, its executor and
background threads, the record ``millpond ps`` reads) and handed to uvicorn: a port in use is
one ``error:`` line naming the address, exit 1, with nothing started and no window in which
another process could take the port between a check and uvicorn's own bind.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import stat
from pathlib import Path

import click

from millpond.errors import UserError

TOKEN_ENV = "MILLPOND_TOKEN"
_WILDCARDS = ("0.0.0.0", "::", "[::]", "")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token_file(path: Path) -> str:
    """The token in ``path`` (its first line, stripped); a missing, unreadable or empty file is a UserError."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--token-file {path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    token = text.strip().splitlines()[0].strip() if text.strip() else ""
    if not token:
        raise UserError(f"--token-file {path}: the file is empty; write the token on its first line")
    if path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        click.echo(f"warning: --token-file {path} is readable by other users; chmod 600 it", err=True)
    return token


def choose_token(token: str | None, token_file: Path | None) -> str | None:
    """The server's token, from ``--token-file``, ``--token`` or ``MILLPOND_TOKEN`` (at most one of the options)."""
    if token and token_file:
        raise UserError("pass --token or --token-file, not both")
    if token_file is not None:
        return read_token_file(token_file)
    if token:
        click.echo(f"warning: --token is visible to other users of this machine (ps); "
                   f"use --token-file PATH or {TOKEN_ENV} instead", err=True)
        return token
    return os.environ.get(TOKEN_ENV) or None


def served_hosts(host: str, allowed: tuple[str, ...]) -> list[str]:
    """Names a request's Host may carry besides the loopback ones: the listening address, this machine's
    name when it listens on every address, and each ``--allowed-host``."""
    names = list(allowed)
    if host in _WILDCARDS:
        names.append(socket.gethostname())
    else:
        names.append(host)
    return names


@click.command("server")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8888, show_default=True, help="Port to listen on.")
@click.option("--token-file", type=click.Path(path_type=Path, dir_okay=False),
              help="Require 'Authorization: Bearer TOKEN' on every request, TOKEN being this file's first line.")
@click.option("--token", help=f"As --token-file, the token given here (visible in ps; default: ${TOKEN_ENV}).")
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME",
              help="Also answer requests whose Host is NAME ('*.example.org' for sub-domains; '*' for any, "
                   "behind a proxy that checks it). Repeatable. Others are refused (DNS rebinding).")
@click.option("--ray", "ray_address", metavar="HOST:PORT",
              help="Run every run's tasks on this Ray cluster (default: $MILLPOND_RAY_ADDRESS).")
def server_command(host: str, port: int, token_file: Path | None, token: str | None,
                   allowed_hosts: tuple[str, ...], ray_address: str | None) -> None:
    """Serve the Kubeflow Pipelines v2beta1 REST API (for kfp.Client) over this machine's runs."""
    if not 0 <= port <= 65535:
        raise UserError(f"--port {port}: expected a port number from 0 to 65535")
    token = choose_token(token, token_file)
    if ray_address:  # the runs' worker processes inherit it, as they read their settings from the environment
        os.environ["MILLPOND_RAY_ADDRESS"] = ray_address
    cluster = os.environ.get("MILLPOND_RAY_ADDRESS")
    if cluster:  # checked now: a server whose runs could never start says so at once
        from millpond.runners.ray_cluster import connect

        connect(cluster)
    os.environ.pop(TOKEN_ENV, None)  # read: the runs, workers and tasks this server starts never see it
    if not is_loopback(host) and not token:
        raise UserError(f"refusing to listen on {host} without a token: pass --token-file PATH or set {TOKEN_ENV}")
    from millpond.serving.model_server import bind_listener

    sock = bind_listener(host.strip("[]"), port)  # MillpondError (exit 1) for a port in use, before anything starts
    try:
        _serve(sock, host, token, allowed_hosts)
    finally:
        sock.close()


def _serve(sock: socket.socket, host: str, token: str | None, allowed_hosts: tuple[str, ...]) -> None:
    """Start the application over the bound ``sock`` and serve until stopped."""
    import uvicorn

    from millpond.cli.processes import reconcile
    from millpond.runners.background import register
    from millpond.server.app import create_app
    from millpond.settings import load_settings

    port = sock.getsockname()[1]
    app = create_app(load_settings(), token, served_hosts(host, allowed_hosts))
    for line in reconcile():  # what an earlier server's users left behind
        click.echo(line, err=True)
    url_host = f"[{host.strip('[]')}]" if ":" in host else host
    register("server", f"http://{url_host}:{port}")  # ``millpond ps`` lists it
    click.echo(f"millpond server: listening on http://{url_host}:{port}", err=True)
    uvicorn.Server(uvicorn.Config(app, log_level="info")).run(sockets=[sock])

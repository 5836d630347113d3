"""``millpond server``: the KFP-compatible REST API on this machine.

Loopback by default; any other address needs a token, because the API starts processes on
this machine. The token comes from a file (``--token-file``, best), ``MILLPOND_TOKEN``, or
``--token`` (other users see a command line in ``ps``, so that one warns). The server drops
``MILLPOND_TOKEN`` from its own environment once read, so no run, worker or task inherits it.
FastAPI and uvicorn load only here.

HTTPS (``--tls``, or ``MILLPOND_TLS=1`` in the environment) serves every route over
TLS with a certificate millpond keeps in the home (``server.tls``), or the user's own
(``--tls-cert``/``--tls-key``). It is on by default when the server listens beyond loopback:
there a token is required, and over plain HTTP that token would cross the network readable by
anyone on the path (and kubectl, which sends a kubeconfig's token only over HTTPS, could not
use it). On loopback it stays off by default, as before: nothing on the wire leaves the machine,
and today's ``http://127.0.0.1:8888`` clients keep working; ``--tls`` there is what
``millpond kubeconfig`` asks for when the server has a token.

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
from typing import TYPE_CHECKING

import click

from millpond.cli.runtime_option import runtime_option
from millpond.errors import UserError
from millpond.settings import load_settings

if TYPE_CHECKING:
    from millpond.server.access import AccessSettings
    from millpond.server.tls import CertificateFiles

TOKEN_ENV = "MILLPOND_TOKEN"
MULTI_USER_ENV = "MILLPOND_MULTI_USER"
SHUTDOWN_GRACE_SECONDS = 5
USERID_HEADER = "kubeflow-userid"  # KFP's KUBEFLOW_USERID_HEADER default (server.access holds the same)
USERID_PREFIX = "accounts.google.com:"  # KFP's KUBEFLOW_USERID_PREFIX default
TLS_ENV = "MILLPOND_TLS"
TLS_VALUES = {"1": True, "true": True, "on": True, "yes": True, "0": False, "false": False, "off": False, "no": False}

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


def choose_tls(flag: bool | None, cert: Path | None, key: Path | None, host: str) -> bool:
    """Whether to serve HTTPS: ``--tls``/``--no-tls``, else ``MILLPOND_TLS`` (as ``MILLPOND_TOKEN`` stands for
    ``--token``), else on beyond loopback only. ``--tls-cert`` and ``--tls-key`` come together and mean ``--tls``."""
    if (cert is None) != (key is None):
        raise UserError("--tls-cert and --tls-key go together: the certificate (chain) and its private key")
    if cert is not None:
        if flag is False:
            raise UserError("--no-tls with --tls-cert/--tls-key: a certificate is only for serving HTTPS")
        return True
    if flag is not None:
        return flag
    setting = os.environ.get(TLS_ENV, "").strip().lower()
    if setting:
        if setting not in TLS_VALUES:
            raise UserError(f"{TLS_ENV}={os.environ[TLS_ENV]!r}: expected 1 or 0 (true/false, on/off, yes/no)")
        return TLS_VALUES[setting]
    return not is_loopback(host)


def choose_access(multi_user: bool | None, token: str | None, proxies: tuple[str, ...], header: str,
                  prefix: str) -> AccessSettings:
    """How the server identifies callers: ``--multi-user`` (else ``MILLPOND_MULTI_USER``), its trusted proxies
    and header. A proxy or header option without multi-user is refused: it would be ignored."""
    from millpond.server.access import AccessSettings, parse_proxies

    if multi_user is None:
        setting = os.environ.get(MULTI_USER_ENV, "").strip().lower()
        if setting and setting not in TLS_VALUES:
            raise UserError(f"{MULTI_USER_ENV}={os.environ[MULTI_USER_ENV]!r}: expected 1 or 0 (true/false, on/off)")
        multi_user = TLS_VALUES.get(setting, False)
    if not multi_user and (proxies or header != USERID_HEADER or prefix != USERID_PREFIX):
        raise UserError("--trusted-proxy, --userid-header and --userid-prefix are for --multi-user")
    if not header.strip() or not all(char.isalnum() or char in "-_" for char in header):
        raise UserError(f"--userid-header {header!r}: expected a header name (letters, digits, '-')")
    return AccessSettings(multi_user, token, parse_proxies(proxies), header.strip().lower(), prefix)


def certificate_names(host: str, allowed: tuple[str, ...]) -> list[str]:
    """The names millpond's own server certificate covers besides the loopback ones: this machine's name,
    the listening address and each ``--allowed-host`` (the names clients may dial)."""
    names = [socket.gethostname(), *allowed]
    if host not in _WILDCARDS:
        names.append(host)
    return names


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
@click.option("--tls/--no-tls", "tls", default=None,
              help="Serve HTTPS with a certificate millpond keeps in the home (its CA: HOME/tls/ca.crt). "
                   "Default: $MILLPOND_TLS, else on beyond loopback only.")
@click.option("--tls-cert", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="Serve HTTPS with this PEM certificate (chain) instead; needs --tls-key.")
@click.option("--tls-key", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="The PEM private key of --tls-cert.")
@click.option("--multi-user/--single-user", "multi_user", default=None,
              help="Kubeflow's multi-user mode: every request needs an identity (a user's token, a login, or a trusted "
                   f"proxy's header) and RBAC decides what it may do. Default: ${MULTI_USER_ENV}, else single-user.")
@click.option("--trusted-proxy", "trusted_proxies", multiple=True, metavar="ADDRESS[/BITS]",
              help="Multi-user: trust the identity header (--userid-header) from this address or network only "
                   "(an oauth2-proxy/Dex/Istio in front). Repeatable; from anyone else the header is refused.")
@click.option("--userid-header", default=USERID_HEADER, show_default=True,
              help="The header a trusted proxy names the user in (KFP's KUBEFLOW_USERID_HEADER).")
@click.option("--userid-prefix", default=USERID_PREFIX, show_default=True,
              help="A prefix the proxy puts before the user name, dropped (KFP's KUBEFLOW_USERID_PREFIX).")
@click.option("--enable-culling/--no-enable-culling", "enable_culling", default=None,
              help="Stop Notebooks idle past --cull-idle-time, as Kubeflow's culler (default: $ENABLE_CULLING, "
                   "else off).")
@click.option("--cull-idle-time", type=float, metavar="MINUTES",
              help="Minutes a Notebook's kernels stay idle before it is culled; fractions allowed "
                   "(default: $CULL_IDLE_TIME, else 1440).")
@click.option("--idleness-check-period", type=float, metavar="MINUTES",
              help="Minutes between the culler's checks; fractions allowed (default: $IDLENESS_CHECK_PERIOD, else 1).")
@click.option("--mlmd-port", type=int, default=0, show_default=True, metavar="PORT",
              help="Also serve ML Metadata's gRPC API (ml_metadata.MetadataStoreService, read-only: the runs' lineage) "
                   "on this port of the same host (KFP's metadata-grpc-service: 8080); 0: not served.")
@runtime_option
def server_command(host: str, port: int, token_file: Path | None, token: str | None,
                   allowed_hosts: tuple[str, ...], ray_address: str | None, tls: bool | None,
                   tls_cert: Path | None, tls_key: Path | None, multi_user: bool | None,
                   trusted_proxies: tuple[str, ...], userid_header: str, userid_prefix: str,
                   enable_culling: bool | None, cull_idle_time: float | None,
                   idleness_check_period: float | None, mlmd_port: int) -> None:
    """Serve the Kubeflow Pipelines v2beta1 REST API (for kfp.Client) over this machine's runs."""
    if not 0 <= port <= 65535:
        raise UserError(f"--port {port}: expected a port number from 0 to 65535")
    if not 0 <= mlmd_port <= 65535 or (mlmd_port and mlmd_port == port):
        raise UserError(f"--mlmd-port {mlmd_port}: expected a port number from 1 to 65535 other than --port's "
                        "(0: no ML Metadata endpoint)")
    _culling_environment(enable_culling, cull_idle_time, idleness_check_period)
    token = choose_token(token, token_file)
    access = choose_access(multi_user, token, trusted_proxies, userid_header, userid_prefix)
    if access.multi_user:  # the runs' workers, engines and tasks read it: tasks are isolated by namespace
        os.environ[MULTI_USER_ENV] = "1"
    secure = choose_tls(tls, tls_cert, tls_key, host)
    if ray_address:  # the runs' worker processes inherit it, as they read their settings from the environment
        os.environ["MILLPOND_RAY_ADDRESS"] = ray_address
    cluster = os.environ.get("MILLPOND_RAY_ADDRESS")
    if cluster:  # checked now: a server whose runs could never start says so at once
        from millpond.runners.ray_cluster import connect

        connect(cluster)
    os.environ.pop(TOKEN_ENV, None)  # read: the runs, workers and tasks this server starts never see it
    if not is_loopback(host) and not token:
        raise UserError(f"refusing to listen on {host} without a token: pass --token-file PATH or set {TOKEN_ENV}")
    if access.multi_user:
        _warn_multi_user(host, secure, token)
    if not is_loopback(host) and not secure:
        click.echo(f"warning: serving plain HTTP on {host}: the token crosses the network unencrypted "
                   "(--no-tls is for a proxy in front that serves HTTPS)", err=True)
    certificate = _served_certificate(tls_cert, tls_key, host, allowed_hosts) if secure else None
    from millpond.serving.model_server import bind_listener

    sock = bind_listener(host.strip("[]"), port)  # MillpondError (exit 1) for a port in use, before anything starts
    try:
        _serve(sock, host, access, token_file, allowed_hosts, certificate, mlmd_port)
    finally:
        sock.close()


def _culling_environment(enabled: bool | None, idle_min: float | None, period_min: float | None) -> None:
    """The culler's options as the environment variables Kubeflow's notebook controller reads (its settings are
    read from there, ``notebooks.culler``)."""
    for option, value in (("--cull-idle-time", idle_min), ("--idleness-check-period", period_min)):
        if value is not None and not 0 < value < float("inf"):
            raise UserError(f"{option} {value:g}: expected a positive number of minutes")
    if enabled is not None:
        os.environ["ENABLE_CULLING"] = "true" if enabled else "false"
    if idle_min is not None:
        os.environ["CULL_IDLE_TIME"] = repr(idle_min)
    if period_min is not None:
        os.environ["IDLENESS_CHECK_PERIOD"] = repr(period_min)


def _warn_multi_user(host: str, secure: bool, token: str | None) -> None:
    """What a multi-user server should say before it starts: nobody can log in yet; passwords in clear."""
    from millpond.store.identities import IdentityStore

    if not IdentityStore(load_settings()).users() and not token:
        click.echo("warning: --multi-user with no user: nobody can log in yet (millpond user add NAME)", err=True)
    if not is_loopback(host) and not secure:
        click.echo(f"warning: --multi-user over plain HTTP on {host}: passwords, session cookies and tokens cross "
                   "the network unencrypted", err=True)


def _served_certificate(cert: Path | None, key: Path | None, host: str,
                        allowed: tuple[str, ...]) -> CertificateFiles:
    """The certificate to serve, loaded once to check it (the user's; else millpond's own, made or renewed
    as needed). A certificate the user brings that is its own issuer is also what clients trust."""
    from millpond.server import tls

    if cert is not None and key is not None:
        files = tls.CertificateFiles(cert.resolve(), key.resolve(), cert.resolve() if tls.self_signed(cert) else None)
        tls.server_context(files)
        if tls.expired(cert):
            click.echo(f"warning: --tls-cert {cert} has expired: clients will refuse it", err=True)
        return files
    files = tls.ensure_certificate(load_settings().home, tls.Subjects.of(certificate_names(host, allowed)))
    tls.server_context(files)
    return files


def client_address(host: str, port: int, scheme: str) -> str:
    """The URL a client on this machine dials: a wildcard address is reached through loopback."""
    name = host.strip("[]")
    if name in ("0.0.0.0", ""):
        name = "127.0.0.1"
    elif name == "::":
        name = "::1"
    return f"{scheme}://{f'[{name}]' if ':' in name else name}:{port}"


def _serve(sock: socket.socket, host: str, access: AccessSettings, token_file: Path | None,
           allowed_hosts: tuple[str, ...], certificate: CertificateFiles | None, mlmd_port: int = 0) -> None:
    """Start the application over the bound ``sock`` (HTTPS with ``certificate`` when given), and ML Metadata's
    gRPC endpoint on ``mlmd_port`` (when not 0) with the application's authenticator and authorizer; serve until
    stopped."""
    import uvicorn

    from millpond.cli.processes import reconcile
    from millpond.runners.background import now_iso, register
    from millpond.runners.processes import ProcessIdentity
    from millpond.server.app import create_app
    from millpond.server.listening import ServerAddress, record
    from millpond.server.stopping import API_HTTP, API_LOOP, StoppingServer

    port = sock.getsockname()[1]
    scheme = "https" if certificate else "http"
    token = access.token
    settings = load_settings()
    app = create_app(settings, token, served_hosts(host, allowed_hosts), access)
    metadata = None
    if mlmd_port:  # bound before anything starts: a port in use is one error line, nothing left running
        from millpond.mlmd import endpoint

        metadata = endpoint.start(settings.database_url, app.state.authenticator, app.state.authorizer,
                                  host, mlmd_port, certificate)
    for line in reconcile():  # what an earlier server's users left behind
        click.echo(line, err=True)
    url_host = f"[{host.strip('[]')}]" if ":" in host else host
    register("server", f"{scheme}://{url_host}:{port}")  # ``millpond ps`` lists it
    own = ProcessIdentity.own()
    authority = certificate.authority if certificate else None
    record(ServerAddress(client_address(host, port, scheme), str(authority) if authority else None, bool(token),
                         str(token_file.resolve()) if token_file else None, own.pid, own.start,
                         now_iso()))  # for ``millpond kubeconfig``
    trust = f" (clients trust {authority})" if authority else ""
    click.echo(f"millpond server: listening on {scheme}://{url_host}:{port}{trust}", err=True)
    if metadata is not None:
        click.echo(f"millpond server: ML Metadata (gRPC{', TLS' if certificate else ''}) on "
                   f"{url_host}:{metadata.port}", err=True)
    # A watch (kubectl get -w) or a followed log never ends by itself: on SIGTERM the server waits that long for
    # requests in flight, then cancels them (uvicorn would otherwise wait for every open stream forever).
    config = uvicorn.Config(app, log_level="info", ssl_certfile=certificate.certificate if certificate else None,
                            ssl_keyfile=certificate.key if certificate else None, loop=API_LOOP, http=API_HTTP,
                            timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS)
    try:
        StoppingServer(config).run(sockets=[sock])
    finally:
        if metadata is not None:
            metadata.stop()

"""``millpond server``: the KFP-compatible REST API on this machine.

Loopback by default; any other address needs a token (``--token`` or ``MILLPOND_TOKEN``),
because the API starts processes on this machine. FastAPI and uvicorn load only here.
"""

from __future__ import annotations

import ipaddress
import os

import click

from millpond.errors import UserError


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@click.command("server")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8888, show_default=True, help="Port to listen on.")
@click.option("--token", help="Require 'Authorization: Bearer TOKEN' on every request (default: $MILLPOND_TOKEN).")
def server_command(host: str, port: int, token: str | None) -> None:
    """Serve the Kubeflow Pipelines v2beta1 REST API (for kfp.Client) over this machine's runs."""
    token = token or os.environ.get("MILLPOND_TOKEN") or None
    if not is_loopback(host) and not token:
        raise UserError(f"refusing to listen on {host} without a token: pass --token TOKEN or set MILLPOND_TOKEN")
    import uvicorn

    from millpond.server.app import create_app
    from millpond.settings import load_settings

    uvicorn.run(create_app(load_settings(), token), host=host, port=port, log_level="info")

"""``millpond kubeconfig``: a kubeconfig context for ``millpond server``, for kubectl and the Kubernetes clients.

What goes in it comes from the running server's record (``server.listening``): its address,
the CA to trust when it serves HTTPS (millpond's own, ``HOME/tls/ca.crt``), and whether it wants
a token. The token is read where the user keeps it: ``--token-file``, ``MILLPOND_TOKEN``, or the
``--token-file`` the server itself was started with; millpond keeps no other copy of it.

``--user NAME`` (a multi-user server's user, ``millpond user add``) issues NAME an API token instead
(``millpond user token create``'s, with ``--expires``; listed and revoked there) and names the context
``millpond-NAME`` unless ``--context`` says otherwise: the command line acts on the home as its
administrator, so it may issue any user's token, as ``user token create`` does.

A token is never put beside an ``http://`` server: kubectl and client-go send a kubeconfig's
bearer token only over HTTPS, so such a context would reach the server without its token and
every request would answer 401. The refusal says to start the server with ``--tls``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import click
from cryptography import x509

from millpond.access.credentials import DEFAULT_TOKEN_LIFETIME, Credentials
from millpond.cli.kubeconfig_file import KubeconfigEntry, merged, read, standalone, target_file, write
from millpond.cli.server import TOKEN_ENV, read_token_file
from millpond.cli.users import token_lifetime
from millpond.documents import dump_yaml
from millpond.errors import UserError
from millpond.hosts import DEFAULT_PORTS
from millpond.names import check_namespace
from millpond.server.listening import ServerAddress, running_servers
from millpond.server.tls import CA_CERT, TLS_DIR
from millpond.settings import load_settings

CONTEXT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,252}")


@click.command("kubeconfig")
@click.option("--server", "server_url", metavar="URL",
              help="The server's address (default: the running millpond server's, from the home).")
@click.option("--file", "file_path", type=click.Path(path_type=Path, dir_okay=False), metavar="PATH",
              help="Merge into this kubeconfig (default: $KUBECONFIG's file, else ~/.kube/config).")
@click.option("--print", "print_only", is_flag=True, help="Print a kubeconfig with only this context; write nothing.")
@click.option("--context", "name", default=None,
              help="The name of the context, and of its cluster and user (default: millpond; millpond-USER with "
                   "--user).")
@click.option("--namespace", default="default", show_default=True, help="The context's namespace.")
@click.option("--use", is_flag=True, help="Make it the current context (otherwise: only when the file has none).")
@click.option("--token-file", type=click.Path(path_type=Path, dir_okay=False),
              help=f"The server's token (default: ${TOKEN_ENV}, else the --token-file the server was started with).")
@click.option("--certificate-authority", "ca_path", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="The PEM CA to trust (default: millpond's own when the server serves HTTPS with it).")
@click.option("--user", "user_name", metavar="NAME",
              help="Issue an API token for this user of a multi-user server and put it in the context.")
@click.option("--expires", default=f"{DEFAULT_TOKEN_LIFETIME.days}d", show_default=True,
              help="With --user: the token's lifetime: days (30d) or a Go duration (12h).")
def kubeconfig_command(server_url: str | None, file_path: Path | None, print_only: bool, name: str | None,
                       namespace: str, use: bool, token_file: Path | None, ca_path: Path | None,
                       user_name: str | None, expires: str) -> None:
    """Write (or print) a kubeconfig context for millpond server: kubectl, the kubernetes client and the
    Kubeflow SDKs then talk to it."""
    if print_only and file_path is not None:
        raise UserError("pass --file PATH or --print, not both")
    if user_name is not None and token_file is not None:
        raise UserError("pass --user NAME or --token-file PATH, not both")
    name = name or (f"millpond-{user_name}" if user_name else "millpond")
    if not CONTEXT_NAME.fullmatch(name):
        raise UserError(f"--context {name!r}: a name of letters, digits, '.', '_', '@' and '-'")
    check_namespace(namespace, "--namespace")
    entry = _entry(server_url, name, namespace, token_file, ca_path, user_name, expires)
    if print_only:
        click.echo(dump_yaml(standalone(entry)), nl=False)
        return
    path = target_file(file_path, name)
    existing = read(path)
    document = merged(existing, entry, use)
    written = write(path, document)
    current = document.get("current-context")
    click.echo(f"context {name!r} written to {written} (server {entry.server}); current context: {current}")


def _entry(server_url: str | None, name: str, namespace: str, token_file: Path | None,
           ca_path: Path | None, user_name: str | None = None, expires: str = "") -> KubeconfigEntry:
    """The context's contents: the address, the CA and the token, checked against each other (a user's token
    is issued last, once nothing else refuses the context)."""
    running = running_servers()
    url = checked_url(server_url) if server_url else None
    if url is None and not running:
        raise UserError(f"no millpond server is running in {load_settings().home}: start one "
                        "(millpond server --tls), or pass --server URL")
    server = _server_for(url, running)
    url = url or (server.url if server else "")
    if user_name is not None and not url.startswith("https://"):
        raise UserError(f"refusing to put {user_name!r}'s token in a context for {url}: kubectl sends a token only "
                        "over HTTPS; start millpond server with --tls")
    token = None if user_name is not None else _token(token_file, server, url)
    if token and not url.startswith("https://"):
        raise UserError(f"refusing to put the token in a context for {url}: kubectl sends a token only over HTTPS; "
                        "start millpond server with --tls")
    authority = _authority(ca_path, server, url)
    if user_name is not None:
        token = _user_token(user_name, expires, name)
    return KubeconfigEntry(name, url, authority, token, namespace)


def _user_token(user_name: str, expires: str, context: str) -> str:
    """A new API token for ``user_name`` (kept as its digest; listed by ``millpond user token list``)."""
    credentials = Credentials(load_settings())
    if credentials.store.user(user_name) is None:
        raise UserError(f"user {user_name!r} not found (millpond user add {user_name})")
    return credentials.issue_token(user_name, f"kubeconfig context {context}", token_lifetime(expires)).secret


def checked_url(text: str) -> str:
    """``--server``, checked: an http(s) URL of a host (and port), nothing else; without a trailing ``/``."""
    parts = urlsplit(text.strip())
    try:
        port_ok = parts.port is None or 0 < parts.port
    except ValueError:
        port_ok = False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok or parts.username is not None \
            or parts.query or parts.fragment or parts.path.strip("/"):
        raise UserError(f"--server {text!r}: expected the server's URL, like https://127.0.0.1:8888")
    return f"{parts.scheme}://{parts.netloc}"


def _server_for(url: str | None, running: list[ServerAddress]) -> ServerAddress | None:
    """The running server ``url`` names: its recorded address, else one of the same scheme and port (the same
    server under another name, such as the machine's, for a kubeconfig used elsewhere); without ``url``, the
    latest started."""
    if url is None:
        return running[0] if running else None
    exact = next((server for server in running if server.url == url), None)
    return exact or next((server for server in running if _scheme_and_port(server.url) == _scheme_and_port(url)),
                         None)


def _scheme_and_port(url: str) -> tuple[str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.port or DEFAULT_PORTS.get(parts.scheme)


def _token(token_file: Path | None, server: ServerAddress | None, url: str) -> str | None:
    if token_file is not None:
        return read_token_file(token_file)
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV]
    if server is not None and server.token_file:
        return read_token_file(Path(server.token_file))
    if server is not None and server.token_required:
        raise UserError(f"the server at {url} wants a token, which millpond does not keep: pass --token-file PATH "
                        f"or set {TOKEN_ENV}")
    return None


def _authority(ca_path: Path | None, server: ServerAddress | None, url: str) -> bytes | None:
    """The PEM CA a client of ``url`` trusts: ``--certificate-authority``, else the running server's own CA,
    else (no running server at that address) millpond's CA in the home when it has one; None for plain HTTP."""
    if ca_path is None and url.startswith("https://"):
        if server is not None and server.tls:
            ca_path = Path(server.ca_file) if server.ca_file else None
        elif (load_settings().home / TLS_DIR / CA_CERT).is_file():
            ca_path = load_settings().home / TLS_DIR / CA_CERT
    if ca_path is None:
        return None
    if not url.startswith("https://"):
        raise UserError(f"--certificate-authority is for an https:// server, not {url}")
    try:
        data = ca_path.read_bytes()
        x509.load_pem_x509_certificates(data)
    except OSError as exc:
        raise UserError(f"--certificate-authority {ca_path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError:
        raise UserError(f"--certificate-authority {ca_path}: not a PEM certificate") from None
    return data

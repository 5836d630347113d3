"""What every request must pass before a route sees it: the Host it names, the token, and, when it
changes something, where it comes from and what it carries.

The API starts processes as the user, so a web page the user happens to visit must not be able
to drive it:

- **DNS rebinding.** A page on ``evil.example`` whose name later resolves to 127.0.0.1 talks
  to this server as its own origin; its requests still say ``Host: evil.example``. Every
  request (GET included) must name one of the hosts the server was started for: ``localhost``,
  ``127.0.0.1``, ``[::1]``, the address it listens on and each ``--allowed-host`` (``*.NAME``
  matches sub-domains; ``*`` turns the check off, for a proxy that does it). Otherwise: 400.
- **Cross-site requests.** A browser sends a "simple" POST (``text/plain``, a form, or no body
  at all) to any origin without asking first. A state-changing request (POST, PUT, PATCH,
  DELETE) is refused (403) when its ``Origin`` is another origin than the server's own: the
  scheme it serves (``https://HOST`` is not the origin of an ``http://`` server), the ``Host``
  it was sent to and that Host's port (``hosts.same_origin``), and (415) unless its body is
  JSON, multipart (uploads) or YAML (``/fluid/apply``); only an empty body may come without a
  type (``kfp.Client`` sends ``application/json`` even on ``:terminate``; the UI sends ``:enable``
  with no body). JSON and
  YAML cannot be sent cross-site without a CORS preflight, which this server never grants;
  a multipart form can, and so can a body-less POST, which is why the Origin check is there too.
- **Model queries** (``INFERENCE_PREFIXES``: the gateway's ``/v1/models/``, ``/v2/``, ``/seldon/`` and
  ``/serving/`` paths) are POSTs too, and pass the same Host, token and Origin checks. Their body
  type is free only for a request that no browser sent cross-site: no ``Origin`` header and no
  ``Sec-Fetch-Site: cross-site``/``same-site`` (browsers send ``Origin`` with every cross-origin
  POST, and ``Sec-Fetch-Site`` with every request), so ``curl -d @input.json`` (form-encoded by
  default, as KServe's examples post it) and ``requests.post(json=…)`` work, while a form on
  another site posting to a model is refused like any other cross-site request (403 with an
  Origin, 415 for its form type otherwise).
- **Token.** With one, every request except the UI's page and static files must carry
  ``Authorization: Bearer TOKEN``; checked in constant time. The scheme's name is
  case-insensitive (RFC 7235 section 2.1: ``bearer TOKEN`` is the same), the token is not.

- **Body size.** A request body (not a model query's: the gateway and its model servers bound
  those) is at most ``MAX_REQUEST_BYTES``: twice the largest package an upload may carry
  (``MAX_PACKAGE_BYTES``, 32 MiB), room for a multipart envelope and an inline IR's JSON
  escaping. A larger ``Content-Length`` is refused (413) before a byte is read; a chunked body
  is read up to the bound first (the routes read whole bodies anyway) and refused past it.

Refusals come in KFP's error shape (see ``server.errors``), or as a ``kind: Status`` on the Kubernetes
API's paths (what kubectl and client-go read). This is a plain ASGI middleware,
not Starlette's ``BaseHTTPMiddleware``, so bodies stream through untouched.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from millpond.hosts import LOOPBACK_HOSTS, host_of, same_origin
from millpond.server.access import Authenticator, Refusal
from millpond.server.errors import error_response
from millpond.server.kube.status import KubeError

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Types a browser cannot send cross-site without a preflight, plus multipart for uploads.
BODY_TYPES = frozenset({
    "application/json", "multipart/form-data",
    "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml",
    # the Kubernetes API's patches (kubectl apply, patch, label, edit): none is a type a form can send
    "application/merge-patch+json", "application/json-patch+json", "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/vnd.kubernetes.protobuf",  # kubectl create's typed clients (server/kube/protobuf.py)
})


@dataclass(frozen=True)
class HostPolicy:
    """The names a request's ``Host`` may carry: exact names, ``*.suffix`` patterns, or anything (``*``)."""

    names: frozenset[str]
    suffixes: tuple[str, ...] = ()
    anything: bool = False

    @classmethod
    def of(cls, hosts: Iterable[str]) -> HostPolicy:
        """The loopback names plus ``hosts`` (the listening address, ``--allowed-host`` values)."""
        names, suffixes, anything = set(LOOPBACK_HOSTS), [], False
        for host in hosts:
            host = host.strip().lower()
            if host == "*":
                anything = True
            elif host.startswith("*."):
                suffixes.append(host[1:])
            elif host:
                names.add(host_of(host))
        return cls(frozenset(names), tuple(suffixes), anything)

    def allows(self, host_header: str) -> bool:
        if self.anything:
            return True
        name = host_of(host_header)
        if not name:
            return False
        return name in self.names or any(name.endswith(suffix) for suffix in self.suffixes)


INFERENCE_PREFIXES = ("/v1/models/", "/v2/", "/seldon/", "/serving/")
MAX_REQUEST_BYTES = 64 * 1024 * 1024


# A file of the web UI under /ui/: at the top (app.js, app.css) or in lib/ or pages/ (its ES modules),
# a plain name: no "..", no hidden file, no other folder. The UI's route serves only such names.
UI_FILE_NAME = re.compile(r"(?:(?:lib|pages)/)?[A-Za-z0-9][A-Za-z0-9_-]*\.[a-z]+")


def is_public(method: str, path: str) -> bool:
    """The web UI's page, its icon and its static files (no data in them) load without the token; nothing else does.

    A module script is fetched without the token (the browser sends no Authorization header for it),
    so the files the page imports must be public as the page is.
    """
    if method not in ("GET", "HEAD"):
        return False
    if path in ("/", "/favicon.ico"):
        return True
    return path.startswith("/ui/") and UI_FILE_NAME.fullmatch(path[len("/ui/"):]) is not None


# What a multi-user server serves without an identity besides the UI's page and files: the login route
# and KFP's healthz (it says only whether the server is multi-user, which clients ask before logging in).
SIGN_IN_PATHS = frozenset({"/ui-api/login", "/ui-api/whoami", "/apis/v2beta1/healthz"})


def host_refusal(headers: dict[str, str], policy: HostPolicy) -> tuple[int, str] | None:
    """The refusal of a request whose Host this server does not answer to (DNS rebinding), or None."""
    host = headers.get("host", "")
    if not policy.allows(host):
        return 400, (f"invalid Host header {host!r}: this server answers to {', '.join(sorted(policy.names))}; "
                     "start it with --allowed-host NAME to add a name")
    return None


def refusal(method: str, path: str, headers: dict[str, str], policy: HostPolicy,
            token: str | None, scheme: str = "http") -> tuple[int, str] | None:
    """Why a request that reached a server serving ``scheme`` (``http``/``https``) is refused, as
    (HTTP status, message), or None when it may go on."""
    refused = host_refusal(headers, policy)
    if refused is not None:
        return refused
    host = headers.get("host", "")
    if token is not None and not is_public(method, path):
        if not _bearer_matches(headers.get("authorization", ""), token):
            return 401, "missing or wrong token: send 'Authorization: Bearer TOKEN'"
    if method not in STATE_CHANGING:
        return None
    origin = headers.get("origin")
    if origin is not None and not same_origin(origin, scheme, host):
        return 403, f"cross-origin request refused: Origin {origin!r} is not this server ({scheme}://{host})"
    media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media in BODY_TYPES or (not media and _empty_body(headers)):
        return None
    if origin is None and path.startswith(INFERENCE_PREFIXES) and headers.get("sec-fetch-site", "none") in (
            "none", "same-origin"):
        return None  # a model query from curl or a client library: no browser sent it cross-site
    return 415, (f"{method} with Content-Type {media or '(none)'!r} refused: send application/json "
                 "(multipart/form-data for uploads, application/yaml for /fluid/apply)")


def _bearer_matches(authorization: str, token: str) -> bool:
    """Whether ``Authorization`` is ``Bearer TOKEN``: the scheme in any case (RFC 7235), the token exactly,
    compared in constant time."""
    scheme, _, given = authorization.strip().partition(" ")
    bearer = hmac.compare_digest(scheme.lower().encode("latin-1"), b"bearer")
    return hmac.compare_digest(given.strip(" ").encode("latin-1"), token.encode()) and bearer


def _empty_body(headers: dict[str, str]) -> bool:
    length = headers.get("content-length")
    if length is not None:
        return length.strip() == "0"
    return "transfer-encoding" not in headers


class RequestGuard:
    """ASGI middleware answering ``refusal``'s error, in KFP's shape, before the application sees a request."""

    def __init__(self, app: ASGIApp, policy: HostPolicy, authenticator: Authenticator,
                 status_paths: Callable[[str], bool] | None = None) -> None:
        self.app = app
        self.policy = policy
        self.authenticator = authenticator  # who calls (server.access): the token, a user, a proxy's header
        self.status_paths = status_paths  # the Kubernetes API's paths: refused with a ``kind: Status`` object

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        repeated = None
        for key, value in scope["headers"]:
            name = key.decode("latin-1").lower()
            if name in headers and name in ("host", "origin", "content-type", "authorization", "cookie",
                                            "kubeflow-userid"):
                repeated = name
            headers.setdefault(name, value.decode("latin-1"))
        method, path = scope["method"].upper(), scope["path"]
        refused = (400, f"the {repeated} header is repeated") if repeated else host_refusal(headers, self.policy)
        if refused is None:
            client = scope.get("client")
            public = is_public(method, path)
            identity = self.authenticator.identify(headers, client[0] if client else None, public or (
                self.authenticator.access.multi_user and path in SIGN_IN_PATHS))
            if isinstance(identity, Refusal):
                refused = (identity.status, identity.message)
            else:
                scope.setdefault("state", {})["identity"] = identity
        if refused is None:
            refused = refusal(method, path, headers, self.policy, None, scope.get("scheme", "http"))
        if refused is None and not scope["path"].startswith(INFERENCE_PREFIXES):
            refused = _too_large(headers.get("content-length"))
            if refused is None and "transfer-encoding" in headers:
                messages = await _read_bounded(receive)
                if messages is None:
                    refused = _too_large(None, streamed=True)
                else:
                    receive = _replay(messages, receive)
        if refused is None:
            await self.app(scope, receive, send)
            return
        if self.status_paths is not None and self.status_paths(scope["path"]):
            await KubeError(*refused).response()(scope, receive, send)
            return
        await error_response(*refused)(scope, receive, send)


    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A WebSocket handshake (the notebook proxy's kernels and terminals) passes the same Host and identity
        checks as a request, and its Origin must be this server's (a browser opens a WebSocket to any site,
        with its cookies: cross-site WebSocket hijacking); refused, it is closed before it is accepted, which
        the client sees as HTTP 403 — or, where the server speaks ASGI's WebSocket denial response (uvicorn
        does), as the refusal's own status and JSON body: 401 without an identity, 403 for a foreign Origin."""
        headers: dict[str, str] = {}
        for key, value in scope["headers"]:
            headers.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
        refused: tuple[int, str] | None = host_refusal(headers, self.policy)
        origin = headers.get("origin")
        scheme = "https" if scope.get("scheme") == "wss" else "http"
        if refused is None and origin is not None and not same_origin(origin, scheme, headers.get("host", "")):
            refused = (403, f"cross-origin WebSocket refused: Origin {origin!r} is not this server")
        if refused is None:
            client = scope.get("client")
            identity = self.authenticator.identify(headers, client[0] if client else None, False)
            if isinstance(identity, Refusal):
                refused = (identity.status, identity.message)
            else:
                scope.setdefault("state", {})["identity"] = identity
        if refused is None:
            await self.app(scope, receive, send)
            return
        await receive()  # websocket.connect
        await deny_websocket(scope, send, *refused)


async def deny_websocket(scope: Scope, send: Send, status: int, message: str) -> None:
    """Refuse a WebSocket handshake with an HTTP status and millpond's JSON error (ASGI's denial response), or,
    where the server cannot send one, close it before it is accepted (HTTP 403)."""
    if "websocket.http.response" not in (scope.get("extensions") or {}):
        await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})
        return
    response = error_response(status, message)
    await send({"type": "websocket.http.response.start", "status": status,
                "headers": [(key, value) for key, value in response.raw_headers]})
    await send({"type": "websocket.http.response.body", "body": bytes(response.body), "more_body": False})


def _too_large(length: str | None, streamed: bool = False) -> tuple[int, str] | None:
    """The refusal of a body over ``MAX_REQUEST_BYTES``: its ``Content-Length`` says so, or it ``streamed`` past."""
    if streamed or (length is not None and length.strip().isdigit() and int(length) > MAX_REQUEST_BYTES):
        return 413, f"request body over {MAX_REQUEST_BYTES // (1024 * 1024)} MiB"
    return None


async def _read_bounded(receive: Receive) -> list[Message] | None:
    """A chunked body's messages, read whole; None once it passes ``MAX_REQUEST_BYTES``."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":  # the client went away: the app sees that as it would have
            return messages
        size += len(message.get("body", b""))
        if size > MAX_REQUEST_BYTES:
            return None
        if not message.get("more_body", False):
            return messages


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that hands out ``messages`` first, then whatever ``receive`` brings (a disconnect)."""
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed

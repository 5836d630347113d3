"""Route a request for an InferenceService to one of its model processes, and send back the answer.

What the gateway on ``millpond server`` and an InferenceService's own port (``start``) share:

- **Where to send it**: the InferenceService's ``endpoints.json`` (``serving.endpoints``), read
  through ``endpoints.read`` and cached on the file's identity (inode and modification time: the
  supervisor replaces the file atomically, so every rewrite is a new inode). One ``stat`` per
  request is all the cache costs (~1 µs, measured in the README); the file is read again only when
  it changed, and its supervisor's liveness is checked again at most once a second
  (``LIVENESS_S``: a ``/proc`` read), so a dead supervisor's replicas stop being used within a second.
- **Which revision**: by its percent, with smooth weighted round-robin (nginx's): deterministic, and
  interleaved, so 20% is 20 of any 100 consecutive requests (not 20 on average, as a random draw
  would be), and an 80/20 canary never sends a burst of canary requests in a row. Only revisions
  with a percent above 0 and at least one replica up take part.
- **Which replica**: round-robin within the revision. A replica that refuses the connection is
  marked down for ``DOWN_S`` and skipped; the request is sent once more to another replica (of any
  revision) — only then, when nothing was sent: a request that reached a replica is never sent twice
  (an inference is not known to be idempotent).
- **How**: one pooled ``aiohttp.ClientSession`` per event loop (keep-alive connections to the replicas;
  ``trust_env=False``: no proxy from the environment between a server and its loopback replicas).
  aiohttp, not httpx: behind the same ASGI server, a proxy on aiohttp's client answered 2.7 times
  the requests per second of one on httpx's, at half the median latency and a fifth of the p99
  (README). Bodies pass as they are (no decompression: ``Accept-Encoding`` goes on, and
  ``Content-Encoding`` comes back).
  The method, the path (re-quoted), the query and the body go as they came, with the request's
  end-to-end headers; hop-by-hop headers, ``Host``, and the caller's credentials (``Authorization``:
  the millpond server's token; ``Cookie``) are not passed on. The answer comes back with its status,
  body and content type (other end-to-end headers too, no ``Set-Cookie``): small bodies in one piece,
  larger ones streamed. Every answer carries ``Content-Security-Policy: sandbox`` and
  ``X-Content-Type-Options: nosniff``: a custom container's HTML, served on the millpond server's
  origin, must not run script there.
- **Errors** in the shape of the protocol the path belongs to (``protocols.common.error_body`` for
  v1/v2, ``seldon_error`` for Seldon): 503 when no replica is up (or none answers), 502 when a
  replica broke the connection after the request was sent, 504 when it did not answer in time,
  413 for a body over ``MAX_BODY_BYTES`` (the model server's default limit; a replica with a lower
  ``--max-body-bytes`` answers its own 413, passed through).
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import aiohttp
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send
from yarl import URL

from millpond.errors import UserError
from millpond.hosts import loopback_only_problem
from millpond.serving import endpoints
from millpond.serving.endpoints import ISVC, Endpoints, Revision
from millpond.serving.model_server import bind_listener
from millpond.serving.protocols.common import error_body
from millpond.serving.protocols.seldon import seldon_error
from millpond.serving.protocols.tensors import MAX_BODY_BYTES, BodyTooLarge, read_body

LIVENESS_S = 1.0  # how stale the "its supervisor runs" answer may be
DOWN_S = 1.0  # how long a replica that refused a connection is skipped
CONNECT_TIMEOUT_S = 2.0
ANSWER_TIMEOUT_S = 300.0  # Knative's default request timeout, which KServe's predictors run under
BUFFERED_BYTES = 256 * 1024  # answers up to this size come back in one piece, larger ones streamed

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
                        "te", "trailer", "trailers", "transfer-encoding", "upgrade"})
_NOT_SENT = HOP_BY_HOP | {"host", "content-length", "authorization", "cookie", "expect"}
_NOT_RETURNED = HOP_BY_HOP | {"content-length", "set-cookie", "date", "server", "content-security-policy",
                              "x-content-type-options"}
_SAFE_PATH = "/:@!$&'()*+,;=-._~"  # what may stay unquoted in a path (RFC 3986 pchar and "/")
SANDBOX = {"content-security-policy": "sandbox", "x-content-type-options": "nosniff"}

# (namespace, name, revision or "", HTTP status, seconds): what the gateway counts per model
Observer = Callable[[str, str, str, int, float], None]
ErrorShape = Callable[[str, int], dict[str, Any]]


def shape_of(path: str) -> ErrorShape:
    """The error body of the protocol ``path`` belongs to: Seldon's status, else KServe's ``{"error"}``."""
    return seldon_error if path.startswith("/seldon/") or "/api/v0.1/" in path or "/api/v1.0/" in path else error_body


def error(message: str, status: int, shape: ErrorShape) -> JSONResponse:
    return JSONResponse(shape(message, status), status_code=status, headers=SANDBOX)


class _Split:
    """Smooth weighted round-robin over the revisions that take traffic, and round-robin over each one's replicas."""

    def __init__(self, revisions: tuple[Revision, ...]) -> None:
        self.revisions = [r for r in revisions if r.percent > 0 and r.replicas]
        self.total = sum(r.percent for r in self.revisions)
        self.current = [0] * len(self.revisions)
        self.cursor = [0] * len(self.revisions)

    def order(self) -> list[tuple[Revision, str]]:
        """This request's (revision, replica) to try first, then the others to fall back on, in order."""
        if not self.revisions:
            return []
        best = 0
        for i, revision in enumerate(self.revisions):
            self.current[i] += revision.percent
            if self.current[i] > self.current[best]:
                best = i
        self.current[best] -= self.total
        first = self.revisions[best]
        start = self.cursor[best]
        self.cursor[best] = (start + 1) % len(first.replicas)
        tries = [(first, first.replicas[(start + k) % len(first.replicas)]) for k in range(len(first.replicas))]
        tries += [(r, url) for r in self.revisions if r is not first for url in r.replicas]
        return tries

    def peek(self) -> list[tuple[Revision, str]]:
        """Every (revision, replica), without moving the split (for reads that are no traffic)."""
        return [(r, url) for r in self.revisions for url in r.replicas]


@dataclass
class _Entry:
    key: tuple[int, int]  # (inode, mtime_ns) of the file read
    found: Endpoints | None
    checked: float  # time.monotonic() of the last liveness check
    split: _Split = field(default_factory=lambda: _Split(()))


@dataclass(frozen=True)
class Target:
    """Where one InferenceService's (or SeldonDeployment's: ``kind``) requests go now."""

    namespace: str
    name: str
    endpoints: Endpoints
    split: _Split
    kind: str = ISVC


class Router:
    """Endpoints by InferenceService (cached), replica picking, and forwarding with one pooled client per loop."""

    def __init__(self, observe: Observer | None = None, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.observe = observe
        self.max_body_bytes = max_body_bytes
        self._entries: dict[tuple[str, str, str], _Entry] = {}
        self._paths: dict[tuple[str, str, str], str] = {}
        self._down: dict[str, float] = {}
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}

    # --- where -----------------------------------------------------------------------------------
    def _path(self, namespace: str, name: str, kind: str) -> str:
        path = self._paths.get((kind, namespace, name))
        if path is None:  # endpoints.folder checks both names (UserError: "..", "/", NUL, …)
            path = str(endpoints.folder(namespace, name, kind) / endpoints.FILE_NAME)
        return path

    def lookup(self, namespace: str, name: str, kind: str = ISVC) -> Target | None:
        """The InferenceService's (or SeldonDeployment's: ``kind``) endpoints while its supervisor runs, else None;
        UserError for a bad name.

        Only objects that have an endpoints file are remembered: requests for any number
        of names that do not exist leave nothing behind.
        """
        where = (kind, namespace, name)
        path = self._path(namespace, name, kind)
        try:
            st = os.stat(path)
        except OSError:
            self._entries.pop(where, None)
            self._paths.pop(where, None)
            return None
        key = (st.st_ino, st.st_mtime_ns)
        self._paths[where] = path
        now = time.monotonic()
        entry = self._entries.get(where)
        if entry is None or entry.key != key or now - entry.checked > LIVENESS_S:
            found = endpoints.read(namespace, name, kind)
            revisions = found.revisions if found is not None else ()
            kept = entry is not None and entry.found is not None and entry.found.revisions == revisions
            # the same revisions and replicas: the split goes on where it was (a rewrite moves no traffic)
            entry = _Entry(key, found, now, entry.split if kept and entry is not None else _Split(revisions))
            self._entries[where] = entry
        if entry.found is None:
            return None
        return Target(namespace, name, entry.found, entry.split, kind)

    def ready(self, namespace: str, name: str, kind: str = ISVC) -> bool:
        target = self.lookup(namespace, name, kind)
        return target is not None and target.endpoints.ready

    # --- how -------------------------------------------------------------------------------------
    def session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            session = self._sessions[loop] = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=512, limit_per_host=0, keepalive_timeout=30),
                timeout=aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT_S, sock_read=ANSWER_TIMEOUT_S),
                trust_env=False, auto_decompress=False, skip_auto_headers=("User-Agent", "Accept-Encoding"))
        return session

    async def aclose(self) -> None:
        """Close the session of the running loop (the app's shutdown)."""
        session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.close()

    async def forward(self, request: Request, target: Target, path: str, shape: ErrorShape) -> Response:
        """``request`` sent to ``path`` on a replica of ``target``; the replica's answer, or an error in ``shape``."""
        started = time.perf_counter()
        try:
            body = await read_body(request, self.max_body_bytes)
        except BodyTooLarge as exc:
            return self._done(target, "", error(str(exc), 413, shape), started)
        named = request.headers.get("connection")  # headers it names are hop-by-hop too (RFC 9110 7.6.1)
        dropped = _NOT_SENT | {t.strip().lower() for t in named.split(",")} if named else _NOT_SENT
        headers = [(k, v) for k, v in request.headers.items() if k not in dropped]
        query = request.scope.get("query_string", b"").decode("latin-1")
        suffix = quote(path, safe=_SAFE_PATH) + (f"?{query}" if query else "")
        now = time.monotonic()
        tries = [t for t in target.split.order() if self._down.get(t[1], 0.0) <= now]
        where = f"{target.kind} {target.namespace}/{target.name}"
        if not tries:
            return self._done(target, "", error(f"{where} has no ready replica", 503, shape), started)
        session = self.session()
        revision = ""
        for attempt, (rev, base) in enumerate(tries[:2]):
            revision = rev.name
            try:
                upstream = await session.request(request.method, URL(base + suffix, encoded=True), headers=headers,
                                                 data=body, allow_redirects=False)
            except aiohttp.ClientConnectorError:  # refused: nothing was sent; skip it for a while, try one other
                self._down[base] = time.monotonic() + DOWN_S
                if attempt == 0 and len(tries) > 1:
                    continue
                message = f"{where}: no replica answers (connection refused)"
                return self._done(target, revision, error(message, 503, shape), started)
            except asyncio.TimeoutError:
                return self._done(target, revision, error(f"{where}: the replica did not answer in time", 504, shape),
                                  started)
            except aiohttp.ClientError as exc:  # sent, then the connection broke: never sent twice
                message = f"{where}: the replica failed: {str(exc) or type(exc).__name__}"
                return self._done(target, revision, error(message, 502, shape), started)
            return self._done(target, revision, await _answer(upstream, shape), started)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns

    async def get_json(self, target: Target, path: str) -> Any:
        """``GET path`` of the first replica that answers it with JSON (metadata for a page), else None; not counted."""
        for _, base in target.split.peek():
            try:
                async with self.session().get(URL(base + quote(path, safe=_SAFE_PATH), encoded=True),
                                              timeout=aiohttp.ClientTimeout(total=2.0)) as answer:
                    if answer.status == 200:
                        return await answer.json(content_type=None)
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
                continue
        return None

    def _done(self, target: Target, revision: str, response: Response, started: float) -> Response:
        if self.observe is not None:
            self.observe(target.namespace, target.name, revision, response.status_code,
                         time.perf_counter() - started)
        return response


async def _answer(upstream: aiohttp.ClientResponse, shape: ErrorShape) -> Response:
    headers = {k.lower(): v for k, v in upstream.headers.items() if k.lower() not in _NOT_RETURNED}
    headers.update(SANDBOX)
    length = upstream.content_length
    if length is not None and length <= BUFFERED_BYTES:
        try:
            content = await upstream.read()
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            return error(f"the replica failed while answering: {str(exc) or type(exc).__name__}", 502, shape)
        finally:
            upstream.release()
        return Response(content, status_code=upstream.status, headers=headers)

    async def chunks() -> Any:
        try:
            async for chunk in upstream.content.iter_any():
                yield chunk
        finally:
            upstream.release()

    return StreamingResponse(chunks(), status_code=upstream.status, headers=headers)


# --- the InferenceService's own port -------------------------------------------------------------------


class OwnPort:
    """An ASGI app answering every path for one InferenceService: its replicas speak all three protocols."""

    def __init__(self, namespace: str, name: str, router: Router | None = None, kind: str = ISVC) -> None:
        endpoints.folder(namespace, name, kind)  # UserError now for a bad name, not on each request
        self.namespace, self.name, self.kind = namespace, name, kind
        self.router = router or Router()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await self.router.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        path = scope["path"]
        shape = shape_of(path)
        refused = loopback_only_problem(request.headers.get("host"), request.headers.get("origin"))
        target = self.router.lookup(self.namespace, self.name, self.kind) if refused is None else None
        if refused is not None:  # a web page in the user's browser (DNS rebinding, another site) gets nothing
            response: Response = error(refused, 403, shape)
        elif target is None:
            response = error(f"{self.kind} {self.namespace}/{self.name} has no ready replica", 503, shape)
        else:
            response = await self.router.forward(request, target, path, shape)
        await response(scope, receive, send)


@dataclass
class Handle:
    """A running own port: ``url``, and ``stop()`` (requests in flight finish; idempotent)."""

    port: int
    url: str
    _server: Any
    _thread: threading.Thread
    _sock: socket.socket

    def stop(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)
        self._sock.close()


def start(port: int, namespace: str, name: str, host: str = "127.0.0.1", kind: str = ISVC) -> Handle:
    """Serve InferenceService ``namespace/name``'s own port (its ``status.url``) in a background thread.

    ``port`` 0 takes a free one (``Handle.port`` names it). MillpondError when the port cannot be
    taken; UserError for a bad name. Returns once the port answers. Its supervisor calls it once,
    before or after writing the first endpoints (until then every request is a 503), and
    ``Handle.stop()`` when it stops; the replicas it routes to are whatever the endpoints file
    names at each request, so restarts of replicas need nothing here.
    """
    import uvicorn  # noqa: PLC0415 - uvicorn is loaded only by a serving front

    app = OwnPort(namespace, name, kind=kind)
    sock = bind_listener(host, port)
    bound = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"isvc-{namespace}-{name}",
                              daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise UserError(f"InferenceService {namespace}/{name}: its port {bound} did not start")
        time.sleep(0.01)
    url_host = f"[{host}]" if ":" in host else host
    return Handle(bound, f"http://{url_host}:{bound}", server, thread, sock)

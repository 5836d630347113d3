"""``/notebook/NAMESPACE/NAME/...``: a Kubeflow Notebook reached through ``millpond server``, HTTP and WebSockets.

Kubeflow serves a notebook behind Istio at ``/notebook/NAMESPACE/NAME/`` (the VirtualService the notebook
controller makes, its ``NB_PREFIX``); here the server forwards that prefix to the notebook's JupyterLab
(``notebooks.objects.endpoint``: a loopback port), the path unchanged (Jupyter's base URL is the prefix),
WebSockets included (kernels' channels, terminals). What it forwards and what it does not:

- only the prefix's own paths: a path whose segments hold ``.`` or ``..`` (raw or percent-encoded) is
  refused (400), so nothing outside the notebook's base URL is ever asked of its server;
- the caller's millpond credentials never reach Jupyter: ``Authorization``, the ``millpond_session``
  cookie and the user-id header are taken out; Jupyter's own token is added (``Authorization: token``),
  so the browser never holds it and a notebook's code cannot replay the user's millpond identity;
- in multi-user mode only a caller allowed ``get`` on ``notebooks`` (group ``kubeflow.org``) of the
  namespace gets through (the server's one Authorizer), as Kubeflow's Istio AuthorizationPolicy lets in
  the namespace's contributors; a WebSocket was authenticated by the request guard first. A refused
  WebSocket handshake answers the HTTP status a request would (401 without an identity, from the guard;
  403 without the right; 404, 503), with its JSON body (``security.deny_websocket``);
- ``/notebook/NAMESPACE/NAME`` without its trailing slash is redirected to ``/notebook/NAMESPACE/NAME/``
  (301 for GET and HEAD, 307 otherwise, the query kept), as Jupyter's base URL handler does, for the
  callers the prefix lets in (403 for others).

A notebook that is stopped, starting or gone answers 503 (404 when there is no such Notebook), in one
line. Simplified: no buffering limits beyond the guard's request-body cap; ``Location`` headers that
name the server's loopback address are rewritten to paths.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import AsyncIterator

import aiohttp
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from millpond.access.attributes import Attributes
from millpond.errors import ForbiddenError, MillpondError
from millpond.notebooks import objects
from millpond.notebooks.kinds import GROUP, NOTEBOOK, PREFIX, base_url
from millpond.runners.ports import LOCAL_ADDR
from millpond.server.access import SESSION_COOKIE, USERID_HEADER
from millpond.server.callers import require
from millpond.server.errors import error_response
from millpond.server.security import deny_websocket
from millpond.store.resources import ResourceStore

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "transfer-encoding", "upgrade", "host", "content-length"})
CREDENTIALS = frozenset({"authorization", "cookie", USERID_HEADER})
WS_HEADERS = frozenset({"sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions",
                        "sec-websocket-protocol", "sec-websocket-accept"})
PATH = PREFIX + "/{namespace}/{name}/{rest:path}"


class Refused(MillpondError):
    """Why a request to a notebook is not forwarded: an HTTP status and one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _rest_problem(raw_path: str, namespace: str, name: str) -> str | None:
    """Why the raw path is not one of the notebook's own (a dot segment, raw or encoded), or None."""
    for segment in raw_path.split("/"):
        if urllib.parse.unquote(segment) in (".", "..") or "\\" in urllib.parse.unquote(segment):
            return "a path with '.' or '..' segments is not forwarded to a notebook"
    if not raw_path.startswith(base_url(namespace, name) + "/") and raw_path != base_url(namespace, name):
        return "the path is not under the notebook's prefix"
    return None


def _target(connection: Request | WebSocket) -> tuple[objects.Endpoint, str]:
    """The notebook's endpoint and the path (with query) to ask it, once the caller may reach it."""
    namespace, name = connection.path_params["namespace"], connection.path_params["name"]
    try:
        require(connection, Attributes("get", namespace, GROUP, NOTEBOOK.plural, name=name))
    except ForbiddenError as exc:
        raise Refused(403, str(exc)) from None
    raw = connection.scope.get("raw_path", b"").decode("latin-1").split("?", 1)[0] or connection.url.path
    problem = _rest_problem(raw, namespace, name)
    if problem:
        raise Refused(400, problem)
    settings = connection.app.state.millpond.settings
    if ResourceStore(settings).get(NOTEBOOK.kind, name, namespace) is None:
        raise Refused(404, NOTEBOOK.not_found(name, namespace))
    found = objects.endpoint(settings, namespace, name)
    if found is None:
        raise Refused(503, f"notebook {namespace}/{name} is not running (stopped, starting or waiting)")
    query = connection.scope.get("query_string", b"").decode("latin-1")
    return found, raw + (f"?{query}" if query else "")


def _without_session(cookie: str) -> str:
    """The Cookie header without millpond's session cookie (Jupyter's own cookies pass)."""
    kept = [part.strip() for part in cookie.split(";")
            if part.strip() and part.strip().split("=", 1)[0].strip() != SESSION_COOKIE]
    return "; ".join(kept)


def forwarded_headers(connection: Request | WebSocket, token: str,
                      skip: frozenset[str] = frozenset()) -> dict[str, str]:
    """The caller's headers minus hop-by-hop ones and millpond's credentials, plus Jupyter's token."""
    userid = getattr(connection.app.state, "userid_header", USERID_HEADER).lower()
    headers: dict[str, str] = {}
    for key, value in connection.headers.items():
        lower = key.lower()
        if lower in HOP_BY_HOP or lower in CREDENTIALS or lower == userid or lower in skip:
            continue
        headers[key] = value
    cookie = _without_session(connection.headers.get("cookie", ""))
    if cookie:
        headers["Cookie"] = cookie
    headers["Host"] = connection.headers.get("host", LOCAL_ADDR)
    headers["Authorization"] = f"token {token}"
    return headers


def _session(connection: Request | WebSocket) -> aiohttp.ClientSession:
    """One pooled client per event loop (kept on the app's state)."""
    state = connection.app.state
    loop = asyncio.get_running_loop()
    sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = getattr(state, "notebook_sessions", {})
    state.notebook_sessions = sessions
    session = sessions.get(loop)
    if session is None or session.closed:
        session = sessions[loop] = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=256), auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, connect=10))
    return session


async def proxy_http(request: Request) -> Response:
    try:
        endpoint, path = _target(request)
    except Refused as exc:
        return error_response(exc.status, exc.message)
    origin = f"http://{LOCAL_ADDR}:{endpoint.port}"
    body = await request.body()
    try:
        upstream = await _session(request).request(
            request.method, origin + path, headers=forwarded_headers(request, endpoint.token), data=body or None,
            allow_redirects=False)
    except aiohttp.ClientError as exc:
        return error_response(502, f"the notebook's server did not answer: {exc}")
    headers = [(key, value) for key, value in upstream.headers.items() if key.lower() not in HOP_BY_HOP]
    headers = [(key, value.replace(origin, "", 1) if key.lower() == "location" else value) for key, value in headers]

    async def chunks() -> AsyncIterator[bytes]:
        try:
            async for chunk in upstream.content.iter_any():
                yield chunk
        finally:
            upstream.release()

    response = StreamingResponse(chunks(), status_code=upstream.status)
    response.raw_headers = [(key.lower().encode("latin-1"), value.encode("latin-1")) for key, value in headers]
    return response


async def proxy_websocket(websocket: WebSocket) -> None:
    try:
        endpoint, path = _target(websocket)
    except Refused as exc:
        await websocket.receive()  # websocket.connect
        await deny_websocket(websocket.scope, websocket.send, exc.status, exc.message)
        return
    protocols = [p.strip() for p in websocket.headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
    url = f"ws://{LOCAL_ADDR}:{endpoint.port}{path}"
    try:
        upstream = await _session(websocket).ws_connect(
            url, headers=forwarded_headers(websocket, endpoint.token, WS_HEADERS), protocols=protocols,
            autoping=True, max_msg_size=0)
    except aiohttp.WSServerHandshakeError as exc:  # Jupyter's own answer (404: no such kernel), passed on
        await websocket.receive()
        await deny_websocket(websocket.scope, websocket.send, exc.status if 400 <= exc.status < 600 else 502,
                             f"the notebook's server refused the WebSocket: {exc.message}")
        return
    except aiohttp.ClientError as exc:
        await websocket.receive()
        await deny_websocket(websocket.scope, websocket.send, 502, f"the notebook's server did not answer: {exc}")
        return
    await websocket.accept(subprotocol=upstream.protocol)

    async def browser_to_jupyter() -> None:
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                if message.get("bytes") is not None:
                    await upstream.send_bytes(message["bytes"])
                elif message.get("text") is not None:
                    await upstream.send_str(message["text"])
        except WebSocketDisconnect:
            return

    async def jupyter_to_browser() -> None:
        try:
            async for message in upstream:
                if message.type == aiohttp.WSMsgType.TEXT:
                    await websocket.send_text(message.data)
                elif message.type == aiohttp.WSMsgType.BINARY:
                    await websocket.send_bytes(message.data)
                else:
                    return
        except (WebSocketDisconnect, OSError):  # the browser left while Jupyter spoke: nothing to pass on
            return

    tasks = [asyncio.ensure_future(browser_to_jupyter()), asyncio.ensure_future(jupyter_to_browser())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await upstream.close()
        try:
            await websocket.close()
        except (RuntimeError, WebSocketDisconnect, OSError):
            pass  # already closed by the browser


async def add_slash(request: Request) -> Response:
    """``/notebook/NAMESPACE/NAME`` → ``/notebook/NAMESPACE/NAME/`` (the module's docstring), for whoever may reach
    the notebook (the same check as the prefix's, as Istio's policy covers the whole path)."""
    namespace, name = request.path_params["namespace"], request.path_params["name"]
    try:
        require(request, Attributes("get", namespace, GROUP, NOTEBOOK.plural, name=name))
    except ForbiddenError as exc:
        return error_response(403, str(exc))
    query = request.scope.get("query_string", b"").decode("latin-1")
    raw = request.scope.get("raw_path", b"").decode("latin-1").split("?", 1)[0] or request.url.path
    return RedirectResponse(raw + "/" + (f"?{query}" if query else ""),
                            status_code=301 if request.method in ("GET", "HEAD") else 307)


METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
ROUTES = [Route(PATH, proxy_http, methods=METHODS), WebSocketRoute(PATH, proxy_websocket),
          Route(PREFIX + "/{namespace}/{name}", add_slash, methods=METHODS)]


def install(app: FastAPI) -> None:
    """Add the notebook routes to the app, and close their pooled clients when it stops."""
    app.router.routes.extend(ROUTES)

    async def close_sessions() -> None:
        for session in getattr(app.state, "notebook_sessions", {}).values():
            await session.close()

    app.router.on_shutdown.append(close_sessions)

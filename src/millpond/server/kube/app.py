"""The Kubernetes API as an ASGI application, and which requests are its.

``millpond server`` hands it ``/version``, ``/api``, ``/api/…``, ``/apis`` and ``/apis/GROUP/…`` for
every group of the kinds registry (KFP's ``/apis/v1beta1`` and ``/apis/v2beta1`` and millpond's own
``/apis/millpond`` stay the FastAPI application's), after the same Host, Origin and token checks as
every other request (``server.security``). Every request is then decided by the server's one Authorizer with
the attributes kube-apiserver gives it (``authorize``; single-user: everything is allowed), and a write of a
Role, ClusterRole or binding must not grant more than its writer holds (``access.escalation``). The access
reviews (``reviews``) answer ``kubectl auth can-i``/``whoami``. Every answer is JSON; every refusal a ``Status``.
Handlers block (stores, processes), so each request's work runs in a worker thread; a watch waits
on its event loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from millpond.access import escalation
from millpond.access.builtin import RBAC_GROUP
from millpond.access.rbac import RBAC_KINDS
from millpond.errors import NotFoundError, UserError
from millpond.kind_handler import KindContext, KindName, Table
from millpond.kinds import REGISTRY
from millpond.pods.logs import LogRequest, read_log
from millpond.server.callers import authorizer_of, caller, identity_of
from millpond.server.kube import (
    authorize,
    discovery,
    openapi,
    patches,
    paths,
    protobuf,
    reviews,
    selectors,
    tables,
    watch,
)
from millpond.server.kube.fields import VALIDATIONS
from millpond.server.kube.history import Histories, key_of
from millpond.server.kube.objects import Resources, WriteOptions, Written
from millpond.server.kube.status import KubeError
from millpond.settings import Settings

_RESERVED_GROUPS = ("v1beta1", "v2beta1", "millpond")  # KFP's and millpond's own API under /apis
_YAML = ("application/yaml", "application/x-yaml", "text/yaml")


MODEL_REGISTRY_PREFIX = "/api/model_registry/"


def is_kube_path(path: str) -> bool:
    """Whether a request's path is the Kubernetes API's (the rest is KFP's, the UI's, the gateway's)."""
    if path.startswith(MODEL_REGISTRY_PREFIX):  # Kubeflow Model Registry's REST API (server.registry_routes)
        return False
    if path in ("/version", "/api", "/apis", "/openapi/v2", "/openapi/v3") or path.startswith(
            ("/api/", "/openapi/v3/")):
        return True
    if path.startswith("/apis/"):
        group = path.split("/")[2]
        return group not in _RESERVED_GROUPS and bool(group)
    return False


class KubeApi:
    """The Kubernetes API over one millpond home."""

    def __init__(self, settings: Settings) -> None:
        self.histories = Histories()
        self.resources = Resources(settings, self.histories)
        self.poller = watch.Poller(self._watched, lambda kind: self.resources.sync(kind))

    def _watched(self) -> list[KindName]:
        return [REGISTRY[kind] for kind in self.histories.watched()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            response = await self._answer(request)
        except KubeError as exc:
            response = _json(exc.status(), exc.code)
        except Exception as exc:  # noqa: BLE001 - never a 500 without a Status saying what failed
            failure = KubeError(500, f"internal error: {type(exc).__name__}: {exc}")
            response = _json(failure.status(), 500)
        await response(scope, receive, send)

    async def _answer(self, request: Request) -> Response:
        path = request.url.path.rstrip("/") or "/"
        method = request.method
        target = paths.parse(path)
        if authorizer_of(request).multi_user:  # single-user: nobody is refused for who asks, as before
            wanted = await run_in_threadpool(authorize.impersonated, request)
            if wanted is not None:
                authorize.act_as(request, wanted)
            asked = authorize.path_attributes(method, request.url.path) if target is None else \
                authorize.resource_attributes(method, target, request.query_params)
            await run_in_threadpool(authorize.authorize, request, asked)
        if method == "GET":
            found = await self._discovery(path, request.headers.get("accept", ""))
            if found is not None:
                return found
        if target is None:
            raise KubeError(404, f"the server could not find the requested resource ({method} {path})", "NotFound")
        review = reviews.find(target.group, target.version, target.resource)
        if review is not None:
            return await self._review(request, review, target)
        kind = discovery.find(target.group, target.version, target.resource)
        if kind is None:
            raise KubeError(404, f"the server could not find the requested resource ({target.resource}."
                                 f"{target.group_version})", "NotFound")
        if kind.cluster_scoped and target.namespace:
            raise KubeError(404, f"{kind.plural} is cluster-scoped: it is not served under a namespace", "NotFound")
        if not kind.cluster_scoped and target.name and not target.namespace:
            raise KubeError(404, f"{kind.plural} is namespaced: name its namespace (…/namespaces/NS/{kind.plural}/"
                                 f"{target.name})", "NotFound")
        return await self._resource(request, kind, target)

    async def _review(self, request: Request, review: reviews.Review, target: paths.ResourcePath) -> Response:
        """An access review: created (POST on the collection), answered, never stored."""
        if request.method != "POST" or target.name or target.subresource:
            raise KubeError(405, f"{review.plural}.{review.group} are created only (POST), never read or changed")
        if review.namespaced != bool(target.namespace):
            raise KubeError(404, f"the server could not find the requested resource ({review.plural}."
                                 f"{review.group}/{review.version})", "NotFound")
        body = await _body(request)
        shown = await run_in_threadpool(reviews.answer, review, body, target.namespace, identity_of(request),
                                        authorizer_of(request))
        return _json(shown, 201)

    async def _discovery(self, path: str, accept: str) -> Response | None:
        if path == "/version":
            return _json(discovery.version())
        if path in ("/api", "/apis"):
            wanted = discovery.aggregated_version(accept)
            if wanted is not None:
                body = await run_in_threadpool(discovery.aggregated, path == "/api", wanted)
                return _json(body, media=discovery.AGGREGATED.format(version=wanted))
            return _json(await run_in_threadpool(discovery.core_versions if path == "/api" else discovery.group_list))
        if path == "/openapi/v2":
            raise KubeError(404, "OpenAPI v2 is not served: read /openapi/v3", "NotFound")
        if path == "/openapi/v3":
            return _json(await run_in_threadpool(openapi.root))
        if path.startswith("/openapi/v3/"):
            found_gv = paths.group_version_of(path[len("/openapi/v3"):])
            document = None
            if found_gv and not found_gv[2]:
                document = await run_in_threadpool(openapi.document, found_gv[0], found_gv[1])
            if document is None:
                raise KubeError(404, f"the server could not find the requested resource ({path})", "NotFound")
            return _json(document)
        parts = [part for part in path.split("/") if part]
        listing: dict[str, Any] | None  # the registry is in memory: answered on the loop, no thread needed
        if len(parts) == 2 and parts[0] == "apis":
            listing = discovery.group(parts[1])
        else:
            found = paths.group_version_of(path)
            if found is None or found[2]:
                return None
            listing = discovery.resource_list(found[0], found[1])
        if listing is None:
            raise KubeError(404, f"the server could not find the requested resource ({path})", "NotFound")
        return _json(listing)

    async def _resource(self, request: Request, kind: KindName, target: paths.ResourcePath) -> Response:
        query = request.query_params
        user = caller(request)
        method = request.method
        if target.subresource:
            return await self._subresource(request, kind, target, user)
        if method == "GET" and not target.name:
            if _truthy(query.get("watch")):
                return self._watch(request, kind, target.namespace)
            return await run_in_threadpool(self._list, request, kind, target.namespace, user)
        if method == "GET":
            obj = await run_in_threadpool(self.resources.get, kind, target.namespace, target.name, user)
            return await run_in_threadpool(self._shaped, request, kind, [obj], obj["metadata"]["resourceVersion"], True)
        if method == "POST" and not target.name:
            body = await _body(request)
            written = await run_in_threadpool(self.resources.create, kind, target.namespace, body,
                                              _options(request), user)
            return _written(written)
        if method == "PUT" and target.name:
            body = await _body(request)
            written = await run_in_threadpool(self.resources.replace, kind, target.namespace, target.name, body,
                                              _options(request), user)
            return _written(written)
        if method == "PATCH" and target.name:
            media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
            raw = await request.body()
            written = await run_in_threadpool(self.resources.patch, kind, target.namespace, target.name, media, raw,
                                              _options(request), user)
            return _written(written)
        if method == "DELETE" and target.name:
            dry_run = query.get("dryRun") == "All"
            return _json(await run_in_threadpool(self.resources.delete, kind, target.namespace, target.name, dry_run,
                                                 user))
        if method == "DELETE":
            return _json(await run_in_threadpool(self._delete_collection, request, kind, target.namespace, user))
        raise KubeError(405, f"{method} is not allowed on {request.url.path}")

    def _list(self, request: Request, kind: KindName, namespace: str, user: str) -> Response:
        query = request.query_params
        match = _match(query)
        version, objects = self.resources.select(kind, namespace, match, user)
        objects, next_token, remaining = _page(objects, query.get("limit"), query.get("continue"))
        if tables.wants_table(request.headers.get("accept", "")):
            response = self._shaped(request, kind, objects, str(version), False)
            if next_token:
                body = json.loads(bytes(response.body))
                body["metadata"]["continue"] = next_token
                return _json(body)
            return response
        meta: dict[str, Any] = {"resourceVersion": str(version)}
        if next_token:
            meta.update({"continue": next_token, "remainingItemCount": remaining})
        api_version = f"{kind.group}/{kind.versions[0]}" if kind.group else "v1"
        return _json({"kind": f"{kind.kind}List", "apiVersion": api_version, "metadata": meta, "items": objects})

    def _shaped(self, request: Request, kind: KindName, objects: list[dict[str, Any]], version: str,
                single: bool) -> Response:
        """One object or a list as JSON, or as a Table when the client asks for one."""
        if not tables.wants_table(request.headers.get("accept", "")):
            return _json(objects[0])
        handler = REGISTRY.handler(kind)
        namespace = str((objects[0].get("metadata") or {}).get("namespace") or "default") if single else "default"
        name = str(objects[0]["metadata"]["name"]) if single else None
        source = handler.table(kind, name, namespace, True, self.resources.context(caller(request)))
        include = request.query_params.get("includeObject", "Metadata")
        return _json(tables.table(source, objects, include, version, kind.cluster_scoped))

    def _delete_collection(self, request: Request, kind: KindName, namespace: str, user: str) -> dict[str, Any]:
        _, objects = self.resources.select(kind, namespace, _match(request.query_params), user)
        dry_run = request.query_params.get("dryRun") == "All"
        for obj in objects:
            ns, name = obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
            self.resources.delete(kind, ns, name, dry_run, user)
        api_version = f"{kind.group}/{kind.versions[0]}" if kind.group else "v1"
        return {"kind": f"{kind.kind}List", "apiVersion": api_version, "metadata": {}, "items": objects}

    async def _subresource(self, request: Request, kind: KindName, target: paths.ResourcePath, user: str) -> Response:
        if target.subresource == "status":
            if request.method != "GET":
                raise KubeError(405, f"the status of {kind.plural} is written by millpond's controllers, not by "
                                     "clients")
            return _json(await run_in_threadpool(self.resources.get, kind, target.namespace, target.name, user))
        if target.subresource == "log" and kind.kind == "Pod" and request.method == "GET":
            return await _pod_log(request, target, self.resources.settings, user)
        if target.subresource in ("exec", "attach", "portforward", "proxy", "eviction", "ephemeral-containers",
                                  "binding", "scale"):
            raise KubeError(405, f"{target.subresource} is not served by millpond: what it runs are local processes "
                                 f"(read their logs with kubectl logs)")
        raise KubeError(404, f"the server could not find the requested resource ({kind.plural}/{target.subresource})")

    def _watch(self, request: Request, kind: KindName, namespace: str) -> Response:
        query = request.query_params
        want_table = tables.wants_table(request.headers.get("accept", ""))
        include = query.get("includeObject", "Metadata")

        sent: dict[tuple[str, str], dict[str, Any]] = {}  # the last Table row this watch sent, per object

        def shape(change: str, obj: dict[str, Any]) -> dict[str, Any]:
            """An event's object as the client asked: as it is, or a one-row Table (a DELETED object's row is
            the last one this watch sent of it: the family has no row for what is gone)."""
            if not want_table:
                return obj
            key = key_of(obj)
            version = obj["metadata"].get("resourceVersion", "")
            if change != "DELETED":
                try:
                    shown = json.loads(bytes(self._shaped(request, kind, [obj], version, True).body))
                except NotFoundError:  # a replayed change of an object gone since: its last row, as for DELETED
                    pass
                else:
                    sent[key] = shown
                    return shown
            last = sent.pop(key, None) if change == "DELETED" else sent.get(key)
            headers = REGISTRY.handler(kind).printer_columns(kind)
            cells = last["rows"][0]["cells"] if last else [key[1], *["<unknown>"] * (len(headers) - 1)]
            row = Table(headers, [cells]) if kind.cluster_scoped else Table(("NAMESPACE", *headers), [[key[0], *cells]])
            return tables.table(row, [obj], include, version, kind.cluster_scoped)

        try:
            timeout = float(query.get("timeoutSeconds") or 0)
        except ValueError:
            raise KubeError(400, f"invalid timeoutSeconds {query.get('timeoutSeconds')!r}") from None
        spec = watch.WatchRequest(kind, namespace, _match(query), query.get("resourceVersion", ""), timeout,
                                  _truthy(query.get("allowWatchBookmarks")), _truthy(query.get("sendInitialEvents")),
                                  shape, shape_blocks=want_table)
        history = self.resources.history(kind)
        self.poller_started(history)
        lines = watch.stream(spec, history, lambda: self.resources.sync(kind))
        return StreamingResponse(_guarded(lines), media_type="application/json")

    def poller_started(self, history: Any) -> None:
        asyncio.get_running_loop().call_later(0.05, self.poller.ensure_running)


async def _guarded(lines: Any) -> Any:
    """A watch's lines; a failure after the stream began ends it with an ERROR event, never a torn line."""
    try:
        async for line in lines:
            yield line
    except KubeError as exc:
        yield json.dumps({"type": "ERROR", "object": exc.status()}).encode() + b"\n"
    except Exception as exc:  # noqa: BLE001 - the stream ends with a Status saying why, not a torn response
        failure = KubeError(500, f"internal error: {type(exc).__name__}: {exc}")
        yield json.dumps({"type": "ERROR", "object": failure.status()}).encode() + b"\n"


async def _pod_log(request: Request, target: paths.ResourcePath, settings: Settings, user: str) -> Response:
    """``kubectl logs [-c C] [--tail N] [-f] [--timestamps]``: the container's log as text, streamed while it runs."""
    query = request.query_params
    try:
        tail = int(query["tailLines"]) if query.get("tailLines") else None
    except ValueError:
        raise KubeError(400, f"invalid tailLines {query.get('tailLines')!r}") from None
    wanted = LogRequest(query.get("container") or None, tail, _truthy(query.get("follow")),
                        _truthy(query.get("timestamps")))

    def opened() -> tuple[Iterator[bytes], bytes]:
        """The log's chunks and the first one; read_log checks the pod and container before it returns (a container
        that is not the pod's: 400 BadRequest, as the API server answers), so it is called inside the try."""
        try:
            chunks = read_log(target.name, target.namespace, wanted, KindContext(settings, user))
            return chunks, next(chunks, b"")
        except NotFoundError as exc:
            raise KubeError(404, str(exc)) from None
        except UserError as exc:
            raise KubeError(400, " ".join(str(exc).split())) from None

    chunks, head = await run_in_threadpool(opened)

    def rest() -> Iterator[bytes]:
        yield head
        yield from chunks

    return StreamingResponse(rest(), media_type="text/plain")


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true")


def _match(query: Any) -> Callable[[dict[str, Any]], bool]:
    by_labels = selectors.labels(query.get("labelSelector", ""))
    by_fields = selectors.fields(query.get("fieldSelector", ""))
    return lambda obj: by_labels(obj) and by_fields(obj)


def _page(objects: list[dict[str, Any]], limit: str | None, token: str | None) -> tuple[list[dict[str, Any]], str, int]:
    """``limit``/``continue`` paging over the sorted listing; the token is the offset to go on from."""
    start = 0
    if token:
        try:
            start = int(token)
        except ValueError:
            raise KubeError(400, f"invalid continue token {token!r}") from None
    try:
        size = int(limit) if limit else 0
    except ValueError:
        raise KubeError(400, f"invalid limit {limit!r}") from None
    if size <= 0:
        return objects[start:], "", 0
    page = objects[start:start + size]
    rest = len(objects) - start - len(page)
    return page, (str(start + size) if rest > 0 else ""), rest


def _options(request: Request) -> WriteOptions:
    query = request.query_params
    validation = query.get("fieldValidation") or "Strict"
    if validation not in VALIDATIONS:
        raise KubeError(400, f"fieldValidation {validation!r}: must be one of {', '.join(VALIDATIONS)}")
    dry_run = query.getlist("dryRun")
    if any(value != "All" for value in dry_run):
        raise KubeError(400, f"dryRun {dry_run!r}: only All is supported")
    agent = request.headers.get("user-agent", "").split("/", 1)[0]
    return WriteOptions(bool(dry_run), validation, query.get("fieldManager") or agent, _truthy(query.get("force")),
                        _admission(request))


def _admission(request: Request) -> Callable[[KindName, dict[str, Any]], None]:
    """What a write must pass before it is stored (dry runs included): RBAC's privilege-escalation rules."""
    identity, authorizer = identity_of(request), authorizer_of(request)

    def admit(kind: KindName, doc: dict[str, Any]) -> None:
        if kind.group != RBAC_GROUP or kind.kind not in RBAC_KINDS:
            return
        refused = escalation.check_write(authorizer, identity, doc)
        if refused is None:
            return
        name = str((doc.get("metadata") or {}).get("name", ""))
        if refused.code == 404:
            raise KubeError(404, refused.message, "NotFound")
        raise KubeError(403, f'{kind.plural}.{kind.group} "{name}" is forbidden: {refused.message}', "Forbidden",
                        {"name": name, "group": kind.group, "kind": kind.plural})

    return admit


async def _body(request: Request) -> Any:
    raw = await request.body()
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media in _YAML:
        return patches.body_yaml(raw)
    if media == protobuf.MEDIA:  # kubectl create namespace|secret|configmap|… (its typed clients)
        return protobuf.decode(raw)
    if media not in ("application/json", ""):
        raise KubeError(415, f"the body of the request was in an unknown format - accepted media types include: "
                             f"application/json, application/yaml (not {media})")
    return patches.body_json(raw)


def _written(written: Written) -> Response:
    response = _json(written.object, written.code)
    for warning in written.warnings:
        quoted = warning.replace("\\", "\\\\").replace('"', '\\"')  # RFC 7234's quoted-string, as client-go reads it
        response.headers.append("Warning", f'299 - "{quoted}"')
    return response


def _json(body: Any, code: int = 200, media: str = "application/json") -> JSONResponse:
    return JSONResponse(body, status_code=code, media_type=media)


class KubeDispatch:
    """ASGI middleware: the Kubernetes API's paths go to ``KubeApi``, the rest to the application."""

    def __init__(self, app: ASGIApp, kube: KubeApi) -> None:
        self.app = app
        self.kube = kube

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and is_kube_path(scope["path"]):
            await self.kube(scope, receive, send)
            return
        await self.app(scope, receive, send)




"""Kubeflow Model Registry's REST API on ``millpond server``: what the ``model-registry`` Python client calls.

Served under both ``/api/model_registry/v1alpha3`` (the OpenAPI of ``kubeflow/model-registry``) and
``/api/model_registry/v1`` (the prefix the ``model-registry`` 0.3 client on PyPI calls): registered models,
model versions, model artifacts and the generic artifacts endpoint, each with create (POST, 201), get,
update (PATCH), list (``pageSize``, ``nextPageToken``, ``orderBy`` ID/CREATE_TIME/LAST_UPDATE_TIME,
``sortOrder`` ASC/DESC) and search (``/registered_model?name=``, ``externalId``, ``parentResourceId``).
Errors are upstream's ``{"code": "Not Found", "message": ...}`` with the status: 400 for a malformed body,
id or parameter, 404 for an id or search that matches nothing, 409 for a name or external id taken.

Each registry is a namespace's (``?namespace=`` or the ``X-Model-Registry-Namespace`` header; ``default``
otherwise, which is where the Python client, which sends neither, registers). Every route asks the one
authorizer (``access.model_registry``). A model artifact's ``uri`` must pass
``serving.registry_refs.check_registered_uri`` (no ``..``, no local path outside the model roots).

Not served (404): experiments, experiment runs, inference services, serving environments and serve
models, which upstream keeps beside them. ``filterQuery`` is read by ``registry_filter``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Body, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from millpond.access import model_registry as vocabulary
from millpond.access.attributes import Attributes
from millpond.errors import MillpondError, NotFoundError, UserError, http_status_of
from millpond.names import check_namespace
from millpond.server.callers import require
from millpond.server.registry_bodies import MODEL_ARTIFACT, changes, draft, parse_id, render, searched
from millpond.server.registry_filter import parse_filter
from millpond.serving.registry_refs import check_registered_uri
from millpond.store.db import database_failure
from millpond.store.model_registry import ARTIFACT, MODEL, ORDER_COLUMNS, VERSION, Changes, Entry, RegistryStore

PREFIXES = ("/api/model_registry/v1alpha3", "/api/model_registry/v1")
NAMESPACE_HEADER = "X-Model-Registry-Namespace"
DEFAULT_NAMESPACE = "default"
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 100, 1000
FILTERED_LIMIT = 100_000  # the entities a filterQuery reads at most
_STATUS_TEXT = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
                409: "Conflict", 412: "Precondition Failed", 422: "Unprocessable Entity", 500: "Internal Server Error",
                503: "Service Unavailable"}


def upstream_error(status: int, message: str) -> JSONResponse:
    """An error as the model registry's server writes it (``model.Error``: the status text and a message)."""
    return JSONResponse({"code": _STATUS_TEXT.get(status, str(status)), "message": message}, status_code=status)


class RegistryRoute(APIRoute):
    """A route whose refusals are written in the registry's error shape, not KFP's."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        original = super().get_route_handler()

        async def handler(request: Request) -> Response:
            try:
                return await original(request)
            except RequestValidationError as exc:
                return upstream_error(400, "; ".join(str(error.get("msg", "invalid")) for error in exc.errors()))
            except HTTPException as exc:
                return upstream_error(exc.status_code, str(exc.detail))
            except MillpondError as exc:
                return upstream_error(http_status_of(exc), str(exc))
            except Exception as exc:
                failure = database_failure(exc)
                if failure is None:
                    raise
                return upstream_error(http_status_of(failure), str(failure))

        return handler


router = APIRouter(route_class=RegistryRoute, tags=["ModelRegistryService"])


def _store(request: Request) -> RegistryStore:
    return RegistryStore(request.app.state.millpond.settings.database_url)


def namespace_of(request: Request) -> str:
    """The registry the request is for: ``?namespace=``, else the header, else ``default``."""
    named = request.query_params.get("namespace") or request.headers.get(NAMESPACE_HEADER) or DEFAULT_NAMESPACE
    return check_namespace(named, "namespace")


def _allowed(request: Request, verb: str) -> str:
    namespace = namespace_of(request)
    require(request, Attributes(verb, namespace, vocabulary.GROUP, vocabulary.RESOURCE))
    return namespace


def _page_size(value: str | None) -> int:
    if value is None or value == "":
        return DEFAULT_PAGE_SIZE
    return min(parse_id(value, "pageSize"), MAX_PAGE_SIZE)


def _offset(token: str | None) -> int:
    if not token:
        return 0
    try:
        text = base64.urlsafe_b64decode(token.encode() + b"=" * (-len(token) % 4)).decode()
        if not text.startswith("o:") or not text[2:].isdigit() or len(text) > 14:
            raise ValueError(text)
        return int(text[2:])
    except (binascii.Error, ValueError, UnicodeError):
        raise UserError(f"nextPageToken: {token[:64]!r} is not a token this server gave") from None


def _token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode().rstrip("=")


def _listed(request: Request, kind: str, *, parent_id: int | None = None, artifact_type: str | None = None,
            name: str | None = None, external_id: str | None = None) -> dict[str, Any]:
    """One page of ``kind`` in the request's registry, as the API's ``…List`` object."""
    namespace = _allowed(request, "list")
    query = request.query_params
    matches = parse_filter(query["filterQuery"]) if query.get("filterQuery") else None
    order_by = query.get("orderBy") or "ID"
    if order_by not in ORDER_COLUMNS:
        raise UserError(f"orderBy: {order_by!r} is not one of {', '.join(ORDER_COLUMNS)}")
    sort_order = query.get("sortOrder") or "ASC"
    if sort_order not in ("ASC", "DESC"):
        raise UserError(f"sortOrder: {sort_order!r} is not ASC or DESC")
    size, offset = _page_size(query.get("pageSize")), _offset(query.get("nextPageToken"))
    if parent_id is not None:  # the parent must be there: a list under a missing one is a 404, as upstream's
        _store(request).get(MODEL if kind == VERSION else VERSION, namespace, parent_id)
    listed: dict[str, Any] = {"parent_id": parent_id, "order_by": order_by, "descending": sort_order == "DESC",
                              "artifact_type": artifact_type, "name": name, "external_id": external_id}
    if matches is None:
        page = _store(request).page(kind, namespace, offset=offset, limit=size, **listed)
        items, more = [render(entry) for entry in page.entries], page.more
    else:  # every entity of the list rendered and matched, then the page cut (registry_filter's simplification)
        everything = _store(request).page(kind, namespace, offset=0, limit=FILTERED_LIMIT, **listed).entries
        kept = [shown for shown in map(render, everything) if matches(shown)]
        items, more = kept[offset:offset + size], len(kept) > offset + size
    return {"items": items, "nextPageToken": _token(offset + size) if more else "", "pageSize": size,
            "size": len(items)}


def _artifact_type(request: Request) -> str | None:
    value = request.query_params.get("artifactType")
    if value and value not in ("model-artifact", "doc-artifact", "dataset-artifact", "metric",
                                           "parameter"):
        raise UserError(f"artifactType: {value!r} is not an artifact type")
    return value or None


def _check_uri(request: Request) -> Callable[[str], Any]:
    settings = request.app.state.millpond.settings
    return lambda uri: check_registered_uri(uri, "uri", settings)


def _created(entry: Entry, status: int = 201) -> JSONResponse:
    return JSONResponse(render(entry), status_code=status)


def _get(request: Request, kind: str, entry_id: str, artifact_type: str | None = None) -> Entry:
    namespace = _allowed(request, "get")
    entry = _store(request).get(kind, namespace, parse_id(entry_id, "id"))
    if artifact_type is not None and entry.artifact_type != artifact_type:
        raise _not_a(entry, artifact_type)
    return entry


def _not_a(entry: Entry, artifact_type: str) -> MillpondError:
    return NotFoundError(f"artifact {entry.id} is a {entry.artifact_type}, not a {artifact_type}")


def _patch(request: Request, kind: str, entry_id: str, body: Any, artifact_type: str | None = None) -> Entry:
    namespace = _allowed(request, "patch")
    store = _store(request)
    current = store.get(kind, namespace, parse_id(entry_id, "id"))
    if artifact_type is not None and current.artifact_type != artifact_type:
        raise _not_a(current, artifact_type)
    return store.update(kind, namespace, current.id, changes(current, body, _check_uri(request)))


def _find(request: Request, kind: str, artifact_type: str | None = None) -> Entry:
    namespace = _allowed(request, "get")
    query = request.query_params
    name, external_id = searched(query.get("name"), "name"), searched(query.get("externalId"), "externalId")
    parent = query.get("parentResourceId")
    if not name and not external_id:
        raise UserError("give name or externalId to search by")
    parent_id = parse_id(parent, "parentResourceId") if parent else None
    if name and not external_id and kind != MODEL and parent_id is None:
        raise UserError("name: a search by name needs parentResourceId (names are unique within their parent)")
    return _store(request).find(kind, namespace, name=name or None, external_id=external_id or None,
                                parent_id=parent_id, artifact_type=artifact_type)


# registered models
@router.get("/registered_models")
def list_registered_models(request: Request) -> dict[str, Any]:
    return _listed(request, MODEL)


@router.post("/registered_models", status_code=201)
def create_registered_model(request: Request, body: Any = Body(None)) -> JSONResponse:
    namespace = _allowed(request, "create")
    return _created(_store(request).create(MODEL, namespace, draft(MODEL, body)))


@router.get("/registered_models/{registeredmodelId}")
def get_registered_model(request: Request, registeredmodelId: str) -> dict[str, Any]:  # noqa: N803 - upstream's
    return render(_get(request, MODEL, registeredmodelId))


@router.patch("/registered_models/{registeredmodelId}")
def update_registered_model(request: Request, registeredmodelId: str,  # noqa: N803 - upstream's name
                            body: Any = Body(None)) -> dict[str, Any]:
    return render(_patch(request, MODEL, registeredmodelId, body))


@router.get("/registered_models/{registeredmodelId}/versions")
def list_registered_model_versions(request: Request, registeredmodelId: str) -> dict[str, Any]:  # noqa: N803
    query = request.query_params
    return _listed(request, VERSION, parent_id=parse_id(registeredmodelId, "id"),
                   name=searched(query.get("name"), "name"),
                   external_id=searched(query.get("externalId"), "externalId"))


@router.post("/registered_models/{registeredmodelId}/versions", status_code=201)
def create_registered_model_version(request: Request, registeredmodelId: str,  # noqa: N803 - upstream's name
                                    body: Any = Body(None)) -> JSONResponse:
    namespace = _allowed(request, "create")
    parent = parse_id(registeredmodelId, "id")
    return _created(_store(request).create(VERSION, namespace, draft(VERSION, body, parent_id=parent)))


@router.get("/registered_model")
def find_registered_model(request: Request) -> dict[str, Any]:
    return render(_find(request, MODEL))


# model versions
@router.get("/model_versions")
def list_model_versions(request: Request) -> dict[str, Any]:
    return _listed(request, VERSION)


@router.post("/model_versions", status_code=201)
def create_model_version(request: Request, body: Any = Body(None)) -> JSONResponse:
    namespace = _allowed(request, "create")
    return _created(_store(request).create(VERSION, namespace, draft(VERSION, body)))


@router.get("/model_versions/{modelversionId}")
def get_model_version(request: Request, modelversionId: str) -> dict[str, Any]:  # noqa: N803 - upstream's name
    return render(_get(request, VERSION, modelversionId))


@router.patch("/model_versions/{modelversionId}")
def update_model_version(request: Request, modelversionId: str,  # noqa: N803 - upstream's name
                         body: Any = Body(None)) -> dict[str, Any]:
    return render(_patch(request, VERSION, modelversionId, body))


@router.get("/model_versions/{modelversionId}/artifacts")
def list_model_version_artifacts(request: Request, modelversionId: str) -> dict[str, Any]:  # noqa: N803
    query = request.query_params
    return _listed(request, ARTIFACT, parent_id=parse_id(modelversionId, "id"), artifact_type=_artifact_type(request),
                   name=searched(query.get("name"), "name"),
                   external_id=searched(query.get("externalId"), "externalId"))


@router.post("/model_versions/{modelversionId}/artifacts")
def upsert_model_version_artifact(request: Request, modelversionId: str,  # noqa: N803 - upstream's name
                                  body: Any = Body(None)) -> JSONResponse:
    """A new artifact of the version (201), or an existing one (its ``id`` in the body) attached and updated (200)."""
    parent = parse_id(modelversionId, "id")
    store = _store(request)
    if isinstance(body, dict) and body.get("id") is not None:
        namespace = _allowed(request, "patch")
        store.get(VERSION, namespace, parent)
        current = store.get(ARTIFACT, namespace, parse_id(body["id"], "id"))
        update = changes(current, body, _check_uri(request))
        return _created(store.update(ARTIFACT, namespace, current.id, _attached(update, parent)), 200)
    namespace = _allowed(request, "create")
    return _created(store.create(ARTIFACT, namespace, draft(ARTIFACT, body, parent_id=parent,
                                                            check_uri=_check_uri(request))))


def _attached(update: Changes, parent: int) -> Changes:
    return replace(update, parent_id=parent)


@router.get("/model_version")
def find_model_version(request: Request) -> dict[str, Any]:
    return render(_find(request, VERSION))


# model artifacts
@router.get("/model_artifacts")
def list_model_artifacts(request: Request) -> dict[str, Any]:
    return _listed(request, ARTIFACT, artifact_type=MODEL_ARTIFACT)


@router.post("/model_artifacts", status_code=201)
def create_model_artifact(request: Request, body: Any = Body(None)) -> JSONResponse:
    namespace = _allowed(request, "create")
    record = draft(ARTIFACT, body, artifact_type=MODEL_ARTIFACT, check_uri=_check_uri(request))
    return _created(_store(request).create(ARTIFACT, namespace, record))


@router.get("/model_artifacts/{modelartifactId}")
def get_model_artifact(request: Request, modelartifactId: str) -> dict[str, Any]:  # noqa: N803 - upstream's name
    return render(_get(request, ARTIFACT, modelartifactId, MODEL_ARTIFACT))


@router.patch("/model_artifacts/{modelartifactId}")
def update_model_artifact(request: Request, modelartifactId: str,  # noqa: N803 - upstream's name
                          body: Any = Body(None)) -> dict[str, Any]:
    return render(_patch(request, ARTIFACT, modelartifactId, body, MODEL_ARTIFACT))


@router.get("/model_artifact")
def find_model_artifact(request: Request) -> dict[str, Any]:
    return render(_find(request, ARTIFACT, MODEL_ARTIFACT))


# artifacts of every type
@router.get("/artifacts")
def list_artifacts(request: Request) -> dict[str, Any]:
    return _listed(request, ARTIFACT, artifact_type=_artifact_type(request))


@router.post("/artifacts", status_code=201)
def create_artifact(request: Request, body: Any = Body(None)) -> JSONResponse:
    namespace = _allowed(request, "create")
    return _created(_store(request).create(ARTIFACT, namespace, draft(ARTIFACT, body, check_uri=_check_uri(request))))


@router.get("/artifacts/{id}")
def get_artifact(request: Request, id: str) -> dict[str, Any]:  # noqa: A002 - upstream's name
    return render(_get(request, ARTIFACT, id))


@router.patch("/artifacts/{id}")
def update_artifact(request: Request, id: str, body: Any = Body(None)) -> dict[str, Any]:  # noqa: A002
    return render(_patch(request, ARTIFACT, id, body))


@router.get("/artifact")
def find_artifact(request: Request) -> dict[str, Any]:
    return render(_find(request, ARTIFACT))


def install(app: Any) -> None:
    """The routes under each prefix (the OpenAPI's v1alpha3 and the PyPI client's v1)."""
    for prefix in PREFIXES:
        version = prefix.rsplit("/", 1)[1]
        app.include_router(router, prefix=prefix,
                           generate_unique_id_function=lambda route, v=version: f"model_registry_{v}_{route.name}")

"""millpond's resource routes, under ``/apis/millpond/v1``: every kind of the registry, secrets, configs.

What ``millpond apply -f``, ``millpond get -o json`` and ``millpond delete`` do, over HTTP,
through the same handlers of the one registry of kinds (``millpond.kinds``): no route knows which
family a kind belongs to.

- ``GET /datasets``, ``GET /datasets/{name}``: Datasets with their status (cache percentage…).
- ``GET /{kind}``, ``GET /{kind}/{name}``: any kind by a name kubectl accepts
  (``alluxioruntimes``, ``dataload``, ``load``, ``pytorchjobs``, ``clusterqueues``, ``isvc``…), as
  ``millpond get KIND -o json`` shows it.
- ``DELETE /{kind}/{name}``: remove one object (a dataset's cache goes with it; a job's
  processes are stopped).
- ``POST /fluid/apply``: a JSON list of manifests (or one manifest, or a ``kind: List``), or
  YAML text, of any kind (the path keeps its first name); every document checked as
  ``millpond apply`` checks it, all stored or none (400 with the first problem on one line; 409
  when storing fails); data operations and training jobs start at once, in the background.
- ``GET /secrets``, ``GET /configmaps``: names and key names; never a value.

Multi-user mode (``route_access``): each route asks what ``kubectl`` would for the same objects: ``get``,
``list`` or ``delete`` on the kind's group and plural in the namespace (none for a cluster-scoped kind),
refused (403) before the object is looked up. A list of ``all_namespaces`` shows the namespaces where the
caller may ``list`` that kind (kubectl ``-A`` would refuse a caller who may not list them all; the UI and
``millpond get -A`` want what the caller can see). An apply asks ``create`` for each new object and
``patch`` for each stored one (what ``kubectl apply`` sends) before anything is checked or stored: one
forbidden document refuses the batch. ``/secrets`` and ``/configmaps`` show the names of the namespaces
where the caller may ``list`` them.
"""

from __future__ import annotations

import threading
from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from millpond.datasets.manifests import _parse
from millpond.datasets.operations.liveness import reconcile_all
from millpond.datasets.schema_check import check_schema_file
from millpond.documents import load_json
from millpond.errors import ForbiddenError, UserError
from millpond.kind_handler import ApplyBatch, KindContext, KindHandler, KindName
from millpond.kinds import REGISTRY
from millpond.manifest_envelope import as_list
from millpond.server.callers import authorizer_of, caller
from millpond.server.errors import ApiError
from millpond.server.route_access import kind_scope, require_kind, shows
from millpond.server.state import state_of
from millpond.settings import Settings
from millpond.store import config_documents
from millpond.store.resources import ResourceStore
from millpond.store.secrets import DEFAULT_NAMESPACE, ConfigStore

PREFIX = "/apis/millpond/v1"
router = APIRouter(tags=["Millpond"])

# Not text/plain: a browser sends that cross-site without asking (see server.security).
_YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
_APPLY_BODY = {
    "required": True,
    "content": {
        "application/json": {"schema": {"oneOf": [
            {"type": "array", "items": {"type": "object"}},
            {"type": "object"},
        ]}},
        "application/yaml": {"schema": {"type": "string"}},
    },
}
_SOURCE = "request body"


def check_operations(settings: Settings) -> None:
    """At server start: every data operation whose process died while nobody looked is resumed or Failed.

    In a background thread, so the API answers at once (a read of one meanwhile checks it too).
    """
    threading.Thread(
        target=reconcile_all, args=(ResourceStore(settings),), daemon=True, name="check-operations"
    ).start()


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip()) or "invalid request"


def _context(request: Request) -> KindContext:
    return KindContext(state_of(request).settings)


def _kind(text: str) -> tuple[KindName, KindHandler]:
    """The kind a path names and its handler; an unknown name is a 404 with the CLI's line."""
    try:
        entry = REGISTRY.resolve(text)
    except UserError as exc:
        raise ApiError(404, _one_line(str(exc))) from None
    return entry, REGISTRY.handler(entry)


def _objects(request: Request, kind: str, namespace: str, all_namespaces: bool) -> dict[str, Any]:
    entry, handler = _kind(kind)
    if not all_namespaces or entry.cluster_scoped:
        require_kind(request, entry, "list", namespace)
        return as_list(handler.list_objects(entry, namespace, all_namespaces, _context(request)))
    items = handler.list_objects(entry, namespace, True, _context(request))
    scope = kind_scope(request, entry, lambda: {_namespace_of(item) for item in items})
    return as_list([item for item in items if shows(scope, _namespace_of(item))])


def _namespace_of(shown: dict[str, Any]) -> str:
    return str((shown.get("metadata") or {}).get("namespace") or "")


def _object(request: Request, kind: str, name: str, namespace: str) -> dict[str, Any]:
    entry, handler = _kind(kind)
    require_kind(request, entry, "get", namespace, name)
    return handler.get(entry, name, namespace, _context(request))  # NotFoundError: 404


@router.get("/datasets")
def list_datasets(request: Request, namespace: str = "default", all_namespaces: bool = False) -> dict[str, Any]:
    """Every Dataset (of ``namespace``, or of all), with its status, as ``millpond get datasets -o json``."""
    return _objects(request, "Dataset", namespace, all_namespaces)


@router.get("/datasets/{name}")
def get_dataset(name: str, request: Request, namespace: str = "default") -> dict[str, Any]:
    """One Dataset with its status (phase, cacheStates with cachedPercentage…)."""
    return _object(request, "Dataset", name, namespace)


@router.get("/secrets")
def list_secrets(request: Request) -> dict[str, Any]:
    """Secrets by name with their keys; values never leave the store."""
    return {"secrets": _configs(request, "secret")}


@router.get("/configmaps")
def list_config_maps(request: Request) -> dict[str, Any]:
    """Config maps by name with their keys (values stay out, as for secrets)."""
    return {"configmaps": _configs(request, "configmap")}


def _configs(request: Request, kind: str) -> list[dict[str, Any]]:
    """Each one's name and keys (and its namespace when it is not ``default``: the shape of a home without
    namespaces is kept), in the namespaces where the caller may list them (the store keeps them per
    namespace: ``store.secrets``)."""
    settings = state_of(request).settings
    entry = REGISTRY["Secret" if kind == "secret" else "ConfigMap"]
    listed = ConfigStore(settings.home).everywhere(kind)
    scope = kind_scope(request, entry, lambda: {namespace for namespace, _, _ in listed})
    return [{"name": name, **({} if namespace == DEFAULT_NAMESPACE else {"namespace": namespace}), "keys": keys}
            for namespace, name, keys in listed if shows(scope, namespace)]


@router.post("/fluid/apply", openapi_extra={"requestBody": _APPLY_BODY})
async def apply_manifests(request: Request) -> dict[str, Any]:
    """Create or update Fluid objects, all or none; data operations applied start in the background."""
    raw = await request.body()
    # Parsing too runs off the event loop: a large or hostile body must not stall other requests.
    return await run_in_threadpool(_parse_and_apply, request, raw, request.headers.get("content-type", ""))


def _parse_and_apply(request: Request, raw: bytes, content_type: str) -> dict[str, Any]:
    return _apply(request, _documents(raw, content_type))


def _documents(raw: bytes, content_type: str) -> list[tuple[int, Any]]:
    """(document number, document) of the body: JSON when it says so, otherwise YAML text (kinds: List expanded)."""
    media = content_type.split(";", 1)[0].strip().lower()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, f"{_SOURCE}: not UTF-8 text") from None
    if media == "application/json":
        try:
            value = load_json(text, _SOURCE)
            if isinstance(value, str):
                value = _parse(value, _SOURCE)
        except UserError as exc:
            raise ApiError(400, _one_line(str(exc))) from None
        if not isinstance(value, list):
            value = [value]
    elif media not in _YAML_TYPES:
        raise ApiError(415, f"{_SOURCE}: send manifests as application/json or application/yaml, not {media}")
    else:
        try:
            value = _parse(text, _SOURCE)
        except UserError as exc:
            raise ApiError(400, _one_line(str(exc))) from None
    documents: list[tuple[int, Any]] = []
    for number, doc in enumerate(value, start=1):
        if doc is None:
            continue
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            documents.extend((number, item) for item in doc["items"])
        else:
            documents.append((number, doc))
    if not documents:
        raise ApiError(400, f"{_SOURCE}: no manifests found (every document is empty)")
    return documents


def _apply(request: Request, documents: list[tuple[int, Any]]) -> dict[str, Any]:
    settings = state_of(request).settings
    sourced = [(_SOURCE, number, doc) for number, doc in documents]
    try:
        secrets = config_documents.batch_lookup(sourced, ConfigStore(settings.home))  # the batch's Secrets count
        batch = ApplyBatch(KindContext(settings, caller(request)), check_schema_file, secrets)
        _authorize(request, documents, batch.context)  # one forbidden document refuses the batch: nothing stored
        plans = REGISTRY.plan(sourced, batch)
    except UserError as exc:
        if isinstance(exc, ForbiddenError):
            raise
        raise ApiError(400, _one_line(str(exc))) from None
    items: list[dict[str, Any]] = []
    notes: list[str] = []
    for plan in plans:  # queues first: a job of this batch may name one of its queues
        try:
            outcome = plan.apply(batch)
        except UserError as exc:
            raise ApiError(409, _one_line(str(exc))) from None
        for applied in outcome.applied:
            item: dict[str, Any] = {"kind": applied.kind.kind, "name": applied.name, "namespace": applied.namespace}
            if applied.uid is not None:
                item["uid"] = applied.uid
            items.append({**item, "action": applied.action, "started": applied.started, "message": applied.message})
        notes += [line for note in outcome.notes for line in note.each()]
    return {"items": items, "notes": notes}


def _authorize(request: Request, documents: list[tuple[int, Any]], context: KindContext) -> None:
    """``create`` for each new object, ``patch`` for each stored one (``kubectl apply``), on its kind in its
    namespace; a document of no known kind is left to the checks that follow (400). Single-user mode asks
    nothing (and looks nothing up)."""
    if not authorizer_of(request).multi_user:
        return
    for _number, doc in documents:
        entry = REGISTRY.named(doc.get("kind")) if isinstance(doc, dict) else None
        if entry is None:
            continue
        metadata = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        name = _text(metadata.get("name"))
        namespace = _text(metadata.get("namespace")) or "default"
        stored = bool(name) and _stored(entry, name, namespace, context)
        require_kind(request, entry, "patch" if stored else "create", namespace, name)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _stored(entry: KindName, name: str, namespace: str, context: KindContext) -> bool:
    try:
        REGISTRY.handler(entry).get(entry, name, namespace, context)
    except UserError:  # NotFoundError, or a name no object could have
        return False
    return True


@router.get("/{kind}")
def list_objects(
    kind: str, request: Request, namespace: str = "default", all_namespaces: bool = False
) -> dict[str, Any]:
    """Every object of a kind (``datasets``, ``alluxioruntimes``, ``dataloads``, ``pytorchjobs``…), with status."""
    return _objects(request, kind, namespace, all_namespaces)


@router.get("/{kind}/{name}")
def get_object(kind: str, name: str, request: Request, namespace: str = "default") -> dict[str, Any]:
    """One object of a kind, with its status (a data operation's phase, duration, progress; a job's conditions)."""
    return _object(request, kind, name, namespace)


@router.delete("/{kind}/{name}")
def delete_object(kind: str, name: str, request: Request, namespace: str = "default") -> dict[str, Any]:
    """Delete one object; a Dataset's cache and mounts go with it (its UFS is untouched), a job's processes stop."""
    entry, handler = _kind(kind)
    require_kind(request, entry, "delete", namespace, name)
    handler.delete(entry, name, namespace, _context(request))  # NotFoundError: 404
    return {"kind": entry.kind, "name": name, "namespace": namespace, "message": f'{entry.resource} "{name}" deleted'}

"""millpond's own routes, under ``/apis/millpond/v1``: Fluid, Kubeflow, Kueue and KServe objects, secrets, configs.

What ``millpond apply -f``, ``millpond get -o json`` and ``millpond delete`` do, over HTTP,
through the same store, the same checks and the same table of kinds (``millpond.kinds``):

- ``GET /datasets``, ``GET /datasets/{name}``: Datasets with their status (cache percentage…).
- ``GET /{kind}``, ``GET /{kind}/{name}``: any kind by a name kubectl accepts
  (``alluxioruntimes``, ``dataload``, ``load``, ``pytorchjobs``, ``clusterqueues``, ``isvc``…), as
  ``millpond get KIND -o json`` shows it.
- ``DELETE /{kind}/{name}``: remove one object (a dataset's cache goes with it; a job's
  processes are stopped).
- ``POST /fluid/apply``: a JSON list of manifests (or one manifest, or a ``kind: List``), or
  YAML text; every document checked as ``millpond apply`` checks it, all stored or none
  (400 with the first problem on one line); data operations and training jobs start at once,
  in the background.
- ``GET /secrets``, ``GET /configmaps``: names and key names; never a value.
"""

from __future__ import annotations

import threading
from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from millpond.datasets import operations
from millpond.datasets.cleanup import dataset_deleted
from millpond.datasets.kinds import KINDS
from millpond.datasets.manifests import _parse, check_document, missing_dataset_notes
from millpond.datasets.operations.liveness import reconcile_all
from millpond.datasets.schema_check import check_schema_file
from millpond.datasets.status import resource_status
from millpond.documents import load_json
from millpond.errors import UserError
from millpond.kinds import REGISTRY, KindName
from millpond.scheduling.queues import kinds as queue_kinds
from millpond.scheduling.queues import objects as queue_objects
from millpond.scheduling.queues import views as queue_views
from millpond.scheduling.queues.manifests import is_queue_document
from millpond.server.callers import caller
from millpond.server.errors import ApiError
from millpond.server.state import state_of
from millpond.serving import kinds as serving_kinds
from millpond.serving import lifecycle as serving_lifecycle
from millpond.serving import objects as serving_objects
from millpond.serving.manifests import is_serving_document
from millpond.settings import Settings
from millpond.store import config_documents
from millpond.store.resources import ResourceStore
from millpond.store.secrets import ConfigStore
from millpond.training import kinds as training_kinds
from millpond.training import objects as training_objects
from millpond.training.applying import apply as apply_training

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


def _store(request: Request) -> ResourceStore:
    return ResourceStore(state_of(request).settings)


def _kind(text: str) -> KindName:
    try:
        return REGISTRY.resolve(text)
    except UserError as exc:
        raise ApiError(404, _one_line(str(exc))) from None


def _not_found(info: KindName, name: str, namespace: str) -> ApiError:
    return ApiError(404, info.not_found(name, namespace))


def _training(request: Request, info: KindName, name: str | None, namespace: str,
              all_namespaces: bool) -> dict[str, Any]:
    """A training kind's object or List, as ``millpond get KIND -o json`` prints it (NotFoundError: 404)."""
    return training_objects.as_objects(training_kinds.KINDS[info.kind], name, namespace, all_namespaces,
                                       state_of(request).jobs, _store(request))


def _queue_statuses(request: Request, info: KindName) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Kueue's status of the ClusterQueues and LocalQueues (workloads pending and admitted, usage)."""
    if info.kind not in ("ClusterQueue", "LocalQueue"):
        return {}
    return queue_views.statuses(*queue_views.current(state_of(request).settings))


def _objects(request: Request, kind: str, namespace: str, all_namespaces: bool) -> dict[str, Any]:
    info = _kind(kind)
    if info.owner == "training":
        return _training(request, info, None, namespace, all_namespaces)
    if info.owner == queue_kinds.OWNER:
        return queue_objects.as_objects(queue_kinds.KINDS[info.kind], None, namespace, all_namespaces,
                                        _store(request), _queue_statuses(request, info))
    if info.owner == serving_kinds.OWNER:
        return serving_objects.as_objects(serving_kinds.KINDS[info.kind], None, namespace, all_namespaces,
                                          _store(request))
    store = _store(request)
    resources = store.list(info.kind, None if all_namespaces else namespace)
    return {"apiVersion": "v1", "kind": "List", "items": [r.as_object(resource_status(r, store)) for r in resources]}


def _object(request: Request, kind: str, name: str, namespace: str) -> dict[str, Any]:
    info = _kind(kind)
    if info.owner == "training":
        return _training(request, info, name, namespace, False)
    if info.owner == queue_kinds.OWNER:  # NotFoundError: 404
        return queue_objects.as_objects(queue_kinds.KINDS[info.kind], name, namespace, False, _store(request),
                                        _queue_statuses(request, info))
    if info.owner == serving_kinds.OWNER:  # NotFoundError: 404
        return serving_objects.as_objects(serving_kinds.KINDS[info.kind], name, namespace, False, _store(request))
    store = _store(request)
    found = store.get(info.kind, name, namespace)
    if found is None:
        raise _not_found(info, name, namespace)
    return found.as_object(resource_status(found, store))  # type: ignore[no-any-return]


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
    return [{"name": name, "keys": keys} for name, keys in ConfigStore(state_of(request).settings.home).list(kind)]


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


def _is_training(doc: Any) -> bool:
    entry = REGISTRY.named(doc.get("kind")) if isinstance(doc, dict) else None
    return entry is not None and entry.owner == "training"


def _apply(request: Request, documents: list[tuple[int, Any]]) -> dict[str, Any]:
    settings = state_of(request).settings
    store, job_store = _store(request), state_of(request).jobs
    try:
        configs, config_notes = config_documents.check(
            [(_SOURCE, number, doc) for number, doc in documents if config_documents.is_core_document(doc)])
        secrets = config_documents.WithPlanned(ConfigStore(settings.home), configs)  # the batch's Secrets count
        queues = queue_objects.check([(_SOURCE, number, doc) for number, doc in documents if is_queue_document(doc)],
                                     store, check_schema_file)
        served = serving_objects.check(
            [(_SOURCE, number, doc) for number, doc in documents if is_serving_document(doc)], check_schema_file)
        manifests = [check_document(doc, _SOURCE, number, secrets)
                     for number, doc in documents if not _is_training(doc) and not is_queue_document(doc)
                     and not is_serving_document(doc) and not config_documents.is_core_document(doc)]
        jobs, job_actions = training_objects.check(
            [(_SOURCE, number, doc) for number, doc in documents if _is_training(doc)], store, job_store)
    except UserError as exc:
        raise ApiError(400, _one_line(str(exc))) from None
    notes = config_notes + [f"{queue.info.kind} {queue.name}: {note}" for queue in queues for note in queue.notes]
    notes += queue_objects.missing_notes(queues, store)
    notes += [note for manifest in manifests for note in manifest.notes]
    notes += missing_dataset_notes(manifests, lambda name, ns: store.get("Dataset", name, ns) is not None)
    items = []
    for line in config_documents.apply(configs, ConfigStore(settings.home)):  # values never in the answer
        kind, _, rest = line.partition("/")
        name, _, action = rest.partition(" ")
        items.append({"kind": "Secret" if kind == "secret" else "ConfigMap", "name": name, "namespace": "default",
                      "action": action, "started": False, "message": line})
    try:
        for queue, (info, name, action) in zip(queues, queue_objects.apply(queues, store) if queues else [],
                                               strict=True):
            items.append({"kind": info.kind, "name": name, "namespace": queue.namespace, "action": action,
                          "started": False, "message": f"{info.resource}/{name} {action}"})
        applied = store.apply([manifest.body for manifest in manifests])
    except UserError as exc:
        raise ApiError(409, _one_line(str(exc))) from None
    for resource, action in applied:
        info = KINDS[resource.kind]
        started = info.category == "operation" and action != "unchanged"
        if started:
            operations.start(resource.kind, resource.name, resource.namespace)
        items.append({"kind": resource.kind, "name": resource.name, "namespace": resource.namespace,
                      "uid": resource.uid, "action": action, "started": started,
                      "message": f"{info.resource}/{resource.name} {action}"})
    try:
        done = apply_training(jobs, job_actions, job_store, store, user=caller(request))
    except UserError as exc:
        raise ApiError(409, _one_line(str(exc))) from None
    for manifest, (kind, name, action) in zip(jobs, done, strict=True):
        items.append({"kind": kind.kind, "name": name, "namespace": manifest.namespace, "action": action,
                      "started": manifest.spec is not None and action == "created",
                      "message": f"{kind.resource}/{name} {action}"})
        notes += [f"{kind.kind} {name}: {note}" for note in manifest.notes]
    try:
        done_serving = serving_objects.apply(served, store)
    except UserError as exc:
        raise ApiError(409, _one_line(str(exc))) from None
    for serving, action in done_serving:
        message = f"{serving.info.resource}/{serving.name} {action}"
        items.append({"kind": serving.info.kind, "name": serving.name, "namespace": serving.namespace,
                      "action": action, "started": False, "message": message})
        notes += [f"{serving.info.kind} {serving.name}: {note}" for note in serving.notes]
    notes += serving_objects.missing_notes(served, store, settings.volumes_dir)
    serving_lifecycle.start_applied(served, store)
    return {"items": items, "notes": notes}


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
    info = _kind(kind)
    if info.owner == "training":
        training_objects.delete(training_kinds.KINDS[info.kind], name, namespace, state_of(request).jobs,
                                _store(request))  # NotFoundError: 404
    elif info.owner == queue_kinds.OWNER:
        queue_objects.delete(queue_kinds.KINDS[info.kind], name, namespace, _store(request))
    elif info.owner == serving_kinds.OWNER:
        serving_objects.delete(serving_kinds.KINDS[info.kind], name, namespace, _store(request))
        if info.kind == "InferenceService":
            serving_lifecycle.stop(name, namespace)  # its model processes end with it
    elif not _store(request).delete(info.kind, name, namespace):
        raise _not_found(info, name, namespace)
    if info.kind == "Dataset":
        dataset_deleted(name, namespace)
    return {"kind": info.kind, "name": name, "namespace": namespace, "message": f'{info.resource} "{name}" deleted'}

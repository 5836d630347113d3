"""The write calls of KFP's artifact service: ``CreateArtifact``, ``CreateArtifactTask`` and their ``:batchCreate``.

They are how KFP's driver and launcher report what a task read and wrote; millpond's engine records that itself
(``store.lineage``), so these serve other clients that do the same. Checked as ``server/artifact_server.go``
checks them: every required field (400 naming it), the task (404 when unknown; its run must be the one given), the
artifact a link names (404), one namespace and one run per batch; authorized ``create`` on ``artifacts`` in the
namespace and ``update`` on the task's ``runs`` (granted by no Kubeflow role: KFP's own service accounts, here
the administrators). All or nothing: a refused batch stores nothing.

Simplified: an artifact is one row per URI (``store.lineage``), so creating one with a URI already recorded is a
409 naming the recorded artifact (KFP would store a second row).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from millpond.access import kfp
from millpond.errors import ConflictError
from millpond.server.artifact_routes import artifact_task_view, artifact_view, parse_io_type
from millpond.server.bodies import (
    ArtifactTaskBody,
    CreateArtifactBody,
    CreateArtifactsBulkBody,
    CreateArtifactTaskBody,
    CreateArtifactTasksBulkBody,
    Enum,
)
from millpond.server.errors import ApiError
from millpond.server.kfp_access import authorize, check_run, multi_user, namespace_of_run
from millpond.server.state import ServerState, state_of
from millpond.store.keys import new_id, utcnow
from millpond.store.lineage import ARTIFACT_TYPES, NewArtifact, TableRows, artifact_id, created_artifact_rows, link_rows

router = APIRouter(tags=["ArtifactService"])
MAX_BATCH = 1000


@router.post("/artifacts")
def create_artifact(body: CreateArtifactBody, request: Request) -> dict[str, Any]:
    return _create_artifacts(request, [body])[0]


@router.post("/artifacts:batchCreate")
def create_artifacts(body: CreateArtifactsBulkBody, request: Request) -> dict[str, Any]:
    if not body.artifacts:
        raise ApiError(400, "CreateArtifactsBulkRequest must contain at least one artifact")
    return {"artifacts": _create_artifacts(request, body.artifacts)}


@router.post("/artifact_tasks")
def create_artifact_task(body: CreateArtifactTaskBody, request: Request) -> dict[str, Any]:
    if body.artifact_task is None:
        raise ApiError(400, "CreateArtifactTaskRequest and artifact_task are required")
    return _create_links(request, [body.artifact_task])[0]


@router.post("/artifact_tasks:batchCreate")
def create_artifact_tasks(body: CreateArtifactTasksBulkBody, request: Request) -> dict[str, Any]:
    if not body.artifact_tasks:
        raise ApiError(400, "CreateArtifactTasksBulkRequest must contain at least one artifact task")
    return {"artifact_tasks": _create_links(request, body.artifact_tasks)}


def _create_artifacts(request: Request, bodies: list[CreateArtifactBody]) -> list[dict[str, Any]]:
    server = state_of(request)
    if len(bodies) > MAX_BATCH:
        raise ApiError(400, f"CreateArtifactsBulkRequest has {len(bodies)} artifacts, over the maximum of {MAX_BATCH}")
    made = [_new_artifact(server, request, body, index) for index, body in enumerate(bodies)]
    namespaces = {new.namespace for new in made}
    if len(namespaces) > 1:
        raise ApiError(400, "CreateArtifactsBulkRequest must use a single namespace: "
                            f"got {', '.join(sorted(namespaces))}")
    _authorize_create(request, made[0].namespace)
    for run_id in sorted({new.run_id for new in made}):
        _authorize_update(request, server, run_id)
    uris = [new.uri for new in made if new.uri]
    if len(set(uris)) < len(uris):
        raise ApiError(400, "CreateArtifactsBulkRequest names one uri twice")
    taken = server.lineage.existing_artifacts([new.artifact_id for new in made])
    if taken:
        raise ConflictError(f"an artifact with this uri is already recorded: {sorted(taken)[0]}")
    now = utcnow()
    server.lineage.write([rows for new in made for rows in created_artifact_rows(new, now)])
    return [artifact_view(server.lineage.find_artifact(new.artifact_id)) for new in made]


def _new_artifact(server: ServerState, request: Request, body: CreateArtifactBody, index: int) -> NewArtifact:
    """``validateCreateArtifactRequest`` and ``validateArtifactOwnershipNoAuth``: the fields, the task, its run."""
    where = f"artifact {index}: " if index else ""
    artifact = body.artifact
    if artifact is None:
        raise ApiError(400, f"{where}Artifact is required")
    if artifact.artifact_id:
        raise ApiError(400, f"{where}Artifact ID should not be set on create")
    if not artifact.namespace:
        raise ApiError(400, f"{where}Artifact namespace is required")
    kind = _artifact_type(artifact.type, where)
    for value, what in ((artifact.name, "Artifact name"), (body.run_id, "Run ID"), (body.task_id, "Task ID"),
                        (body.producer_key, "Producer key")):
        if not value:
            raise ApiError(400, f"{where}{what} is required")
    if kind == "Metric" and artifact.number_value is None:
        raise ApiError(400, f"{where}number_value is required for a Metric artifact")
    if kind in ("ClassificationMetric", "SlicedClassificationMetric") and artifact.metadata is None:
        raise ApiError(400, f"{where}No metric or metadata was found for {kind} artifact")
    namespace = artifact.namespace if multi_user(request) else ""  # KFP's ReplaceNamespace
    task = server.store.find_task(body.task_id or "")
    if task.run_id != body.run_id:
        raise ApiError(400, f"{where}Task ID does not belong to this Run ID")
    run_namespace = namespace_of_run(server.store, server.store.find_run(task.run_id))
    if multi_user(request) and run_namespace != namespace:
        raise ApiError(400, f"{where}artifact, task, and run must be in the same namespace: "
                            f"artifact={namespace} run={run_namespace}")
    uri = artifact.uri or ""
    return NewArtifact(
        artifact_id=artifact_id(uri) if uri else new_id(), name=artifact.name or "", artifact_type=kind, uri=uri,
        namespace=namespace, description=artifact.description or "", metadata=artifact.metadata or {},
        number_value=artifact.number_value, run_id=task.run_id, task_id=task.id, producer_task=task.name,
        producer_key=body.producer_key or "")


def _create_links(request: Request, bodies: list[ArtifactTaskBody]) -> list[dict[str, Any]]:
    server = state_of(request)
    if len(bodies) > MAX_BATCH:
        raise ApiError(400, f"CreateArtifactTasksBulkRequest has {len(bodies)} artifact tasks, "
                            f"over the maximum of {MAX_BATCH}")
    rows: list[TableRows] = []
    runs, namespaces = set(), set()
    now = utcnow()
    for body in bodies:
        for value, what in ((body.artifact_id, "artifact_id"), (body.task_id, "task_id"), (body.run_id, "run_id")):
            if not value:
                raise ApiError(400, f"artifact_task.{what} is required")
        io_type = parse_io_type(None if body.type is None else str(body.type))
        if io_type is None:
            raise ApiError(400, "artifact_task.type is required")
        if body.producer is None:
            raise ApiError(400, "artifact_task.producer is required")
        if not body.key:
            raise ApiError(400, "artifact_task.key is required")
        task = server.store.find_task(body.task_id or "")
        if task.run_id != body.run_id:
            raise ApiError(400, "artifact_task.run_id must match the task's run_id")
        artifact = server.lineage.find_artifact(body.artifact_id or "")
        namespace = namespace_of_run(server.store, server.store.find_run(task.run_id))
        if multi_user(request) and namespace and artifact.namespace and namespace != artifact.namespace:
            raise ApiError(400, f"artifact and task must be in the same namespace: artifact={artifact.namespace} "
                                f"task={namespace}")
        runs.add(task.run_id)
        namespaces.add(namespace)
        rows.append(link_rows(artifact.id, task.id, task.run_id, io_type, body.key, body.producer.task_name or "",
                              now))
    if len(bodies) > 1 and len(runs) > 1:
        raise ApiError(400, "CreateArtifactTasksBulkRequest must use a single run_id")
    _authorize_create(request, namespaces.pop())
    _authorize_update(request, server, runs.pop())
    server.lineage.write(rows)
    return [artifact_task_view(server.lineage.find_event(table.rows[0]["id"])) for table in rows]


def _artifact_type(value: Enum | None, where: str) -> str:
    """KFP's ``ArtifactType`` by name or number; unset (``TYPE_UNSPECIFIED``) is refused."""
    text = str(value) if value is not None else ""
    kind = ARTIFACT_TYPES[int(text)] if text.isdigit() and int(text) < len(ARTIFACT_TYPES) else text
    if kind == "TYPE_UNSPECIFIED" or not kind:
        raise ApiError(400, f"{where}Artifact type is required")
    if kind not in ARTIFACT_TYPES:
        raise ApiError(400, f"{where}invalid artifact type {text[:100]!r} (one of {', '.join(ARTIFACT_TYPES[1:])})")
    return kind


def _authorize_create(request: Request, namespace: str) -> None:
    if multi_user(request) and not namespace:
        raise ApiError(400, "A resource cannot have an empty namespace in multi-user mode")
    authorize(request, kfp.CREATE, kfp.ARTIFACTS, namespace,
              failure=f"Failed to create artifacts. Check if you have access to namespace {namespace}")


def _authorize_update(request: Request, server: ServerState, run_id: str) -> None:
    check_run(request, server.store, server.store.find_run(run_id), kfp.UPDATE)

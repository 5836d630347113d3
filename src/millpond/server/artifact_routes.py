"""KFP master's native artifact service (``backend/api/v2beta1/artifact.proto``, kubeflow/pipelines PR #13986): the
lineage ``store.lineage`` records, read as KFP's ``Artifact`` and ``ArtifactTask`` messages.

- ``GET /apis/v2beta1/artifacts`` (``namespace``, ``page_token``, ``page_size``, ``sort_by``, ``filter``) and
  ``GET /apis/v2beta1/artifacts/{artifact_id}``;
- ``GET /apis/v2beta1/artifact_tasks`` (``task_ids``, ``run_ids``, ``artifact_ids`` repeated, ``type`` an
  ``IOType``, and the same paging): at least one id list is required, as KFP's server says.

Authorized as ``server/artifact_server.go`` does in multi-user mode: artifacts on the resource ``artifacts``
(``get``/``list``) in the artifact's, or the listed, namespace; artifact-task links on ``runs`` (``get``) of each run
named, of each task's run, and in each artifact's namespace. Paged and filtered as every v2beta1 list here
(``server.listing``): a ``page_size`` over its maximum, a token or filter that is not one, a key the list has not
or a value of the wrong type is a 400; an unknown id a 404.

The ``POST`` calls are ``server.artifact_writes``'s.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from millpond.access import kfp
from millpond.server.errors import ApiError
from millpond.server.kfp_access import authorize, check_run, multi_user, required_namespace
from millpond.server.listing import MAX_IN_VALUES, list_query, next_page_token
from millpond.server.state import state_of
from millpond.store.lineage import IO_TYPES
from millpond.store.lineage_tables import LineageArtifact, LineageEvent
from millpond.store.timestamps import iso

router = APIRouter(tags=["ArtifactService"])


def artifact_view(artifact: LineageArtifact) -> dict[str, Any]:
    """KFP's ``Artifact``: its type is the ``ArtifactType`` name, its metadata the artifact's custom properties."""
    properties = artifact.properties or {}
    view: dict[str, Any] = {
        "artifact_id": artifact.id, "name": artifact.name, "description": properties.get("description", ""),
        "type": artifact.artifact_type, "uri": artifact.uri, "metadata": dict(artifact.custom_properties or {}),
        "created_at": iso(artifact.created_at), "namespace": artifact.namespace,
    }
    if isinstance(properties.get("number_value"), (int, float)):
        view["number_value"] = properties["number_value"]
    return view


def artifact_task_view(event: LineageEvent) -> dict[str, Any]:
    """KFP's ``ArtifactTask``: which task (an execution's id is its task's) read or wrote which artifact, how."""
    return {"id": event.id, "artifact_id": event.artifact_id, "run_id": event.run_id or "",
            "task_id": event.execution_id, "type": event.io_type, "producer": {"task_name": event.producer_task},
            "key": event.path}


@router.get("/artifacts")
def list_artifacts(
    request: Request, namespace: str | None = None, page_token: str | None = None, page_size: int | None = None,
    sort_by: str | None = None, filter: str | None = None,
) -> dict[str, Any]:
    server = state_of(request)
    query = list_query(filter, sort_by, page_token, page_size)
    scope: str | None = None  # single-user: every artifact (all of namespace "")
    if multi_user(request):
        scope = required_namespace(request, namespace, "An artifact")
        authorize(request, kfp.LIST, kfp.ARTIFACTS, scope,
                  failure=f"Failed to list artifacts due to authorization error. "
                          f"Check if you have access to namespace {scope}")
    page = server.lineage.page_artifacts(query, scope)
    return {"artifacts": [artifact_view(a) for a in page.items], "total_size": page.total,
            "next_page_token": next_page_token(page)}


@router.get("/artifacts/{artifact_id}")
def get_artifact(artifact_id: str, request: Request) -> dict[str, Any]:
    server = state_of(request)
    artifact = server.lineage.find_artifact(artifact_id)
    _check_artifact(request, artifact, kfp.GET)
    return artifact_view(artifact)


@router.get("/artifact_tasks")
def list_artifact_tasks(
    request: Request, task_ids: list[str] = Query(default=[]), run_ids: list[str] = Query(default=[]),  # noqa: B008
    artifact_ids: list[str] = Query(default=[]), type: str | None = None, page_token: str | None = None,  # noqa: B008, A002
    page_size: int | None = None, sort_by: str | None = None, filter: str | None = None,
) -> dict[str, Any]:
    server = state_of(request)
    query = list_query(filter, sort_by, page_token, page_size)
    if not (task_ids or run_ids or artifact_ids):
        raise ApiError(400, "Failed to list artifact tasks: at least one filter (task_ids, run_ids, or "
                            "artifact_ids) is required")
    if len(task_ids) + len(run_ids) + len(artifact_ids) > MAX_IN_VALUES:
        raise ApiError(400, f"Failed to list artifact tasks: more than {MAX_IN_VALUES} ids")
    io_type = parse_io_type(type)
    _check_links(request, task_ids, run_ids, artifact_ids)
    page = server.lineage.page_artifact_tasks(query, task_ids=task_ids, run_ids=run_ids,
                                              artifact_ids=artifact_ids, io_type=io_type)
    return {"artifact_tasks": [artifact_task_view(e) for e in page.items], "total_size": page.total,
            "next_page_token": next_page_token(page)}


def parse_io_type(text: str | None) -> str | None:
    """An ``IOType`` given by name or number (as grpc-gateway takes enums); UNSPECIFIED (or none) filters nothing."""
    if text is None or text in ("", "UNSPECIFIED", "0"):
        return None
    if text.isdigit() and int(text) < len(IO_TYPES):
        return IO_TYPES[int(text)]
    if text in IO_TYPES:
        return text
    raise ApiError(400, f"invalid type {text[:100]!r}: expected an IOType ({', '.join(IO_TYPES)})")


def _check_artifact(request: Request, artifact: LineageArtifact, verb: str) -> None:
    """``canAccessArtifacts``: ``verb`` on ``artifacts`` in the artifact's namespace (multi-user mode only)."""
    if not multi_user(request):
        return
    if not artifact.namespace:
        raise ApiError(400, f"artifact {artifact.id} has an empty namespace")
    authorize(request, verb, kfp.ARTIFACTS, artifact.namespace, artifact.name,
              failure=f"Failed to access artifact {artifact.id}. "
                      f"Check if you have access to namespace {artifact.namespace}")


def _check_links(request: Request, task_ids: list[str], run_ids: list[str], artifact_ids: list[str]) -> None:
    """``authorizeArtifactTaskAccess``: ``get`` on ``runs`` for each run named, each task's run, and in each
    artifact's namespace. An unknown task or artifact is a 404 in either mode (KFP looks them up first); an
    unknown run only in multi-user mode (single-user KFP asks nothing about runs)."""
    server = state_of(request)
    runs = {server.lineage.find_execution(task_id).run_id or "" for task_id in set(task_ids)}
    namespaces = {server.lineage.find_artifact(a).namespace for a in set(artifact_ids)}
    if not multi_user(request):
        return
    for run_id in sorted((runs | set(run_ids)) - {""}):
        check_run(request, server.store, server.store.find_run(run_id), kfp.GET)
    for namespace in sorted(namespaces):
        if not namespace:
            raise ApiError(400, "A resource cannot have an empty namespace in multi-user mode")
        authorize(request, kfp.GET, kfp.RUNS, namespace,
                  failure=f"Failed to access resource. Check if you have access to namespace {namespace}")

"""Read-only lineage routes of millpond's own, for the UI's Executions and artifact pages (``ui/pages/executions.js``,
``execution-detail.js``, ``artifact-detail.js``): what KFP's UI reads from ML Metadata and KFP's v2beta1 artifact API
does not answer (it has no executions), under ``/ui-api/lineage/`` as the UI's other helpers:

- ``GET /ui-api/lineage/executions`` (``namespace``, ``page_size``, ``page_token``, ``sort_by``, ``filter``): the
  executions, newest first, paged, sorted and filtered as every v2beta1 list (``server.listing``) on ``id``,
  ``name``, ``type``, ``state``, ``created_at``, ``updated_at``, ``namespace``, ``run_id``;
- ``GET /ui-api/lineage/executions/{execution_id}``: one execution, its declared inputs and outputs and its actual
  ones (``server.lineage_reads``);
- ``GET /ui-api/lineage/artifacts/{artifact_id}``: one artifact's lineage neighbourhood, the Lineage Explorer's step.

Multi-user mode authorizes through the artifact API's own function (``kfp_access.authorize``) with its attributes:
an execution is a task of a run, so ``list``/``get`` on ``runs`` in its namespace (KFP authorizes its tasks, and the
artifact API its artifact-task links, as the run's); an artifact ``get`` on ``artifacts`` and on ``runs`` in its
namespace (the artifact, then its links). The list needs ``namespace`` (400 without, as KFP's lists); one object is
looked up first (404 when unknown, as the artifact API), then refused (403) outside the caller's namespaces. A
neighbour in another namespace the caller may not read is left out of the answer.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from millpond.access import kfp
from millpond.access.attributes import Attributes
from millpond.server.errors import ApiError
from millpond.server.kfp_access import authorize, multi_user, required_namespace
from millpond.server.lineage_reads import Visible, artifact_lineage, execution_detail, execution_view
from millpond.server.listing import list_query, next_page_token
from millpond.server.route_access import allows
from millpond.server.state import state_of

router = APIRouter(prefix="/ui-api/lineage", tags=["UI"])


@router.get("/executions")
def list_executions(
    request: Request, namespace: str | None = None, page_token: str | None = None, page_size: int | None = None,
    sort_by: str | None = None, filter: str | None = None,  # noqa: A002 — KFP's parameter name
) -> dict[str, Any]:
    query = list_query(filter, sort_by, page_token, page_size)
    scope: str | None = None  # single-user: every execution
    if multi_user(request):
        scope = required_namespace(request, namespace, "An execution")
        authorize(request, kfp.LIST, kfp.RUNS, scope,
                  failure=f"Failed to list executions due to authorization error. "
                          f"Check if you have access to namespace {scope}")
    page = state_of(request).lineage.page_executions(query, scope)
    return {"executions": [execution_view(e) for e in page.items], "total_size": page.total,
            "next_page_token": next_page_token(page)}


@router.get("/executions/{execution_id}")
def get_execution(execution_id: str, request: Request) -> dict[str, Any]:
    server = state_of(request)
    execution = server.lineage.find_execution(execution_id)
    _check_namespace(request, execution.namespace, f"execution {execution.id}")
    return execution_detail(server.lineage, server.store, execution, _visible(request))


@router.get("/artifacts/{artifact_id}")
def get_artifact_lineage(artifact_id: str, request: Request) -> dict[str, Any]:
    server = state_of(request)
    artifact = server.lineage.find_artifact(artifact_id)
    if multi_user(request):
        _check_namespace(request, artifact.namespace, f"artifact {artifact.id}")
        authorize(request, kfp.GET, kfp.ARTIFACTS, artifact.namespace, artifact.name,
                  failure=f"Failed to access artifact {artifact.id}. "
                          f"Check if you have access to namespace {artifact.namespace}")
    return artifact_lineage(server.lineage, artifact, _visible(request))


def _check_namespace(request: Request, namespace: str, what: str) -> None:
    """``get`` on ``runs`` in ``namespace`` (multi-user mode only; an empty namespace is KFP's 400 there)."""
    if not multi_user(request):
        return
    if not namespace:
        raise ApiError(400, f"{what} has an empty namespace")
    authorize(request, kfp.GET, kfp.RUNS, namespace,
              failure=f"Failed to access {what}. Check if you have access to namespace {namespace}")


def _visible(request: Request) -> Visible:
    """Whether the caller may read lineage of a namespace (``get`` on ``runs`` and ``artifacts`` there), asked once
    a namespace per request; everything in single-user mode."""
    if not multi_user(request):
        return lambda _namespace: True
    answers: dict[str, bool] = {}

    def visible(namespace: str) -> bool:
        if namespace not in answers:
            answers[namespace] = bool(namespace) and all(
                allows(request, Attributes(kfp.GET, namespace, kfp.GROUP, resource))
                for resource in (kfp.RUNS, kfp.ARTIFACTS))
        return answers[namespace]

    return visible

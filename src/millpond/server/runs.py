"""Runs: created from inline IR through ``prepare_run`` (as ``millpond run`` does), executed by a worker.

States are the engine's, which are already KFP's RuntimeState names (PENDING, RUNNING,
SUCCEEDED, FAILED, SKIPPED, CANCELED), so ``kfp.Client().wait_for_run_completion`` works as is.
In multi-user mode a run belongs to its experiment's namespace and every call is authorized on ``runs``
there (``kfp_access.check_run``: KFP's ``canAccessRun``), before anything is changed.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from millpond.access import kfp
from millpond.pipelines.run_actions import RunStillRunning, refuse_elsewhere
from millpond.pipelines.run_actions import delete_run as delete_recorded_run
from millpond.pipelines.start import StartRequest, start_run
from millpond.server.bodies import RunBody
from millpond.server.callers import caller
from millpond.server.errors import ApiError
from millpond.server.kfp_access import authorize, check_run, create_scope, list_scope
from millpond.server.listing import list_query, next_page_token
from millpond.server.pipelines import readable_version
from millpond.server.state import ServerState, state_of
from millpond.store.journal import FINAL_STATES
from millpond.store.keys import utcnow
from millpond.store.models import Run, Task
from millpond.store.timestamps import iso

router = APIRouter(tags=["RunService"])
_RUNTIME_STATES = {"PENDING", "RUNNING", "SUCCEEDED", "SKIPPED", "FAILED", "CANCELING", "CANCELED", "PAUSED"}


def _state(value: str) -> str:
    return value if value in _RUNTIME_STATES else "RUNTIME_STATE_UNSPECIFIED"


def run_view(run: Run, tasks: list[Task] | None = None, full: bool = True) -> dict[str, Any]:
    view: dict[str, Any] = {
        "run_id": run.id, "display_name": run.name, "experiment_id": run.experiment_id,
        "storage_state": run.storage_state or "AVAILABLE",
        "runtime_config": {"parameters": run.parameters or {}, "pipeline_root": run.pipeline_root},
        "service_account": "", "created_at": iso(run.created_at), "state": _state(run.state),
    }
    if run.pipeline_version_id:
        view["pipeline_version_reference"] = {
            "pipeline_id": run.pipeline_id, "pipeline_version_id": run.pipeline_version_id
        }
    if run.started_at:
        view["scheduled_at"] = iso(run.started_at)
    if run.finished_at:
        view["finished_at"] = iso(run.finished_at)
    if run.error:
        view["error"] = {"code": 2, "message": run.error, "details": []}
    if run.recurring_run_id:
        view["recurring_run_id"] = run.recurring_run_id
    if full and run.workflow is not None:  # kfp 1.x: the workflow it ran, as Kubeflow returns a v1 run's spec
        view["pipeline_spec"] = run.workflow
    elif full:
        view["pipeline_spec"] = run.pipeline_spec
        if run.platform_spec:
            view["platform_spec"] = run.platform_spec
    if tasks is not None:
        view["run_details"] = {"task_details": [_task_view(t) for t in tasks]}
    return view


def _task_view(task: Task) -> dict[str, Any]:
    view: dict[str, Any] = {
        "run_id": task.run_id, "task_id": task.id, "display_name": task.name, "state": _state(task.state),
        "create_time": iso(task.created_at),
    }
    if task.parent_id:
        view["parent_task_id"] = task.parent_id
    if task.started_at:
        view["start_time"] = iso(task.started_at)
    if task.finished_at:
        view["end_time"] = iso(task.finished_at)
    if task.error:
        view["error"] = {"code": 2, "message": task.error, "details": []}
    return view


@router.post("/runs/{run_id}:terminate")
def terminate_run(run_id: str, request: Request) -> dict[str, Any]:
    """Stop the run's engine (server worker or ``millpond run``): it records CANCELED and stops its tasks."""
    server = state_of(request)
    run = server.store.find_run(run_id)
    check_run(request, server.store, run, kfp.TERMINATE)
    if run.state in FINAL_STATES:
        return {}
    refuse_elsewhere(run, "terminated")
    if not server.executor.terminate(run.id, run.engine_pid, run.engine_start):
        server.store.update_run(run.id, state="CANCELED", error="terminated", finished_at=utcnow())
    return {}


@router.post("/runs/{run_id}:retry")
def retry_run(run_id: str, request: Request) -> dict[str, Any]:
    """Re-run the failed or canceled part of a finished run (succeeded tasks keep their outputs)."""
    server = state_of(request)
    run = server.store.find_run(run_id)
    check_run(request, server.store, run, kfp.RETRY)
    if run.state not in ("FAILED", "CANCELED"):
        raise ApiError(412, f"run {run.id} is {run.state}; only a FAILED or CANCELED run can be retried")
    server.store.update_run(run.id, state="PENDING", error=None, finished_at=None)
    server.executor.start(run.id, retry=True)
    return {}


@router.post("/runs")
def create_run(body: RunBody, request: Request) -> dict[str, Any]:
    server = state_of(request)
    namespace = create_scope(request, server.store, body.experiment_id, None, "a run")
    authorize(request, kfp.CREATE, kfp.RUNS, namespace, body.display_name or "",
              failure="Failed to create a run due to authorization error. "
                      f"Check if you have write permissions to namespace {namespace}")
    reference = body.pipeline_version_reference
    pipeline_id = reference.pipeline_id if reference else None
    version_id = (reference.pipeline_version_id if reference else None) or body.pipeline_version_id
    if body.pipeline_spec is None and (pipeline_id or version_id):  # its pipeline must be one the caller may read
        readable_version(request, pipeline_id, version_id)
    return run_view(submit_run(server, body, caller(request)), [])


def submit_run(server: ServerState, body: RunBody, user: str = "") -> Run:
    """Record a run of ``body``'s inline spec or pipeline version, as ``millpond run`` does, and start its worker
    (its queued tasks record ``user``, the caller)."""
    reference = body.pipeline_version_reference
    config = body.runtime_config
    request = StartRequest(
        display_name=body.display_name or None, pipeline_spec=body.pipeline_spec, platform_spec=body.platform_spec,
        pipeline_id=reference.pipeline_id if reference else None,
        pipeline_version_id=(reference.pipeline_version_id if reference else None) or body.pipeline_version_id,
        parameters=dict(config.parameters or {}) if config else {},
        pipeline_root=config.pipeline_root if config and config.pipeline_root else None,
        experiment_id=body.experiment_id or None,
        queue=body.queue_name or "", priority=body.priority_class_name or "", user=user,
    )
    return start_run(server.store, server.pipelines, server.settings, request, server.executor.start)


@router.get("/runs")
def list_runs(
    request: Request, page_token: str | None = None, page_size: int | None = None, sort_by: str | None = None,
    filter: str | None = None, experiment_id: str | None = None, namespace: str | None = None,
) -> dict[str, Any]:
    store = state_of(request).store
    query = list_query(filter, sort_by, page_token, page_size)
    scope = list_scope(request, store, namespace, experiment_id, kfp.RUNS)  # None: every namespace
    page = store.page_runs(query, experiment_id, scope)
    return {"runs": [run_view(run, full=False) for run in page.items], "total_size": page.total,
            "next_page_token": next_page_token(page)}


@router.post("/runs/{run_id}:archive")
def archive_run(run_id: str, request: Request) -> dict[str, Any]:
    """Hide a run from the default views (its records and outputs stay); a run in flight keeps running."""
    server = state_of(request)
    run = server.store.find_run(run_id)
    check_run(request, server.store, run, kfp.ARCHIVE)
    server.store.update_run(run.id, storage_state="ARCHIVED")
    return {}


@router.post("/runs/{run_id}:unarchive")
def unarchive_run(run_id: str, request: Request) -> dict[str, Any]:
    server = state_of(request)
    run = server.store.find_run(run_id)
    check_run(request, server.store, run, kfp.UNARCHIVE)
    server.store.update_run(run.id, storage_state="AVAILABLE")
    return {}


@router.get("/runs/{run_id}")
def get_run(run_id: str, request: Request) -> dict[str, Any]:
    server = state_of(request)
    run = server.store.find_run(run_id)
    check_run(request, server.store, run, kfp.GET)
    return run_view(run, server.store.list_tasks(run.id))


@router.delete("/runs/{run_id}")
def delete_run(run_id: str, request: Request) -> dict[str, Any]:
    """Delete the run as ``millpond runs delete`` does.

    It is terminated first when in flight; its logs and default-root artifacts go too.
    """
    server = state_of(request)
    run = server.store.find_run(run_id)
    check_run(request, server.store, run, kfp.DELETE)
    try:
        delete_recorded_run(server.store, server.settings, run.id)
    except RunStillRunning as exc:
        raise ApiError(409, str(exc)) from None
    return {}

"""Experiments: the same rows ``millpond run --experiment`` files runs under.

In multi-user mode each belongs to a namespace (names unique within it) and every call is authorized on
``experiments`` there (``kfp_access``); in single-user mode the namespace is ``""`` and nothing is asked.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from millpond.access import kfp
from millpond.pipelines.names import check_display_name
from millpond.server.bodies import ExperimentBody
from millpond.server.errors import ApiError
from millpond.server.kfp_access import authorize, check_experiment, multi_user, required_namespace
from millpond.server.listing import list_query, next_page_token
from millpond.server.state import state_of
from millpond.store.models import Experiment
from millpond.store.timestamps import iso

router = APIRouter(tags=["ExperimentService"])


def experiment_view(experiment: Experiment, last_run: Any = None) -> dict[str, Any]:
    view = {
        "experiment_id": experiment.id, "display_name": experiment.name, "description": experiment.description or "",
        "created_at": iso(experiment.created_at), "namespace": experiment.namespace,
        "storage_state": experiment.storage_state or "AVAILABLE",
    }
    if last_run is not None:
        view["last_run_created_at"] = iso(last_run)
    return view


@router.post("/experiments")
def create_experiment(body: ExperimentBody, request: Request) -> dict[str, Any]:
    name = body.display_name.strip()
    if not name:
        raise ApiError(400, "display_name must not be empty")
    check_display_name("display_name", name)
    namespace = required_namespace(request, body.namespace, "An experiment")
    authorize(request, kfp.CREATE, kfp.EXPERIMENTS, namespace, name,
              failure="Failed to create experiment due to authorization error. "
                      f"Check if you have write permissions to namespace {namespace}")
    return experiment_view(state_of(request).store.create_experiment(name, body.description or "", namespace))


@router.get("/experiments")
def list_experiments(
    request: Request, page_token: str | None = None, page_size: int | None = None, sort_by: str | None = None,
    filter: str | None = None, namespace: str | None = None,
) -> dict[str, Any]:
    query = list_query(filter, sort_by, page_token, page_size)
    scope = required_namespace(request, namespace, "An experiment") if multi_user(request) else None
    if scope is not None:  # multi-user mode: one namespace's, which the caller may list
        authorize(request, kfp.LIST, kfp.EXPERIMENTS, scope,
                  failure="Failed to list experiments due to authorization error. "
                          f"Check if you have permission to access namespace {scope}")
    page = state_of(request).store.page_experiments(query, scope)
    return {"experiments": [experiment_view(e, last) for e, last in page.items], "total_size": page.total,
            "next_page_token": next_page_token(page)}


@router.get("/experiments/{experiment_id}")
def get_experiment(experiment_id: str, request: Request) -> dict[str, Any]:
    experiment = state_of(request).store.find_experiment(experiment_id)
    check_experiment(request, experiment, kfp.GET)
    return experiment_view(experiment)


@router.post("/experiments/{experiment_id}:archive")
def archive_experiment(experiment_id: str, request: Request) -> dict[str, Any]:
    """Archive an experiment and, as Kubeflow does, all of its runs, and disable its recurring runs."""
    check_experiment(request, state_of(request).store.find_experiment(experiment_id), kfp.ARCHIVE)
    state_of(request).store.set_experiment_storage_state(experiment_id, "ARCHIVED", with_runs=True)
    state_of(request).recurring.disable_for_experiment(experiment_id)  # as Kubeflow disables its jobs
    return {}


@router.post("/experiments/{experiment_id}:unarchive")
def unarchive_experiment(experiment_id: str, request: Request) -> dict[str, Any]:
    """Unarchive an experiment; its runs stay archived until unarchived one by one (as in Kubeflow)."""
    check_experiment(request, state_of(request).store.find_experiment(experiment_id), kfp.UNARCHIVE)
    state_of(request).store.set_experiment_storage_state(experiment_id, "AVAILABLE")
    return {}


@router.delete("/experiments/{experiment_id}")
def delete_experiment(experiment_id: str, request: Request) -> dict[str, Any]:
    """Delete an experiment and its finished runs; refused while one of its runs is in flight."""
    store = state_of(request).store
    experiment = store.find_experiment(experiment_id)
    check_experiment(request, experiment, kfp.DELETE)
    busy = store.runs_in_flight(experiment_id=experiment.id)
    if busy:
        raise ApiError(412, f"experiment {experiment.name!r} has {busy} run(s) in flight; terminate them first")
    store.delete_experiment(experiment.id)
    return {}

"""Experiments: the same rows ``millpond run --experiment`` files runs under."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from millpond.pipelines.names import check_display_name
from millpond.server.bodies import ExperimentBody
from millpond.server.errors import ApiError
from millpond.server.listing import list_query, next_page_token
from millpond.server.state import state_of
from millpond.store.models import Experiment
from millpond.store.timestamps import iso

router = APIRouter(tags=["ExperimentService"])


def experiment_view(experiment: Experiment, last_run: Any = None) -> dict[str, Any]:
    view = {
        "experiment_id": experiment.id, "display_name": experiment.name, "description": experiment.description or "",
        "created_at": iso(experiment.created_at), "namespace": "",
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
    return experiment_view(state_of(request).store.create_experiment(name, body.description or ""))


@router.get("/experiments")
def list_experiments(
    request: Request, page_token: str | None = None, page_size: int | None = None, sort_by: str | None = None,
    filter: str | None = None, namespace: str | None = None,
) -> dict[str, Any]:
    page = state_of(request).store.page_experiments(list_query(filter, sort_by, page_token, page_size))
    return {"experiments": [experiment_view(e, last) for e, last in page.items], "total_size": page.total,
            "next_page_token": next_page_token(page)}


@router.get("/experiments/{experiment_id}")
def get_experiment(experiment_id: str, request: Request) -> dict[str, Any]:
    return experiment_view(state_of(request).store.find_experiment(experiment_id))


@router.post("/experiments/{experiment_id}:archive")
def archive_experiment(experiment_id: str, request: Request) -> dict[str, Any]:
    """Archive an experiment and, as Kubeflow does, all of its runs, and disable its recurring runs."""
    state_of(request).store.set_experiment_storage_state(experiment_id, "ARCHIVED", with_runs=True)
    state_of(request).recurring.disable_for_experiment(experiment_id)  # as Kubeflow disables its jobs
    return {}


@router.post("/experiments/{experiment_id}:unarchive")
def unarchive_experiment(experiment_id: str, request: Request) -> dict[str, Any]:
    """Unarchive an experiment; its runs stay archived until unarchived one by one (as in Kubeflow)."""
    state_of(request).store.set_experiment_storage_state(experiment_id, "AVAILABLE")
    return {}


@router.delete("/experiments/{experiment_id}")
def delete_experiment(experiment_id: str, request: Request) -> dict[str, Any]:
    """Delete an experiment and its finished runs; refused while one of its runs is in flight."""
    store = state_of(request).store
    experiment = store.find_experiment(experiment_id)
    busy = store.runs_in_flight(experiment_id=experiment.id)
    if busy:
        raise ApiError(412, f"experiment {experiment.name!r} has {busy} run(s) in flight; terminate them first")
    store.delete_experiment(experiment.id)
    return {}

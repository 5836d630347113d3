"""Experiments: the same rows ``millpond run --experiment`` files runs under."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy import delete, func, select, update

from millpond.pipelines.recurring import disable_for_experiment
from millpond.server.app import state_of
from millpond.server.bodies import ExperimentBody
from millpond.server.errors import ApiError
from millpond.server.listing import apply_filter, apply_sort, page
from millpond.store.journal import FINAL_STATES
from millpond.store.models import Experiment, Run
from millpond.store.timestamps import iso

router = APIRouter(tags=["ExperimentService"])
_COLUMNS = {"display_name": Experiment.name, "name": Experiment.name, "experiment_id": Experiment.id,
            "id": Experiment.id, "created_at": Experiment.created_at, "description": Experiment.description,
            "storage_state": Experiment.storage_state}


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
    with state_of(request).sessions() as session:
        if session.scalar(select(Experiment.id).where(Experiment.name == name)):
            raise ApiError(409, f"experiment {name!r} already exists")
        experiment = Experiment(name=name, description=body.description or "")
        session.add(experiment)
        session.commit()
        return experiment_view(experiment)


@router.get("/experiments")
def list_experiments(
    request: Request, page_token: str | None = None, page_size: int | None = None, sort_by: str | None = None,
    filter: str | None = None, namespace: str | None = None,
) -> dict[str, Any]:
    last_run = select(func.max(Run.created_at)).where(Run.experiment_id == Experiment.id).scalar_subquery()
    query = select(Experiment, last_run)
    query = apply_sort(apply_filter(query, filter, _COLUMNS), sort_by, _COLUMNS, Experiment.created_at.asc())
    with state_of(request).sessions() as session:
        rows, total, token = page(session, query, page_token, page_size)
    return {"experiments": [experiment_view(e, last) for e, last in rows], "total_size": total, "next_page_token": token}


@router.get("/experiments/{experiment_id}")
def get_experiment(experiment_id: str, request: Request) -> dict[str, Any]:
    with state_of(request).sessions() as session:
        return experiment_view(_find(session, experiment_id))


@router.post("/experiments/{experiment_id}:archive")
def archive_experiment(experiment_id: str, request: Request) -> dict[str, Any]:
    """Archive an experiment and, as Kubeflow does, all of its runs, and disable its recurring runs."""
    with state_of(request).sessions() as session:
        experiment = _find(session, experiment_id)
        experiment.storage_state = "ARCHIVED"
        session.execute(update(Run).where(Run.experiment_id == experiment.id).values(storage_state="ARCHIVED"))
        session.commit()
    disable_for_experiment(state_of(request).sessions, experiment_id)  # as Kubeflow disables its jobs
    return {}


@router.post("/experiments/{experiment_id}:unarchive")
def unarchive_experiment(experiment_id: str, request: Request) -> dict[str, Any]:
    """Unarchive an experiment; its runs stay archived until unarchived one by one (as in Kubeflow)."""
    with state_of(request).sessions() as session:
        _find(session, experiment_id).storage_state = "AVAILABLE"
        session.commit()
    return {}


@router.delete("/experiments/{experiment_id}")
def delete_experiment(experiment_id: str, request: Request) -> dict[str, Any]:
    """Delete an experiment and its finished runs; refused while one of its runs is in flight."""
    with state_of(request).sessions() as session:
        experiment = _find(session, experiment_id)
        busy = session.scalar(select(func.count()).where(Run.experiment_id == experiment.id, Run.state.not_in(FINAL_STATES)))
        if busy:
            raise ApiError(412, f"experiment {experiment.name!r} has {busy} run(s) in flight; terminate them first")
        session.execute(delete(Run).where(Run.experiment_id == experiment.id))
        session.execute(delete(Experiment).where(Experiment.id == experiment.id))
        session.commit()
    return {}


def _find(session: Any, experiment_id: str) -> Experiment:
    experiment = session.get(Experiment, experiment_id)
    if experiment is None:
        raise ApiError(404, f"no experiment with id {experiment_id!r}")
    return experiment  # type: ignore[no-any-return]

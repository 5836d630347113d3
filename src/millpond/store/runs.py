"""Reading and writing runs, tasks, experiments and artifacts: short transactions, one per change.

Each write commits at once, so another process (``millpond runs list``, a second run, the
server) sees progress live and a killed engine leaves a consistent record behind.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from millpond.errors import UserError
from millpond.store.db import session_factory
from millpond.store.models import Artifact, Experiment, Run, Task, utcnow

DEFAULT_EXPERIMENT = "Default"
FINAL_STATES = ("SUCCEEDED", "FAILED", "SKIPPED", "CANCELED")


class RunStore:
    """The metadata store of one millpond home (or database URL)."""

    def __init__(self, database_url: str) -> None:
        self._sessions: sessionmaker[Session] = session_factory(database_url)

    # --- experiments --------------------------------------------------------------------
    def ensure_experiment(self, name: str, description: str = "") -> Experiment:
        with self._sessions() as session:
            found = session.scalar(select(Experiment).where(Experiment.name == name))
            if found:
                return found
            experiment = Experiment(name=name, description=description)
            session.add(experiment)
            try:
                session.commit()
            except Exception:  # another process created it first
                session.rollback()
                found = session.scalar(select(Experiment).where(Experiment.name == name))
                if found is None:
                    raise
                return found
            return experiment

    def list_experiments(self) -> list[Experiment]:
        with self._sessions() as session:
            return list(session.scalars(select(Experiment).order_by(Experiment.created_at)))

    # --- runs ---------------------------------------------------------------------------
    def create_run(
        self,
        *,
        name: str,
        experiment: str,
        pipeline_name: str,
        pipeline_spec: dict[str, Any],
        platform_spec: dict[str, Any] | None,
        parameters: dict[str, Any],
        pipeline_root: str,
        run_id: str | None = None,
    ) -> Run:
        experiment_row = self.ensure_experiment(experiment)
        with self._sessions() as session:
            run = Run(
                name=name,
                experiment_id=experiment_row.id,
                pipeline_name=pipeline_name,
                pipeline_spec=pipeline_spec,
                platform_spec=platform_spec,
                parameters=parameters,
                pipeline_root=pipeline_root,
                state="PENDING",
                outputs={},
            )
            if run_id:
                run.id = run_id
            session.add(run)
            session.commit()
            return run

    def update_run(self, run_id: str, **fields: Any) -> None:
        with self._sessions() as session:
            run = session.get(Run, run_id)
            if run is None:
                raise UserError(f"no run with id {run_id}")
            for key, value in fields.items():
                setattr(run, key, value)
            session.commit()

    def get_run(self, run_id: str) -> Run:
        with self._sessions() as session:
            run = session.get(Run, run_id)
            if run is None:
                matches = list(session.scalars(select(Run).where(Run.id.startswith(run_id)).limit(2)))
                if len(matches) == 1:
                    return matches[0]
                raise UserError(f"no run with id {run_id!r}" if not matches else f"run id {run_id!r} is ambiguous")
            return run

    def list_runs(self, experiment: str | None = None, limit: int | None = None) -> list[tuple[Run, str]]:
        """Newest first, each with its experiment's name."""
        with self._sessions() as session:
            query = select(Run, Experiment.name).join(Experiment, Run.experiment_id == Experiment.id)
            if experiment:
                query = query.where(Experiment.name == experiment)
            query = query.order_by(Run.created_at.desc())
            if limit:
                query = query.limit(limit)
            return [(run, exp_name) for run, exp_name in session.execute(query)]

    def experiment_name(self, experiment_id: str) -> str:
        with self._sessions() as session:
            experiment = session.get(Experiment, experiment_id)
            return experiment.name if experiment else ""

    # --- tasks --------------------------------------------------------------------------
    def start_task(
        self,
        *,
        run_id: str,
        path: str,
        name: str,
        kind: str,
        component: str,
        parent_id: str | None,
        image: str | None = None,
        inputs: dict[str, Any] | None = None,
        log_path: str | None = None,
        state: str = "RUNNING",
        task_id: str | None = None,
    ) -> str:
        """Record a task as started (or decided, e.g. SKIPPED); a resumed run reuses the row of a path."""
        now = utcnow()
        with self._sessions() as session:
            task = session.scalar(select(Task).where(Task.run_id == run_id, Task.path == path))
            if task is None:
                task = Task(run_id=run_id, path=path, attempts=0, cached=False, outputs={})
                if task_id:
                    task.id = task_id
                session.add(task)
            task.name, task.kind, task.component, task.parent_id = name, kind, component, parent_id
            task.image, task.inputs, task.log_path, task.state = image, inputs or {}, log_path, state
            task.started_at = now
            task.finished_at = now if state in FINAL_STATES else None
            task.error = None
            session.commit()
            return task.id

    def update_task(self, task_id: str, **fields: Any) -> None:
        with self._sessions() as session:
            task = session.get(Task, task_id)
            if task is None:
                return
            for key, value in fields.items():
                setattr(task, key, value)
            if fields.get("state") in FINAL_STATES and "finished_at" not in fields:
                task.finished_at = utcnow()
            session.commit()

    def finish_task(
        self,
        task_id: str,
        *,
        state: str,
        outputs: dict[str, Any] | None = None,
        error: str | None = None,
        exit_code: int | None = None,
        artifacts: list[dict[str, Any]] | None = None,
        run_id: str | None = None,
        attempts: int | None = None,
    ) -> None:
        """Record a task's end and its artifacts in one transaction."""
        with self._sessions() as session:
            task = session.get(Task, task_id)
            if task is None:
                return
            task.state, task.error, task.exit_code = state, error, exit_code
            if attempts is not None:
                task.attempts = attempts
            task.outputs = outputs or {}
            task.finished_at = utcnow()
            for artifact in artifacts or []:
                session.add(
                    Artifact(
                        run_id=run_id or task.run_id,
                        task_id=task_id,
                        name=artifact["name"],
                        type=artifact["type"]["schemaTitle"],
                        uri=artifact["uri"],
                        artifact_metadata=artifact.get("metadata", {}),
                    )
                )
            session.commit()

    def list_tasks(self, run_id: str) -> list[Task]:
        with self._sessions() as session:
            return list(session.scalars(select(Task).where(Task.run_id == run_id).order_by(Task.created_at, Task.path)))

    def list_artifacts(self, run_id: str) -> list[Artifact]:
        with self._sessions() as session:
            return list(session.scalars(select(Artifact).where(Artifact.run_id == run_id).order_by(Artifact.created_at)))


def iso(moment: dt.datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.isoformat()

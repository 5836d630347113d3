"""Reading and writing runs, tasks, experiments and artifacts: short transactions, one per change.

Each write commits at once, so another process (``millpond runs list``, a second run, the
server) sees progress live and a killed engine leaves a consistent record behind.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session, sessionmaker

from millpond.errors import NotFoundError, UserError
from millpond.store.db import session_factory
from millpond.store.journal import FINAL_STATES, task_start_fields
from millpond.store.models import Artifact, CacheEntry, Experiment, Run, Task, new_id, utcnow
from millpond.store.timestamps import iso  # noqa: F401 - kept importable from here

_TASKS = Task.__table__


class RunStore:
    """The metadata store of one millpond home (or database URL)."""

    def __init__(self, database_url: str) -> None:
        self._sessions: sessionmaker[Session] = session_factory(database_url)
        self._engine = self._sessions.kw["bind"]
        self._writer: Connection | None = None
        self._write_lock = threading.Lock()
        self._has_rows: dict[str, bool] = {}

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
                raise NotFoundError(f"no run with id {run_id}")
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
                raise NotFoundError(f"no run with id {run_id!r}") if not matches else UserError(f"run id {run_id!r} is ambiguous")
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

    def cancel_engineless(self, run_id: str, reason: str) -> bool:
        """Record a run whose engine is gone as CANCELED, with its unfinished tasks; False if it had ended meanwhile.

        One conditional transaction: an engine that recorded the run's end in the meantime wins.
        """
        now = utcnow()
        with self._sessions() as session:
            done = session.execute(
                update(Run).where(Run.id == run_id, Run.state.not_in(FINAL_STATES))
                .values(state="CANCELED", error=reason, finished_at=now)
            )
            if done.rowcount != 1:  # type: ignore[attr-defined]
                session.rollback()
                return False
            session.execute(
                update(Task).where(Task.run_id == run_id, Task.state.not_in(FINAL_STATES))
                .values(state="CANCELED", error=reason, finished_at=now)
            )
            session.commit()
            return True

    def delete_run(self, run_id: str) -> None:
        """Forget a run: its row, tasks, artifact records and the cache entries it produced (files are the caller's)."""
        with self._sessions() as session:
            session.execute(delete(CacheEntry).where(CacheEntry.run_id == run_id))
            session.execute(delete(Artifact).where(Artifact.run_id == run_id))
            session.execute(delete(Task).where(Task.run_id == run_id))
            session.execute(delete(Run).where(Run.id == run_id))
            session.commit()
        self._has_rows.pop(run_id, None)

    def get_experiment(self, experiment_id: str) -> Experiment | None:
        with self._sessions() as session:
            return session.get(Experiment, experiment_id)

    def experiment_name(self, experiment_id: str) -> str:
        with self._sessions() as session:
            experiment = session.get(Experiment, experiment_id)
            return experiment.name if experiment else ""

    # --- tasks --------------------------------------------------------------------------
    # --- tasks: the engine's hot path ----------------------------------------------------
    # Each task costs a few writes; through the ORM they took ~2 ms each, through Core on one
    # connection kept open ~0.2 ms. Every write is still its own committed transaction.
    def _write(self, statements: list[tuple[Any, list[dict[str, Any]]]]) -> Any:
        with self._write_lock:
            if self._writer is None:
                self._writer = self._engine.connect()
            try:
                result = None
                for statement, rows in statements:
                    result = self._writer.execute(statement, rows)
                self._writer.commit()
                return result
            except BaseException:
                self._writer.rollback()
                raise

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
        values = task_start_fields(name, kind, component, parent_id, image, inputs, log_path, state, now)
        existing = self._existing_task_id(run_id, path) if self._resumable(run_id) else None
        if existing is not None:
            self._write([(update(_TASKS).where(_TASKS.c.id == existing), [values])])
            return existing
        task_id = task_id or new_id()
        row = {"id": task_id, "run_id": run_id, "path": path, "attempts": 0, "cached": False, "outputs": {},
               "created_at": now, **values}
        self._write([(insert(_TASKS), [row])])
        return task_id

    def _resumable(self, run_id: str) -> bool:
        """Whether the run already has task rows to reuse (a resume), asked once per run."""
        if run_id not in self._has_rows:
            with self._sessions() as session:
                self._has_rows[run_id] = session.scalar(select(Task.id).where(Task.run_id == run_id).limit(1)) is not None
        return self._has_rows[run_id]

    def _existing_task_id(self, run_id: str, path: str) -> str | None:
        with self._sessions() as session:
            return session.scalar(select(Task.id).where(Task.run_id == run_id, Task.path == path))

    def update_task(self, task_id: str, **fields: Any) -> None:
        if fields.get("state") in FINAL_STATES and "finished_at" not in fields:
            fields["finished_at"] = utcnow()
        self._write([(update(_TASKS).where(_TASKS.c.id == task_id), [fields])])

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
        cache_entry: tuple[str, dict[str, Any]] | None = None,
    ) -> None:
        """Record a task's end, its artifacts and its cache entry in one transaction."""
        values: dict[str, Any] = {
            "state": state, "error": error, "exit_code": exit_code, "outputs": outputs or {}, "finished_at": utcnow(),
        }
        if attempts is not None:
            values["attempts"] = attempts
        statements: list[tuple[Any, list[dict[str, Any]]]] = [(update(_TASKS).where(_TASKS.c.id == task_id), [values])]
        if artifacts:
            rows = [
                {
                    "id": new_id(), "run_id": run_id, "task_id": task_id, "name": artifact["name"],
                    "type": artifact["type"]["schemaTitle"], "uri": artifact["uri"],
                    "metadata": artifact.get("metadata", {}), "created_at": utcnow(),
                }
                for artifact in artifacts
            ]
            statements.append((insert(Artifact.__table__), rows))
        if cache_entry is not None:
            key, cached_outputs = cache_entry
            entry = {"key": key, "run_id": run_id, "task_id": task_id, "outputs": cached_outputs, "created_at": utcnow()}
            upsert = self._dialect_insert(CacheEntry.__table__)
            statements.append((upsert.on_conflict_do_update(index_elements=["key"], set_=entry), [entry]))
        self._write(statements)

    def cache_get(self, key: str) -> tuple[dict[str, Any], str] | None:
        with self._sessions() as session:
            entry = session.get(CacheEntry, key)
            return (entry.outputs, entry.task_id) if entry else None

    def cache_forget(self, key: str) -> None:
        with self._sessions() as session:
            entry = session.get(CacheEntry, key)
            if entry is not None:
                session.delete(entry)
                session.commit()

    def _dialect_insert(self, table: Any) -> Any:
        """INSERT with ON CONFLICT in the database's own dialect (SQLite and PostgreSQL have it)."""
        if self._engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        else:
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        return dialect_insert(table)

    def list_tasks(self, run_id: str) -> list[Task]:
        with self._sessions() as session:
            return list(session.scalars(select(Task).where(Task.run_id == run_id).order_by(Task.created_at, Task.path)))

    def list_artifacts(self, run_id: str) -> list[Artifact]:
        with self._sessions() as session:
            return list(session.scalars(select(Artifact).where(Artifact.run_id == run_id).order_by(Artifact.created_at)))

"""Reading and writing runs, tasks, experiments and artifacts: short transactions, one per change.

Each write commits at once, so another process (``millpond runs list``, a second run, the
server) sees progress live and a killed engine leaves a consistent record behind.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Table, delete, func, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, defer, sessionmaker
from sqlalchemy.sql import Executable

from millpond.errors import NotFoundError, UserError
from millpond.store.catalog import NameTaken
from millpond.store.db import session_factory
from millpond.store.keys import new_id, utcnow
from millpond.store.lineage import ExecutionRecord, rows_of
from millpond.store.lineage_store import forget_runs
from millpond.store.lineage_tables import dialect_insert, lineage_statements
from millpond.store.listing import ListQuery, Page, one_page
from millpond.store.models import Artifact, CacheEntry, Experiment, Run, Task
from millpond.store.results import rows_changed
from millpond.store.run_rows import FINAL_STATES, fresh_enough, task_start_fields
from millpond.store.timestamps import iso  # noqa: F401 - kept importable from here

if TYPE_CHECKING:
    from sqlalchemy.dialects.postgresql import Insert as PostgresqlInsert
    from sqlalchemy.dialects.sqlite import Insert as SqliteInsert

_TASKS = Task.__table__
_RUNS = Run.__table__
# The fields a list of runs or experiments can be filtered and sorted by, under the KFP API's names.
RUN_FIELDS = {"display_name": Run.name, "name": Run.name, "run_id": Run.id, "id": Run.id, "state": Run.state,
              "experiment_id": Run.experiment_id, "created_at": Run.created_at, "finished_at": Run.finished_at,
              "scheduled_at": Run.started_at, "pipeline_name": Run.pipeline_name,
              "storage_state": Run.storage_state, "pipeline_version_id": Run.pipeline_version_id,
              "recurring_run_id": Run.recurring_run_id, "namespace": Run.namespace}
EXPERIMENT_FIELDS = {"display_name": Experiment.name, "name": Experiment.name, "experiment_id": Experiment.id,
                     "id": Experiment.id, "created_at": Experiment.created_at,
                     "description": Experiment.description, "storage_state": Experiment.storage_state,
                     "namespace": Experiment.namespace}


@dataclass(frozen=True)
class EngineClaim:
    """Which engine process a run's row says drives it (pid and start time), for a server start to check."""

    run_id: str
    created_at: dt.datetime
    engine_pid: int | None
    engine_start: str | None
    error: str | None


class RunStore:
    """The metadata store of one millpond home (or database URL)."""

    def __init__(self, database_url: str) -> None:
        self._sessions: sessionmaker[Session] = session_factory(database_url)
        self._engine: Engine = self._sessions.kw["bind"]
        self._writer: Connection | None = None
        self._write_lock = threading.Lock()
        self._has_rows: dict[str, bool] = {}

    # --- experiments --------------------------------------------------------------------
    def ensure_experiment(self, name: str, description: str = "", namespace: str = "") -> Experiment:
        """The experiment of this name in ``namespace`` ("" in single-user mode), made when missing."""
        which = (Experiment.namespace == namespace, Experiment.name == name)
        with self._sessions() as session:
            found = session.scalar(select(Experiment).where(*which))
            if found:
                return found
            experiment = Experiment(name=name, description=description, namespace=namespace)
            session.add(experiment)
            try:
                session.commit()
            except Exception:  # another process created it first
                session.rollback()
                found = session.scalar(select(Experiment).where(*which))
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
        namespace: str = "",
    ) -> Run:
        """A PENDING run in experiment ``experiment`` of ``namespace`` (made when missing); the run keeps the
        namespace too."""
        experiment_row = self.ensure_experiment(experiment, namespace=namespace)
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
                namespace=namespace,
            )
            if run_id:
                run.id = run_id
            session.add(run)
            session.commit()
            return run

    def update_run(self, run_id: str, **fields: Any) -> None:
        """One UPDATE on the writer's connection (the engine's hot path; on PostgreSQL a read first
        would cost a round trip more)."""
        result = self._write([(update(_RUNS).where(_RUNS.c.id == run_id), [fields])])
        if not result.rowcount:
            raise NotFoundError(f"no run with id {run_id!r}")

    def get_run(self, run_id: str) -> Run:
        with self._sessions() as session:
            run = session.get(Run, run_id)
            if run is None:
                matches = list(session.scalars(select(Run).where(Run.id.startswith(run_id)).limit(2)))
                if len(matches) == 1:
                    return matches[0]
                if not matches:
                    raise NotFoundError(f"no run with id {run_id!r}")
                raise UserError(f"run id {run_id!r} is ambiguous")
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
            if rows_changed(done) != 1:
                session.rollback()
                return False
            session.execute(
                update(Task).where(Task.run_id == run_id, Task.state.not_in(FINAL_STATES))
                .values(state="CANCELED", error=reason, finished_at=now)
            )
            session.commit()
            return True

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
    def _write(self, statements: list[tuple[Executable, list[dict[str, Any]]]]) -> Any:
        with self._write_lock:
            for attempt in (1, 2):
                writer = self._writer
                if writer is None:
                    writer = self._writer = self._engine.connect()  # the pool pings it first (pool_pre_ping)
                try:
                    result = None
                    for statement, rows in statements:
                        result = writer.execute(statement, rows)
                except DBAPIError as exc:
                    self._drop_writer()
                    # The kept connection died (a PostgreSQL restart, a dropped link): nothing was committed
                    # on it, so the writes go once more on a new one instead of failing every write after.
                    if exc.connection_invalidated and attempt == 1:
                        continue
                    raise
                except BaseException:
                    self._drop_writer()
                    raise
                try:
                    writer.commit()
                except BaseException:
                    self._drop_writer()  # not retried: the commit may have reached the database
                    raise
                return result
        return None  # not reached: the second attempt returns or raises

    def _drop_writer(self) -> None:
        """Roll back and keep the writer's connection, or forget it when it is dead (the next write opens one)."""
        writer = self._writer
        if writer is None:
            return
        if not writer.invalidated:
            try:
                writer.rollback()
                return
            except Exception:  # noqa: S110 - a connection that cannot roll back is dropped below
                pass
        self._writer = None
        with contextlib.suppress(Exception):
            writer.close()

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
        inputs: Mapping[str, Any] | None = None,
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
                first = session.scalar(select(Task.id).where(Task.run_id == run_id).limit(1))
                self._has_rows[run_id] = first is not None
        return self._has_rows[run_id]

    def _existing_task_id(self, run_id: str, path: str) -> str | None:
        with self._sessions() as session:
            return session.scalar(select(Task.id).where(Task.run_id == run_id, Task.path == path))

    def update_task(self, task_id: str, **fields: Any) -> None:
        if fields.get("state") in FINAL_STATES and "finished_at" not in fields:
            fields["finished_at"] = utcnow()
        self._write([(update(_TASKS).where(_TASKS.c.id == task_id), [fields])])

    def cancel_tasks(self, task_ids: list[str], error: str) -> None:
        """Record ``task_ids`` CANCELED with ``error`` in one transaction."""
        values = {"state": "CANCELED", "error": error, "finished_at": utcnow()}
        chunks = [task_ids[i:i + 5000] for i in range(0, len(task_ids), 5000)]  # PostgreSQL: < 65,535 parameters
        if chunks:
            self._write([(update(_TASKS).where(_TASKS.c.id.in_(chunk)), [values]) for chunk in chunks])

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
        cache_entry: tuple[str, Mapping[str, Any]] | None = None,
        lineage: ExecutionRecord | None = None,
    ) -> None:
        """Record a task's end, its artifacts, its cache entry and its lineage in one transaction."""
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
            entry = {
                "key": key, "run_id": run_id, "task_id": task_id, "outputs": cached_outputs, "created_at": utcnow()
            }
            upsert = self._dialect_insert(CacheEntry.__table__)
            statements.append((upsert.on_conflict_do_update(index_elements=["key"], set_=entry), [entry]))
        if lineage is not None:
            statements += lineage_statements(rows_of(lineage, utcnow()), self._dialect_insert)
        self._write(statements)

    def cache_get(self, key: str, max_age_s: float | None = None) -> tuple[dict[str, Any], str] | None:
        with self._sessions() as session:
            entry = session.get(CacheEntry, key)
            if entry is None or not fresh_enough(entry.created_at, max_age_s):
                return None
            return entry.outputs, entry.task_id

    def cache_forget(self, key: str) -> None:
        with self._sessions() as session:
            entry = session.get(CacheEntry, key)
            if entry is not None:
                session.delete(entry)
                session.commit()

    def _dialect_insert(self, table: Table) -> PostgresqlInsert | SqliteInsert:
        """INSERT with ON CONFLICT in the database's own dialect (SQLite and PostgreSQL have it)."""
        return dialect_insert(self._engine.dialect.name, table)

    def unfinished_tasks(self, run_id: str) -> list[tuple[str, int | None, str | None]]:
        """(id, pid, pid_start) of the run's tasks not yet final: only the columns a cancel needs."""
        with self._sessions() as session:
            query = select(Task.id, Task.pid, Task.pid_start).where(Task.run_id == run_id,
                                                                    Task.state.not_in(FINAL_STATES))
            return [(row.id, row.pid, row.pid_start) for row in session.execute(query)]

    def list_tasks(self, run_id: str) -> list[Task]:
        with self._sessions() as session:
            return list(session.scalars(select(Task).where(Task.run_id == run_id).order_by(Task.created_at, Task.path)))

    def list_artifacts(self, run_id: str) -> list[Artifact]:
        with self._sessions() as session:
            query = select(Artifact).where(Artifact.run_id == run_id).order_by(Artifact.created_at)
            return list(session.scalars(query))

    # --- what the API server asks: exact lookups, pages, archive and delete ---------------------
    def find_run(self, run_id: str) -> Run:
        """The run with exactly this id (the API takes no prefixes)."""
        with self._sessions() as session:
            run = session.get(Run, run_id)
        if run is None:
            raise NotFoundError(f"no run with id {run_id!r}")
        return run

    def page_runs(self, query: ListQuery, experiment_id: str | None = None, namespace: str | None = None) -> Page[Run]:
        """A page of runs without their IR (KBs a run, not read for the rows of a list); of one experiment, of one
        namespace (None: every namespace)."""
        rows = select(Run).options(defer(Run.pipeline_spec), defer(Run.platform_spec), defer(Run.workflow),
                                   defer(Run.outputs))
        if experiment_id:
            rows = rows.where(Run.experiment_id == experiment_id)
        if namespace is not None:
            rows = rows.where(Run.namespace == namespace)
        with self._sessions() as session:
            return one_page(session, rows, query, RUN_FIELDS, Run.created_at.desc())

    def delete_run(self, run_id: str) -> None:
        """Forget a run: its row, tasks, artifact records and the cache entries it produced (files are the caller's)."""
        self._delete_runs(Run.id == run_id)
        self._has_rows.pop(run_id, None)

    def _delete_runs(self, which: Any) -> None:
        """Delete the runs matching ``which`` with their tasks, artifact records, cache entries and lineage."""
        runs = select(Run.id).where(which)
        with self._sessions() as session:
            session.execute(delete(CacheEntry).where(CacheEntry.run_id.in_(runs)))
            forget_runs(session, runs)
            session.execute(delete(Artifact).where(Artifact.run_id.in_(runs)))
            session.execute(delete(Task).where(Task.run_id.in_(runs)))
            session.execute(delete(Run).where(which))
            session.commit()

    def find_task(self, task_id: str) -> Task:
        """The task with exactly this id, of any run (KFP's ``GetTask``)."""
        with self._sessions() as session:
            task = session.get(Task, task_id)
        if task is None:
            raise NotFoundError(f"Failed to get task: task {task_id!r} not found")
        return task

    def get_task(self, run_id: str, task_id: str) -> Task:
        with self._sessions() as session:
            task = session.get(Task, task_id)
        if task is None or task.run_id != run_id:
            raise NotFoundError(f"no task {task_id!r} in run {run_id}")
        return task

    def run_artifact_uris(self, run_id: str) -> set[str]:
        """Every artifact URI the run recorded: its artifact rows, and those its (cached) tasks' outputs name."""
        with self._sessions() as session:
            uris = set(session.scalars(select(Artifact.uri).where(Artifact.run_id == run_id)))
            outputs = list(session.scalars(select(Task.outputs).where(Task.run_id == run_id)))
        for output in outputs:  # a cached task's outputs point at the run that produced them
            for entries in ((output or {}).get("artifacts") or {}).values():
                for entry in entries if isinstance(entries, list) else [entries]:
                    if isinstance(entry, dict) and isinstance(entry.get("uri"), str):
                        uris.add(entry["uri"])
        return uris

    def engine_claims(self, states: tuple[str, ...]) -> list[EngineClaim]:
        """The runs in ``states`` with the engine each row names (alive or not: the caller checks)."""
        query = select(Run.id, Run.created_at, Run.engine_pid, Run.engine_start, Run.error).where(Run.state.in_(states))
        with self._sessions() as session:
            return [EngineClaim(*row) for row in session.execute(query)]

    def mark_canceling(self, run_id: str, reason: str) -> None:
        """CANCELING, unless the run already reached an end (an engine finishing just now keeps its own)."""
        with self._sessions() as session:
            session.execute(update(Run).where(Run.id == run_id, Run.state.in_(("PENDING", "RUNNING")))
                            .values(state="CANCELING", error=reason))
            session.commit()

    def runs_in_flight(self, run_ids: list[str] | None = None, experiment_id: str | None = None) -> int:
        """How many runs (of these ids, of this experiment, or in all) are not final."""
        query = select(func.count()).select_from(Run).where(Run.state.not_in(FINAL_STATES))
        if run_ids is not None:
            query = query.where(Run.id.in_(run_ids))
        if experiment_id is not None:
            query = query.where(Run.experiment_id == experiment_id)
        with self._sessions() as session:
            return session.scalar(query) or 0

    def create_experiment(self, name: str, description: str = "", namespace: str = "") -> Experiment:
        """A new experiment in ``namespace``; a name already used there is a NameTaken."""
        with self._sessions() as session:
            if session.scalar(select(Experiment.id).where(Experiment.namespace == namespace, Experiment.name == name)):
                where = f" in namespace {namespace!r}" if namespace else ""
                raise NameTaken(f"experiment {name!r} already exists{where}")
            experiment = Experiment(name=name, description=description, namespace=namespace)
            session.add(experiment)
            session.commit()
            return experiment

    def find_experiment(self, experiment_id: str) -> Experiment:
        """The experiment with this id (NotFoundError when there is none)."""
        with self._sessions() as session:
            experiment = session.get(Experiment, experiment_id)
        if experiment is None:
            raise NotFoundError(f"no experiment with id {experiment_id!r}")
        return experiment

    def page_experiments(self, query: ListQuery, namespace: str | None = None) -> Page[tuple[Experiment, Any]]:
        """A page of (experiment, when its newest run was created or None), of one namespace (None: all)."""
        last_run = select(func.max(Run.created_at)).where(Run.experiment_id == Experiment.id).scalar_subquery()
        rows = select(Experiment, last_run)
        if namespace is not None:
            rows = rows.where(Experiment.namespace == namespace)
        with self._sessions() as session:
            return one_page(session, rows, query, EXPERIMENT_FIELDS,
                            Experiment.created_at.asc(), single=False)

    def set_experiment_storage_state(self, experiment_id: str, state: str, with_runs: bool = False) -> None:
        """ARCHIVED or AVAILABLE; ``with_runs``: its runs too, in the same transaction."""
        with self._sessions() as session:
            experiment = session.get(Experiment, experiment_id)
            if experiment is None:
                raise NotFoundError(f"no experiment with id {experiment_id!r}")
            experiment.storage_state = state
            if with_runs:
                session.execute(update(Run).where(Run.experiment_id == experiment_id).values(storage_state=state))
            session.commit()

    def delete_experiment(self, experiment_id: str) -> None:
        """Delete an experiment and its runs' records (the caller checked none is in flight)."""
        self._delete_runs(Run.experiment_id == experiment_id)
        with self._sessions() as session:
            session.execute(delete(Experiment).where(Experiment.id == experiment_id))
            session.commit()

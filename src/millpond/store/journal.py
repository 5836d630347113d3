"""The run journal: what the engine writes while a run goes on, through Python's own sqlite3.

Importing SQLAlchemy costs ~0.6 s here — more than everything else ``millpond run`` does
before its first task. The engine's writes are a handful of simple statements, so on the
default SQLite database they go through the stdlib driver on one kept connection (~0.05 ms
a statement), in the exact storage format SQLAlchemy's models read back; the schema is
still Alembic's, and any other database URL gets the SQLAlchemy-backed store instead.
Every write is one committed transaction, so a killed engine leaves a consistent record.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from millpond.errors import NotFoundError, UserError
from millpond.store.db import HEAD_REVISION, get_engine
from millpond.store.keys import new_id, utcnow
from millpond.store.lineage import ExecutionRecord, TableRows, rows_of
from millpond.store.run_rows import FINAL_STATES, fresh_enough, task_start_fields
from millpond.store.sqlite_wal import configure

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

DEFAULT_EXPERIMENT = "Default"
_RUN_JSON = ("pipeline_spec", "platform_spec", "parameters", "outputs")
_TASK_JSON = ("inputs", "outputs", "pod_metadata")

__all__ = ["DEFAULT_EXPERIMENT", "FINAL_STATES", "RunJournal", "RunRecord", "SqliteJournal", "TaskRecord",
           "open_journal", "schema_revision"]


class RunJournal(Protocol):
    """What the engine reads and writes while it runs; SqliteJournal and the SQLAlchemy RunStore both are one."""

    def create_run(
        self, *, name: str, experiment: str, pipeline_name: str, pipeline_spec: dict[str, Any],
        platform_spec: dict[str, Any] | None, parameters: dict[str, Any], pipeline_root: str, namespace: str = "",
    ) -> Any: ...  # a RunRecord, or the ORM's Run: the same attribute names
    def update_run(self, run_id: str, **fields: Any) -> None: ...
    def get_run(self, run_id: str) -> Any: ...
    def experiment_name(self, experiment_id: str) -> str: ...
    def start_task(
        self, *, run_id: str, path: str, name: str, kind: str, component: str, parent_id: str | None,
        image: str | None = None, inputs: Mapping[str, Any] | None = None, log_path: str | None = None,
        state: str = "RUNNING", task_id: str | None = None,
    ) -> str: ...
    def update_task(self, task_id: str, **fields: Any) -> None: ...
    def finish_task(
        self, task_id: str, *, state: str, outputs: dict[str, Any] | None = None, error: str | None = None,
        exit_code: int | None = None, artifacts: list[dict[str, Any]] | None = None, run_id: str | None = None,
        attempts: int | None = None, cache_entry: tuple[str, Mapping[str, Any]] | None = None,
        lineage: ExecutionRecord | None = None,
    ) -> None: ...
    def cancel_tasks(self, task_ids: list[str], error: str) -> None: ...
    def unfinished_tasks(self, run_id: str) -> list[tuple[str, int | None, str | None]]: ...
    def list_tasks(self, run_id: str) -> list[Any]: ...
    def cache_get(self, key: str, max_age_s: float | None = None) -> tuple[dict[str, Any], str] | None: ...
    def cache_forget(self, key: str) -> None: ...


def open_journal(database_url: str) -> RunJournal:
    """The journal of a database: the stdlib SQLite one by default, SQLAlchemy's for any other URL.

    The schema is brought to Alembic's head first; that (and only that) imports SQLAlchemy.
    """
    if not database_url.startswith("sqlite:///"):
        from millpond.store.runs import RunStore  # noqa: PLC0415 - SQLAlchemy (~0.6 s) only for other databases

        return RunStore(database_url)
    path = Path(database_url.removeprefix("sqlite:///"))
    if schema_revision(path) != HEAD_REVISION:
        get_engine(database_url)  # creates or migrates the database under its lock
    return SqliteJournal(path)


def schema_revision(path: Path) -> str | None:
    if not path.exists():
        return None
    try:
        with sqlite3.connect(path, timeout=30) as db:
            row = db.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


def _stored(value: Any) -> Any:
    """A Python value as SQLAlchemy's SQLite types store it (naive UTC text, JSON text, 0/1)."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return value


def _moment(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc) if text else None


@dataclass
class RunRecord:
    """A run as the engine and the CLI read it (the ORM model's attribute names)."""

    id: str
    name: str
    experiment_id: str
    pipeline_name: str
    pipeline_spec: dict[str, Any]
    platform_spec: dict[str, Any] | None
    parameters: dict[str, Any]
    pipeline_root: str
    state: str
    error: str | None
    outputs: dict[str, Any]
    created_at: dt.datetime | None
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    engine_pid: int | None = None
    engine_start: str | None = None
    namespace: str = ""  # its experiment's namespace (multi-user); "" for a single-user run


@dataclass
class TaskRecord:
    id: str
    run_id: str
    parent_id: str | None
    path: str
    name: str
    kind: str
    component: str
    image: str | None
    state: str
    cached: bool
    attempts: int
    exit_code: int | None
    error: str | None
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    log_path: str | None
    created_at: dt.datetime | None
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    pid: int | None = None
    pid_start: str | None = None
    pod_metadata: dict[str, Any] | None = field(default=None)


_R = TypeVar("_R", bound="DataclassInstance")  # RunRecord or TaskRecord


def _record(cls: type[_R], row: sqlite3.Row, json_columns: tuple[str, ...]) -> _R:
    values: dict[str, Any] = {}
    names = {column.name for column in dataclasses.fields(cls)}
    for key in row.keys():
        if key not in names:
            continue
        value = row[key]
        if key in json_columns:
            value = json.loads(value) if value is not None else None
        elif key.endswith("_at"):
            value = _moment(value)
        elif key == "cached":
            value = bool(value)
        values[key] = value
    return cls(**values)


def _lineage_statement(rows: TableRows) -> tuple[str, list[tuple[Any, ...]]]:
    """One lineage table's INSERT (``store.lineage`` decided the ids: an existing one is kept or updated)."""
    columns = list(rows.rows[0])
    on_conflict = ("DO NOTHING" if rows.conflict == "ignore"
                   else "DO UPDATE SET " + ", ".join(f'"{c}" = excluded."{c}"' for c in rows.update))
    sql = (f"INSERT INTO {rows.table} ({', '.join(f'{chr(34)}{c}{chr(34)}' for c in columns)}) "
           f"VALUES ({', '.join('?' for _ in columns)}) ON CONFLICT(id) {on_conflict}")
    return sql, [tuple(_stored(row[c]) for c in columns) for row in rows.rows]


class SqliteJournal:
    """Runs, tasks, experiments and cache entries of a SQLite home, written by the engine."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, timeout=30, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        configure(self._db, 30)
        self._db.execute("PRAGMA foreign_keys=ON")
        self._has_rows: dict[str, bool] = {}

    # --- plumbing -----------------------------------------------------------------------
    def _write(self, statements: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for sql, rows in statements:
                    self._db.executemany(sql, rows)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    @staticmethod
    def _assignments(fields: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
        columns = ", ".join(f'"{name}" = ?' for name in fields)
        return columns, tuple(_stored(value) for value in fields.values())

    # --- experiments and runs -----------------------------------------------------------
    def ensure_experiment(self, name: str, namespace: str = "") -> str:
        """The id of experiment ``name`` of ``namespace`` (names are unique per namespace), made when missing."""
        which = "SELECT id FROM experiments WHERE namespace = ? AND name = ?"
        found = self._query(which, (namespace, name))
        if found:
            return str(found[0]["id"])
        new = new_id()
        self._write([(
            "INSERT INTO experiments (id, name, namespace, description, created_at) VALUES (?, ?, ?, '', ?)"
            " ON CONFLICT(namespace, name) DO NOTHING",
            [(new, name, namespace, _stored(utcnow()))],
        )])
        return str(self._query(which, (namespace, name))[0]["id"])

    def create_run(
        self, *, name: str, experiment: str, pipeline_name: str, pipeline_spec: dict[str, Any],
        platform_spec: dict[str, Any] | None, parameters: dict[str, Any], pipeline_root: str, namespace: str = "",
    ) -> RunRecord:
        experiment_id = self.ensure_experiment(experiment, namespace)
        run_id = new_id()
        now = utcnow()
        self._write([(
            "INSERT INTO runs (id, name, experiment_id, pipeline_name, pipeline_spec, platform_spec, parameters, "
            "pipeline_root, state, outputs, created_at, namespace) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'PENDING', '{}', ?, ?)",
            [(run_id, name, experiment_id, pipeline_name, json.dumps(pipeline_spec), json.dumps(platform_spec),
              json.dumps(parameters), pipeline_root, _stored(now), namespace)],
        )])
        self._has_rows[run_id] = False
        return RunRecord(
            id=run_id, name=name, experiment_id=experiment_id, pipeline_name=pipeline_name, pipeline_spec=pipeline_spec,
            platform_spec=platform_spec, parameters=parameters, pipeline_root=pipeline_root, state="PENDING",
            error=None, outputs={}, created_at=now, started_at=None, finished_at=None, namespace=namespace,
        )

    def update_run(self, run_id: str, **fields: Any) -> None:
        columns, values = self._assignments(fields)
        self._write([(f"UPDATE runs SET {columns} WHERE id = ?", [(*values, run_id)])])

    def get_run(self, run_id: str) -> RunRecord:
        rows = self._query("SELECT * FROM runs WHERE id = ?", (run_id,))
        if not rows:
            rows = self._query("SELECT * FROM runs WHERE id LIKE ? LIMIT 2", (run_id + "%",))
            if len(rows) != 1:
                if not rows:
                    raise NotFoundError(f"no run with id {run_id!r}")
                raise UserError(f"run id {run_id!r} is ambiguous")
        return _record(RunRecord, rows[0], _RUN_JSON)

    def experiment_name(self, experiment_id: str) -> str:
        rows = self._query("SELECT name FROM experiments WHERE id = ?", (experiment_id,))
        return str(rows[0]["name"]) if rows else ""

    # --- tasks --------------------------------------------------------------------------
    def start_task(
        self, *, run_id: str, path: str, name: str, kind: str, component: str, parent_id: str | None,
        image: str | None = None, inputs: Mapping[str, Any] | None = None, log_path: str | None = None,
        state: str = "RUNNING", task_id: str | None = None,
    ) -> str:
        """Record a task as started (or decided, e.g. SKIPPED); a resumed run reuses the row of a path."""
        now = utcnow()
        values = task_start_fields(name, kind, component, parent_id, image, inputs, log_path, state, now)
        if self._resumable(run_id):
            existing = self._query("SELECT id FROM tasks WHERE run_id = ? AND path = ?", (run_id, path))
            if existing:
                self.update_task(str(existing[0]["id"]), **values)
                return str(existing[0]["id"])
        task_id = task_id or new_id()
        row = {"id": task_id, "run_id": run_id, "path": path, "attempts": 0, "cached": False, "outputs": {},
               "created_at": now, **values}
        columns = ", ".join(f'"{c}"' for c in row)
        marks = ", ".join("?" for _ in row)
        self._write([(f"INSERT INTO tasks ({columns}) VALUES ({marks})", [tuple(_stored(v) for v in row.values())])])
        return task_id

    def _resumable(self, run_id: str) -> bool:
        """Whether the run had task rows before this engine started (a resume), asked once per run."""
        if run_id not in self._has_rows:
            self._has_rows[run_id] = bool(self._query("SELECT 1 FROM tasks WHERE run_id = ? LIMIT 1", (run_id,)))
        return self._has_rows[run_id]

    def update_task(self, task_id: str, **fields: Any) -> None:
        if fields.get("state") in FINAL_STATES and "finished_at" not in fields:
            fields["finished_at"] = utcnow()
        columns, values = self._assignments(fields)
        self._write([(f"UPDATE tasks SET {columns} WHERE id = ?", [(*values, task_id)])])

    def finish_task(
        self, task_id: str, *, state: str, outputs: dict[str, Any] | None = None, error: str | None = None,
        exit_code: int | None = None, artifacts: list[dict[str, Any]] | None = None, run_id: str | None = None,
        attempts: int | None = None, cache_entry: tuple[str, Mapping[str, Any]] | None = None,
        lineage: ExecutionRecord | None = None,
    ) -> None:
        """Record a task's end, its artifacts, its cache entry and its lineage in one transaction."""
        fields: dict[str, Any] = {"state": state, "error": error, "exit_code": exit_code, "outputs": outputs or {},
                                  "finished_at": utcnow()}
        if attempts is not None:
            fields["attempts"] = attempts
        columns, values = self._assignments(fields)
        statements: list[tuple[str, list[tuple[Any, ...]]]] = [
            (f"UPDATE tasks SET {columns} WHERE id = ?", [(*values, task_id)])
        ]
        now = _stored(utcnow())
        if artifacts:
            statements.append((
                "INSERT INTO artifacts (id, run_id, task_id, name, type, uri, metadata, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(new_id(), run_id, task_id, a["name"], a["type"]["schemaTitle"], a["uri"],
                  json.dumps(a.get("metadata", {})), now) for a in artifacts],
            ))
        if cache_entry is not None:
            key, cached = cache_entry
            statements.append((
                "INSERT INTO cache_entries (key, run_id, task_id, outputs, created_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET run_id = excluded.run_id, task_id = excluded.task_id, "
                "outputs = excluded.outputs, created_at = excluded.created_at",
                [(key, run_id, task_id, json.dumps(cached), now)],
            ))
        if lineage is not None:
            statements += [_lineage_statement(rows) for rows in rows_of(lineage, utcnow()) if rows.rows]
        self._write(statements)

    def cancel_tasks(self, task_ids: list[str], error: str) -> None:
        """Record ``task_ids`` CANCELED with ``error`` in one transaction (a cancelled 20,000-item loop:
        one commit, not 20,000)."""
        if not task_ids:
            return
        columns, values = self._assignments({"state": "CANCELED", "error": error, "finished_at": utcnow()})
        self._write([(f"UPDATE tasks SET {columns} WHERE id = ?", [(*values, task_id) for task_id in task_ids])])

    def unfinished_tasks(self, run_id: str) -> list[tuple[str, int | None, str | None]]:
        """(id, pid, pid_start) of the run's tasks not yet final: only the columns a cancel needs."""
        rows = self._query(f"SELECT id, pid, pid_start FROM tasks WHERE run_id = ? AND state NOT IN "
                           f"({', '.join('?' * len(FINAL_STATES))})", (run_id, *FINAL_STATES))
        return [(row["id"], row["pid"], row["pid_start"]) for row in rows]

    def list_tasks(self, run_id: str) -> list[TaskRecord]:
        rows = self._query("SELECT * FROM tasks WHERE run_id = ? ORDER BY created_at, path", (run_id,))
        return [_record(TaskRecord, row, _TASK_JSON) for row in rows]

    # --- the cache ----------------------------------------------------------------------
    def cache_get(self, key: str, max_age_s: float | None = None) -> tuple[dict[str, Any], str] | None:
        """The cached outputs and task of ``key``; None too when it is older than ``max_age_s`` (kfp 1.x's
        ``max_cache_staleness``), which is kept: another task may accept an older result."""
        rows = self._query("SELECT outputs, task_id, created_at FROM cache_entries WHERE key = ?", (key,))
        if not rows or not fresh_enough(_moment(rows[0]["created_at"]), max_age_s):
            return None
        return json.loads(rows[0]["outputs"]), str(rows[0]["task_id"])

    def cache_forget(self, key: str) -> None:
        self._write([("DELETE FROM cache_entries WHERE key = ?", [(key,)])])

    def close(self) -> None:
        with self._lock:
            self._db.close()

"""Kueue workloads in the metadata database: submitted, admitted, evicted, finished; and the admission lock.

Admission is decentralised: every process that waits for quota runs an admission cycle, under
one database-wide lock (:meth:`WorkloadStore.locked`: ``BEGIN IMMEDIATE`` on SQLite, a
transaction-scoped advisory lock on PostgreSQL, as migrations take), so two cycles never admit
from the same free quota. Writes that only *release* quota (:meth:`WorkloadStore.finish`,
:meth:`WorkloadStore.mark_stopped`) need no lock: a cycle that read the old row counted more
usage than there is, never less. Every state change is a compare-and-set on the state it
expects, so a cycle that evicts a workload that finished meanwhile writes nothing.

The store speaks in :class:`WorkloadRecord` (plain values: it sits below ``scheduling``, which
turns records into ``queues.model.Workload``). States are the model's values: ``Pending``,
``Admitted``, ``Evicted``, ``Finished``; kinds ``job`` and ``task``. Amounts are milli-units.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from millpond.errors import NotFoundError, UserError
from millpond.settings import load_settings
from millpond.store.db import get_engine, session_factory
from millpond.store.keys import new_id
from millpond.store.results import rows_changed

if TYPE_CHECKING:
    from sqlalchemy import Row
    from sqlalchemy.orm import Session, sessionmaker

    from millpond.settings import Settings
    from millpond.store.models import WorkloadRow

PENDING, ADMITTED, EVICTED, FINISHED = "Pending", "Admitted", "Evicted", "Finished"
KINDS = ("job", "task")
_ADMISSION_LOCK_KEY = 0x6D696C6C6B756575  # "millkueu": the advisory lock of admission cycles (PostgreSQL)


@dataclass(frozen=True)
class Generation:
    """Where the workloads of one database stand (migration 0016): rows stamped up to ``value`` are all visible."""

    epoch: str  # random per database: a database re-created behind the same URL is another one
    value: int


@dataclass(frozen=True)
class WorkloadRecord:
    id: str
    kind: str
    name: str
    namespace: str
    user: str
    queue: str
    requests: Mapping[str, int]
    priority: int
    priority_class: str | None
    pod_count: int
    created: float
    state: str
    cluster_queue: str | None
    flavors: Mapping[str, str] = field(default_factory=dict)
    reason: str = ""
    position: int | None = None
    requeues: int = 0
    holder: str = ""
    admitted_at: float = 0.0
    finished_at: float | None = None
    version: int = 0  # the workload generation of its last write (0: before migration 0016)


def _record(row: WorkloadRow | Row[Any]) -> WorkloadRecord:
    """A row as a record: an ORM row, or a Core one (a cycle reads thousands: no ORM identity map for those)."""
    return WorkloadRecord(
        id=row.id, kind=row.kind, name=row.name, namespace=row.namespace, user=row.user, queue=row.queue,
        requests={key: int(value) for key, value in (row.requests or {}).items()}, priority=row.priority,
        priority_class=row.priority_class, pod_count=row.pod_count, created=row.created, state=row.state,
        cluster_queue=row.cluster_queue, flavors=dict(row.flavors or {}), reason=row.reason or "",
        position=row.position, requeues=row.requeues or 0, holder=row.holder or "", admitted_at=row.admitted_at or 0.0,
        finished_at=row.finished_at, version=row.version or 0)


def _stamp(session: Session) -> int:
    """Take the next workload generation for this transaction (migration 0016).

    The counter's row stays locked until the transaction ends (SQLite has one writer anyway), so
    a reader that sees generation ``G`` sees every row stamped ``G`` or less: what lets a process
    keep the live rows and read only those stamped since (``LockedWorkloads.changed_since``).
    """
    connection = session.connection()  # plain SQL, the same on SQLite and PostgreSQL: no statement to build
    connection.exec_driver_sql("UPDATE workload_generation SET value = value + 1 WHERE id = 1")
    return int(connection.exec_driver_sql("SELECT value FROM workload_generation WHERE id = 1").scalar_one())


class LockedWorkloads:
    """The workloads under the admission lock: read the live ones, write one cycle's decisions.

    Each write is a compare-and-set on the state it expects; :meth:`write` puts a whole cycle's
    decision in three statements and skips the pending rows whose reason and position are unchanged
    (most of a long queue).
    """

    def __init__(self, session: Session) -> None:
        self._session = session
        self.stamp: int | None = None  # this transaction's workload generation, once it has written

    def _stamp(self) -> int:
        if self.stamp is None:
            self.stamp = _stamp(self._session)
        return self.stamp

    def generation(self) -> Generation:
        """The workload generation: every row stamped up to it is committed and visible to this transaction."""
        from sqlalchemy import select  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import WorkloadGenerationRow  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        table = WorkloadGenerationRow.__table__
        row = self._session.connection().execute(select(table.c.epoch, table.c.value).where(table.c.id == 1)).one()
        return Generation(row.epoch, int(row.value))

    def changed_since(self, generation: int) -> list[WorkloadRecord]:
        """The rows written after ``generation``, FINISHED ones included (a reader that keeps rows drops those)."""
        from sqlalchemy import select  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import WorkloadRow  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        table = WorkloadRow.__table__
        return [_record(row) for row in self._session.connection().execute(
            select(table).where(table.c.version > generation))]

    def active(self) -> list[WorkloadRecord]:
        """Every workload not FINISHED: what an admission cycle decides over."""
        from sqlalchemy import select  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import WorkloadRow  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        table = WorkloadRow.__table__
        rows = self._session.connection().execute(select(table).where(table.c.state != FINISHED))
        return [_record(row) for row in rows]

    def _set(self, workload_id: str, expected: tuple[str, ...], **values: Any) -> bool:
        from sqlalchemy import update  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import WorkloadRow  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        values["updated_at"] = time.time()
        values["version"] = self._stamp()
        result = self._session.execute(update(WorkloadRow).where(
            WorkloadRow.id == workload_id, WorkloadRow.state.in_(expected)).values(**values))
        return bool(rows_changed(result))

    def admit(self, workload_id: str, cluster_queue: str, flavors: Mapping[str, str], at: float) -> bool:
        return self._set(workload_id, (PENDING,), state=ADMITTED, cluster_queue=cluster_queue,
                         flavors=dict(flavors), admitted_at=at, reason="", position=None)

    def evict(self, workload_id: str, reason: str) -> bool:
        """ADMITTED -> EVICTED: its holder is to stop it; it holds its quota until :meth:`mark_stopped`."""
        return self._set(workload_id, (ADMITTED,), state=EVICTED, reason=reason)

    def finish(self, workload_id: str, reason: str) -> bool:
        return _finish(self._session, workload_id, reason, self._stamp())

    def write(self, admitted: Iterable[tuple[str, str, Mapping[str, str]]], evicted: Iterable[tuple[str, str]],
              waiting: Iterable[tuple[str, str, int]], at: float,
              known: Mapping[str, tuple[str, int | None]]) -> None:
        """One cycle's decisions in three statements (executemany), each row still a compare-and-set:
        ``admitted`` (id, ClusterQueue, flavors) were PENDING, ``evicted`` (id, reason) ADMITTED,
        ``waiting`` (id, reason, position) PENDING; a waiting row ``known`` (id -> stored reason and
        position) to say that already is skipped."""
        from sqlalchemy import bindparam, update  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import WorkloadRow  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        table = WorkloadRow.__table__
        now = time.time()
        connection = self._session.connection()
        admissions = [{"key": key, "cq": queue, "fl": dict(flavors)} for key, queue, flavors in admitted]
        evictions = [{"key": key, "why": reason} for key, reason in evicted]
        changes = [{"key": key, "why": reason, "at": position} for key, reason, position in waiting
                   if known.get(key) != (reason, position)]
        if not (admissions or evictions or changes):
            return  # nothing written, no generation taken: the other processes' kept rows stay valid
        version = self._stamp()
        if admissions:
            connection.execute(update(table).where(table.c.id == bindparam("key"), table.c.state == PENDING).values(
                state=ADMITTED, cluster_queue=bindparam("cq"), flavors=bindparam("fl"), admitted_at=at, reason="",
                position=None, updated_at=now, version=version), admissions)
        if evictions:
            connection.execute(update(table).where(table.c.id == bindparam("key"), table.c.state == ADMITTED).values(
                state=EVICTED, reason=bindparam("why"), updated_at=now, version=version), evictions)
        if changes:
            connection.execute(update(table).where(table.c.id == bindparam("key"), table.c.state == PENDING).values(
                reason=bindparam("why"), position=bindparam("at"), updated_at=now, version=version), changes)


def _finish(session: Session, workload_id: str, reason: str, version: int) -> bool:
    now = time.time()
    result = session.connection().execute(_finish_statement(), {
        "key": workload_id, "why": reason, "at": now, "stamp": version})
    return bool(rows_changed(result))


@functools.cache
def _finish_statement() -> Any:
    """The finish UPDATE, built once (Core, not an ORM-enabled update; every release runs one)."""
    from sqlalchemy import bindparam, update  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

    from millpond.store.models import WorkloadRow  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

    table = WorkloadRow.__table__
    return update(table).where(table.c.id == bindparam("key"), table.c.state != FINISHED).values(
        state=FINISHED, reason=bindparam("why"), position=None, finished_at=bindparam("at"),
        updated_at=bindparam("at"), version=bindparam("stamp"))


class WorkloadStore:
    """Workloads of one millpond home (``settings.database_url``)."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or load_settings()
        self._url = self.settings.database_url
        self._sessions: sessionmaker[Session] = session_factory(self._url)

    def submit(self, *, kind: str, name: str, namespace: str, user: str, queue: str, requests: Mapping[str, int],
               priority: int = 0, priority_class: str | None = None, pod_count: int = 1, holder: str = "",
               created: float | None = None) -> WorkloadRecord:
        """A new PENDING workload; ``created`` (default: now) is its place in FIFO order."""
        from sqlalchemy import insert  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import WorkloadRow  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        if kind not in KINDS:
            raise UserError(f"a workload's kind is one of {', '.join(KINDS)}, not {kind!r}")
        if any(not isinstance(value, int) or isinstance(value, bool) or value < 0 for value in requests.values()):
            raise UserError(f"a workload's requests are whole non-negative milli-units: {dict(requests)}")
        now = time.time()
        record = WorkloadRecord(id=new_id(), kind=kind, name=name, namespace=namespace, user=user, queue=queue,
                                requests=dict(requests), priority=priority, priority_class=priority_class,
                                pod_count=pod_count, created=now if created is None else created, state=PENDING,
                                cluster_queue=None, flavors={}, reason="waiting for the first admission cycle",
                                holder=holder)
        with self._sessions.begin() as session:  # Core, not session.add: no identity map to fill
            record = dataclasses.replace(record, version=_stamp(session))
            values = {**dataclasses.asdict(record), "updated_at": now}
            session.connection().execute(insert(WorkloadRow.__table__), values)
        return record

    def get(self, workload_id: str) -> WorkloadRecord | None:
        from millpond.store.models import WorkloadRow  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions() as session:
            row = session.get(WorkloadRow, workload_id)
            return _record(row) if row else None

    def require(self, workload_id: str) -> WorkloadRecord:
        found = self.get(workload_id)
        if found is None:
            raise NotFoundError(f"no workload {workload_id}")
        return found

    def list(self, *, namespace: str | None = None, queue: str | None = None, cluster_queue: str | None = None,
             states: Iterable[str] | None = None) -> list[WorkloadRecord]:
        """Workloads filtered by project, LocalQueue, ClusterQueue and states, oldest first."""
        from sqlalchemy import select  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import WorkloadRow  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        query = select(WorkloadRow).order_by(WorkloadRow.created, WorkloadRow.id)
        if namespace is not None:
            query = query.where(WorkloadRow.namespace == namespace)
        if queue is not None:
            query = query.where(WorkloadRow.queue == queue)
        if cluster_queue is not None:
            query = query.where(WorkloadRow.cluster_queue == cluster_queue)
        if states is not None:
            query = query.where(WorkloadRow.state.in_(list(states)))
        with self._sessions() as session:
            return [_record(row) for row in session.scalars(query)]

    def set_holder(self, workload_id: str, holder: str) -> bool:
        """Who runs the workload (``PID:TICKS@MACHINE``): a cycle finishes it once that process is gone."""
        from sqlalchemy import update  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import WorkloadRow  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions.begin() as session:
            result = session.execute(update(WorkloadRow).where(
                WorkloadRow.id == workload_id, WorkloadRow.state != FINISHED).values(
                holder=holder, updated_at=time.time(), version=_stamp(session)))
            return bool(rows_changed(result))

    def finish(self, workload_id: str, reason: str = "finished") -> bool:
        """It holds nothing any more (done, deleted, failed): False when it had already finished."""
        with self._sessions.begin() as session:
            return _finish(session, workload_id, reason, _stamp(session))

    def mark_stopped(self, workload_id: str) -> bool:
        """Its holder stopped an EVICTED workload: PENDING again, ``requeues`` + 1, its ``created`` kept
        (it goes back to its place in the queue, as Kueue requeues a preempted workload)."""
        from sqlalchemy import update  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import WorkloadRow  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions.begin() as session:
            result = session.execute(update(WorkloadRow).where(
                WorkloadRow.id == workload_id, WorkloadRow.state == EVICTED).values(
                state=PENDING, cluster_queue=None, flavors={}, requeues=WorkloadRow.requeues + 1,
                reason="requeued after eviction: waiting for the next admission cycle", position=None,
                updated_at=time.time(), version=_stamp(session)))
            return bool(rows_changed(result))

    @contextmanager
    def locked(self) -> Iterator[LockedWorkloads]:
        """The database-wide admission lock, held until the block ends; its writes commit together.

        SQLite: ``BEGIN IMMEDIATE`` takes the database's one write lock at once (a second cycle
        waits in busy_timeout). PostgreSQL: ``pg_advisory_xact_lock`` on one key, released with
        the transaction, so a process killed inside the block frees it with its connection.
        """
        from sqlalchemy import text  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)
        from sqlalchemy.orm import Session  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        engine = get_engine(self._url)
        with engine.connect() as conn:
            if conn.dialect.name == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _ADMISSION_LOCK_KEY})
            session = Session(bind=conn, expire_on_commit=False)
            try:
                yield LockedWorkloads(session)
                session.flush()
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
            finally:
                session.close()

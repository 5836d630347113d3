"""Training jobs in the metadata database: the job, its instances, its events (``arena get -e``).

Every status change is a compare-and-set on a job that has not finished: once a job is
SUCCEEDED or FAILED nothing writes another status over it, so two writers (the supervisor
ending a job, a reader that saw its supervisor dead, a ``delete``) never leave a status that
lies. The rows are handed out as frozen records; nobody outside ``store`` sees SQLAlchemy.
"""

from __future__ import annotations

import builtins
import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from millpond.errors import ConflictError
from millpond.names import check_label, check_namespace
from millpond.settings import load_settings
from millpond.store.db import session_factory
from millpond.store.keys import new_id, utcnow
from millpond.store.results import rows_changed

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from millpond.settings import Settings
    from millpond.store.listing import ListQuery, Page
    from millpond.store.models import TrainingEvent, TrainingInstance, TrainingJob

FINISHED = ("SUCCEEDED", "FAILED")


def _aware(moment: dt.datetime | None) -> dt.datetime | None:
    """SQLite hands timestamps back without their zone: they were written in UTC."""
    if moment is None:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class JobRecord:
    uid: str
    name: str
    namespace: str
    trainer: str
    spec: dict[str, Any]
    status: str
    reason: str | None
    message: str | None
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    supervisor_pid: int | None
    supervisor_start: str | None
    attempt: int
    gpus: tuple[int, ...]  # the GPUs the ledger granted this job's current attempt

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


@dataclass(frozen=True)
class InstanceRecord:
    name: str
    role: str
    index: int
    rank: int
    status: str
    pid: int | None = None
    pid_start: str | None = None
    exit_code: int | None = None
    log_path: str | None = None
    gpus: tuple[int, ...] = ()
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None


@dataclass(frozen=True)
class EventRecord:
    at: dt.datetime
    type: str  # Normal | Warning
    reason: str
    message: str


def _job(row: "TrainingJob") -> JobRecord:
    return JobRecord(
        uid=row.uid, name=row.name, namespace=row.namespace, trainer=row.trainer, spec=dict(row.spec),
        status=row.status, reason=row.reason, message=row.message, created_at=_aware(row.created_at) or utcnow(),
        started_at=_aware(row.started_at), finished_at=_aware(row.finished_at),
        supervisor_pid=row.supervisor_pid, supervisor_start=row.supervisor_start, attempt=row.attempt or 0,
        gpus=tuple(row.gpus or ()),
    )


def _instance(row: "TrainingInstance") -> InstanceRecord:
    return InstanceRecord(
        name=row.name, role=row.role, index=row.index, rank=row.rank, status=row.status, pid=row.pid,
        pid_start=row.pid_start, exit_code=row.exit_code, log_path=row.log_path, gpus=tuple(row.gpus or ()),
        started_at=_aware(row.started_at), finished_at=_aware(row.finished_at),
    )


class JobStore:
    """Training jobs of one millpond home (``settings.database_url``)."""

    def __init__(self, settings: "Settings | None" = None) -> None:
        self._sessions: sessionmaker[Session] = session_factory((settings or load_settings()).database_url)

    # ------------------------------------------------------------------ jobs

    def create(self, name: str, namespace: str, trainer: str, spec: dict[str, Any], status: str,
               reason: str | None = None, message: str | None = None) -> JobRecord:
        """Record a new job; a (namespace, name) already taken is a ConflictError and nothing is written.

        A name or namespace that is no DNS-1123 label is a UserError (nothing written): the job could
        not be reached at ``/jobs/NAMESPACE/NAME``.
        """
        from sqlalchemy.exc import IntegrityError  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import TrainingJob  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        check_namespace(namespace)
        check_label(name, "metadata.name")
        row = TrainingJob(uid=new_id(), name=name, namespace=namespace, trainer=trainer, spec=spec, status=status,
                          reason=reason, message=message, created_at=utcnow(), attempt=0)
        try:
            with self._sessions.begin() as session:
                session.add(row)
        except IntegrityError:
            raise ConflictError(f"the job {name} already exists in namespace {namespace}") from None
        return _job(row)

    def get(self, name: str, namespace: str = "default") -> JobRecord | None:
        from sqlalchemy import select  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import TrainingJob  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions() as session:
            row = session.scalar(select(TrainingJob).where(
                TrainingJob.namespace == namespace, TrainingJob.name == name))
            return _job(row) if row else None

    def by_uid(self, uid: str) -> JobRecord | None:
        from millpond.store.models import TrainingJob  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions() as session:
            row = session.get(TrainingJob, uid)
            return _job(row) if row else None

    # ``list`` below is a method of this class: in later signatures the built-in is ``builtins.list``.
    def list(self, namespace: str | None = None) -> list[JobRecord]:
        """Jobs of ``namespace`` (all when None), oldest first."""
        from sqlalchemy import select  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import TrainingJob  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        query = select(TrainingJob).order_by(TrainingJob.created_at, TrainingJob.name)
        if namespace is not None:
            query = query.where(TrainingJob.namespace == namespace)
        with self._sessions() as session:
            return [_job(row) for row in session.scalars(query)]

    def page(self, namespace: str | frozenset[str] | None, spec: "ListQuery") -> "Page[JobRecord]":
        """One page of the jobs of ``namespace`` (of these namespaces when a set, as a multi-user caller's
        list; all when None), filtered and sorted by ``name``, ``namespace``, ``status``, ``trainer`` or
        ``created_at`` (default: oldest first)."""
        from sqlalchemy import select  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.listing import Page, one_page  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)
        from millpond.store.models import TrainingJob  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        columns = {"name": TrainingJob.name, "namespace": TrainingJob.namespace, "status": TrainingJob.status,
                   "trainer": TrainingJob.trainer, "created_at": TrainingJob.created_at}
        query = select(TrainingJob)
        if isinstance(namespace, frozenset):
            query = query.where(TrainingJob.namespace.in_(sorted(namespace)))
        elif namespace is not None:
            query = query.where(TrainingJob.namespace == namespace)
        with self._sessions() as session:
            found = one_page(session, query, spec, columns, TrainingJob.created_at)
            return Page([_job(row) for row in found.items], found.total, found.next_offset)

    def delete(self, uid: str) -> None:
        from sqlalchemy import delete  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import TrainingEvent, TrainingInstance, TrainingJob  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions.begin() as session:
            session.execute(delete(TrainingEvent).where(TrainingEvent.job_uid == uid))
            session.execute(delete(TrainingInstance).where(TrainingInstance.job_uid == uid))
            session.execute(delete(TrainingJob).where(TrainingJob.uid == uid))

    def set_supervisor(self, uid: str, pid: int, start: str | None) -> None:
        self._update_job(uid, supervisor_pid=pid, supervisor_start=start)

    def set_attempt(self, uid: str, attempt: int, gpus: tuple[int, ...]) -> None:
        self._update_job(uid, attempt=attempt, gpus=list(gpus))

    def set_status(self, uid: str, status: str, reason: str | None = None, message: str | None = None,
                   supervisor: tuple[int | None, str | None] | None = None,
                   event: tuple[str, str] | None = None) -> bool:
        """Write ``status`` unless the job already finished (or, with ``supervisor``, is no longer that
        process's): True if it was written. The first RUNNING stamps the start, a finished status the end.

        ``event`` (message, type) is recorded under ``reason`` in the same transaction, only when the status is
        written: whoever reads the end (``arena get -e`` right after ``arena wait``) reads its event too."""
        from sqlalchemy import func, update  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import TrainingEvent, TrainingJob  # noqa: PLC0415 - SQLAlchemy on first use

        values: dict[str, Any] = {"status": status, "reason": reason, "message": message}
        now = utcnow()
        if status == "RUNNING":
            values["started_at"] = func.coalesce(TrainingJob.started_at, now)  # a restart keeps the first start
        if status in FINISHED:
            values["finished_at"] = now
        query = update(TrainingJob).where(TrainingJob.uid == uid, TrainingJob.status.not_in(FINISHED))
        if supervisor is not None:
            query = query.where(TrainingJob.supervisor_pid == supervisor[0],
                                TrainingJob.supervisor_start == supervisor[1])
        with self._sessions.begin() as session:
            written = rows_changed(session.execute(query.values(**values))) == 1
            if written and event is not None:
                session.add(TrainingEvent(job_uid=uid, at=now, type=event[1], reason=reason or "", message=event[0]))
            return written

    def _update_job(self, uid: str, **values: Any) -> None:
        from sqlalchemy import update  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import TrainingJob  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions.begin() as session:
            session.execute(update(TrainingJob).where(TrainingJob.uid == uid).values(**values))

    # ------------------------------------------------------------------ instances

    def replace_instances(self, uid: str, instances: builtins.list[InstanceRecord]) -> None:
        """The instances of a new attempt, in place of the last attempt's."""
        from sqlalchemy import delete  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import TrainingInstance  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions.begin() as session:
            session.execute(delete(TrainingInstance).where(TrainingInstance.job_uid == uid))
            for item in instances:
                session.add(TrainingInstance(
                    job_uid=uid, name=item.name, role=item.role, index=item.index, rank=item.rank,
                    status=item.status, pid=item.pid, pid_start=item.pid_start, exit_code=item.exit_code,
                    log_path=item.log_path, gpus=list(item.gpus), started_at=item.started_at,
                    finished_at=item.finished_at,
                ))

    def update_instance(self, uid: str, name: str, **values: Any) -> None:
        from sqlalchemy import update  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import TrainingInstance  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        if "gpus" in values:
            values["gpus"] = list(values["gpus"])
        with self._sessions.begin() as session:
            session.execute(update(TrainingInstance).where(
                TrainingInstance.job_uid == uid, TrainingInstance.name == name).values(**values))

    def instances(self, uid: str) -> builtins.list[InstanceRecord]:
        from sqlalchemy import select  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import TrainingInstance  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions() as session:
            rows = session.scalars(select(TrainingInstance).where(TrainingInstance.job_uid == uid)
                                   .order_by(TrainingInstance.rank, TrainingInstance.name))
            return [_instance(row) for row in rows]

    # ------------------------------------------------------------------ events

    def add_event(self, uid: str, reason: str, message: str, kind: str = "Normal") -> None:
        from millpond.store.models import TrainingEvent  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions.begin() as session:
            session.add(TrainingEvent(job_uid=uid, at=utcnow(), type=kind, reason=reason, message=message))

    def events(self, uid: str) -> builtins.list[EventRecord]:
        from sqlalchemy import select  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import TrainingEvent  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions() as session:
            rows: list[TrainingEvent] = list(session.scalars(
                select(TrainingEvent).where(TrainingEvent.job_uid == uid).order_by(TrainingEvent.id)))
            return [EventRecord(_aware(r.at) or utcnow(), r.type, r.reason, r.message) for r in rows]

"""Recurring runs in the metadata database, and the claims that keep a scheduled run from starting twice.

Every method is one short transaction, so two servers sharing a home see each other's changes.
A scheduled time is claimed by inserting its ``scheduled_runs`` row: the primary key
(recurring run, time) lets exactly one claimant through, whichever process it runs in.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from typing import Any, overload

from sqlalchemy import DateTime, and_, case, func, insert, literal, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from millpond.store.journal import FINAL_STATES
from millpond.store.keys import utcnow
from millpond.store.listing import ListQuery, Page, one_page
from millpond.store.models import Experiment, RecurringRun, Run, ScheduledRun
from millpond.store.results import rows_changed

TZ = DateTime(timezone=True)

# What a list of recurring runs filters and sorts by, under KFP's field names.
RECURRING_RUN_FIELDS = {
    "display_name": RecurringRun.name, "name": RecurringRun.name, "recurring_run_id": RecurringRun.id,
    "id": RecurringRun.id, "experiment_id": RecurringRun.experiment_id, "created_at": RecurringRun.created_at,
    "updated_at": RecurringRun.updated_at,
    "mode": case((RecurringRun.enabled.is_(True), "ENABLE"), else_="DISABLE"),
    "status": case((RecurringRun.enabled.is_(True), "ENABLED"), else_="DISABLED"),
}


@dataclass(frozen=True)
class Trigger:
    """When runs start: a cron expression (as Kubeflow reads it, seconds first) or every ``interval_second`` seconds."""

    cron: str | None = None
    interval_second: int | None = None
    start_time: dt.datetime | None = None
    end_time: dt.datetime | None = None


@dataclass(frozen=True)
class RecurringRunRecord:
    """A recurring run as the service and the routes read it (times are aware, in UTC)."""

    id: str
    name: str
    trigger: Trigger
    description: str = ""
    experiment_id: str | None = None
    namespace: str = ""
    service_account: str = ""
    pipeline_spec: dict[str, Any] | None = None
    platform_spec: dict[str, Any] | None = None
    pipeline_id: str | None = None
    pipeline_version_id: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    pipeline_root: str | None = None
    max_concurrency: int = 1
    no_catchup: bool = False
    enabled: bool = True
    created_at: dt.datetime = field(default_factory=utcnow)
    updated_at: dt.datetime = field(default_factory=utcnow)
    last_scheduled_at: dt.datetime | None = None
    error: str | None = None


@overload
def aware(moment: dt.datetime) -> dt.datetime: ...
@overload
def aware(moment: None) -> None: ...
def aware(moment: dt.datetime | None) -> dt.datetime | None:
    """A time in UTC with its zone (SQLite hands stored times back without one)."""
    if moment is None:
        return None
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


def record_of(row: RecurringRun) -> RecurringRunRecord:
    trigger = Trigger(cron=row.cron, interval_second=row.interval_second, start_time=aware(row.start_time),
                      end_time=aware(row.end_time))
    return RecurringRunRecord(
        id=row.id, name=row.name, trigger=trigger, description=row.description or "", experiment_id=row.experiment_id,
        namespace=row.namespace or "", service_account=row.service_account or "", pipeline_spec=row.pipeline_spec,
        platform_spec=row.platform_spec, pipeline_id=row.pipeline_id, pipeline_version_id=row.pipeline_version_id,
        parameters=row.parameters or {}, pipeline_root=row.pipeline_root, max_concurrency=row.max_concurrency,
        no_catchup=bool(row.no_catchup), enabled=bool(row.enabled), created_at=aware(row.created_at) or utcnow(),
        updated_at=aware(row.updated_at) or utcnow(), last_scheduled_at=aware(row.last_scheduled_at), error=row.error,
    )


def _columns(record: RecurringRunRecord) -> dict[str, Any]:
    values = {f.name: getattr(record, f.name) for f in dataclasses.fields(record) if f.name != "trigger"}
    values.update(cron=record.trigger.cron, interval_second=record.trigger.interval_second,
                  start_time=aware(record.trigger.start_time), end_time=aware(record.trigger.end_time))
    for key in ("created_at", "updated_at", "last_scheduled_at"):
        values[key] = aware(values[key])
    return values


class RecurringRunStore:
    """The recurring runs of one metadata database."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def session(self) -> Session:
        """A session for the service's lookups that span tables (the pipeline version, the experiment)."""
        return self._sessions()

    # --- the recurring runs ---------------------------------------------------------------
    def page(self, query: ListQuery, experiment_id: str | None = None,
             namespace: str | None = None) -> Page[RecurringRunRecord]:
        """One page of recurring runs (newest first unless ``query`` sorts), of one experiment or all, of one
        namespace (None: every namespace)."""
        rows = select(RecurringRun)
        if experiment_id:
            rows = rows.where(RecurringRun.experiment_id == experiment_id)
        if namespace is not None:
            rows = rows.where(RecurringRun.namespace == namespace)
        with self._sessions() as session:
            found = one_page(session, rows, query, RECURRING_RUN_FIELDS, RecurringRun.created_at.desc())
            return Page([record_of(row) for row in found.items], found.total, found.next_offset)

    def add(self, record: RecurringRunRecord) -> bool:
        """Insert ``record``; False (and nothing written) when a recurring run with its id exists."""
        with self._sessions() as session:
            session.add(RecurringRun(**_columns(record)))
            try:
                session.commit()
            except IntegrityError:
                session.rollback()
                return False
        return True

    def get(self, recurring_id: str) -> RecurringRunRecord | None:
        with self._sessions() as session:
            row = session.get(RecurringRun, recurring_id)
            return record_of(row) if row is not None else None

    def enabled(self) -> list[RecurringRunRecord]:
        with self._sessions() as session:
            rows = session.scalars(select(RecurringRun).where(RecurringRun.enabled.is_(True))
                                   .order_by(RecurringRun.created_at))
            return [record_of(row) for row in rows]

    def set_enabled(self, recurring_id: str, enabled: bool) -> bool:
        """Enable or disable; False when there is no such recurring run."""
        with self._sessions() as session:
            row = session.get(RecurringRun, recurring_id)
            if row is None:
                return False
            if bool(row.enabled) != enabled:
                row.enabled, row.updated_at = enabled, utcnow()
                session.commit()
        return True

    def delete(self, recurring_id: str) -> bool:
        """Forget a recurring run and its claims; the runs it started stay."""
        with self._sessions() as session:
            row = session.get(RecurringRun, recurring_id)
            if row is None:
                return False
            session.query(ScheduledRun).filter(ScheduledRun.recurring_run_id == recurring_id).delete()
            session.delete(row)
            session.commit()
        return True

    def disable_for_experiment(self, experiment_id: str) -> int:
        """Disable every enabled recurring run of an experiment; how many were."""
        with self._sessions() as session:
            result = session.execute(
                update(RecurringRun)
                .where(RecurringRun.experiment_id == experiment_id, RecurringRun.enabled.is_(True))
                .values(enabled=False, updated_at=utcnow())
            )
            session.commit()
            return rows_changed(result)

    def experiment_state(self, experiment_id: str) -> str | None:
        """An experiment's storage state (AVAILABLE or ARCHIVED); None when it does not exist."""
        with self._sessions() as session:
            experiment = session.get(Experiment, experiment_id)
            return (experiment.storage_state or "AVAILABLE") if experiment is not None else None

    def link_runs(self, recurring_id: str, run_ids: list[str]) -> None:
        """Mark existing runs as started by a recurring run (for runs recorded before the table existed)."""
        if not run_ids:
            return
        with self._sessions() as session:
            session.execute(update(Run).where(Run.id.in_(run_ids), Run.recurring_run_id.is_(None))
                            .values(recurring_run_id=recurring_id))
            session.commit()

    # --- scheduling -----------------------------------------------------------------------
    def claim(self, recurring_id: str, moment: dt.datetime) -> str:
        """Claim the run of one scheduled time: ``claimed``; ``taken`` when another scheduler claimed it
        first; ``disabled`` when the recurring run was disabled or deleted meanwhile (nothing written)."""
        source = select(RecurringRun.id, literal(aware(moment), TZ), literal(utcnow(), TZ)).where(
            RecurringRun.id == recurring_id, RecurringRun.enabled.is_(True))
        statement = insert(ScheduledRun).from_select(["recurring_run_id", "scheduled_at", "claimed_at"], source)
        with self._sessions() as session:
            try:
                inserted = rows_changed(session.execute(statement))
                session.commit()
            except IntegrityError:
                session.rollback()
                return "taken"
        return "claimed" if inserted else "disabled"

    def settle(self, recurring_id: str, moment: dt.datetime, run_id: str | None = None,
               error: str | None = None) -> None:
        """Record what came of a claimed time: its run, or why none started (kept on the recurring run too)."""
        moment = aware(moment)
        with self._sessions() as session:
            session.execute(update(ScheduledRun)
                            .where(ScheduledRun.recurring_run_id == recurring_id, ScheduledRun.scheduled_at == moment)
                            .values(run_id=run_id, error=error))
            if run_id is not None:
                session.execute(update(Run).where(Run.id == run_id).values(recurring_run_id=recurring_id))
            session.execute(update(RecurringRun).where(RecurringRun.id == recurring_id).values(error=error))
            self._advance(session, recurring_id, moment)
            session.commit()

    def advance(self, recurring_id: str, moment: dt.datetime) -> None:
        """Move the schedule past ``moment`` (never back), e.g. when another scheduler handled it."""
        with self._sessions() as session:
            self._advance(session, recurring_id, aware(moment))
            session.commit()

    @staticmethod
    def _advance(session: Session, recurring_id: str, moment: dt.datetime) -> None:
        session.execute(update(RecurringRun)
                        .where(RecurringRun.id == recurring_id,
                               or_(RecurringRun.last_scheduled_at.is_(None), RecurringRun.last_scheduled_at < moment))
                        .values(last_scheduled_at=moment))

    def record_error(self, recurring_id: str, error: str) -> None:
        with self._sessions() as session:
            session.execute(update(RecurringRun).where(RecurringRun.id == recurring_id).values(error=error))
            session.commit()

    def in_flight(self, recurring_id: str, claimed_since: dt.datetime) -> int:
        """Runs of a recurring run not yet final, plus claims since ``claimed_since`` whose run is being started."""
        with self._sessions() as session:
            runs = session.scalar(select(func.count()).where(Run.recurring_run_id == recurring_id,
                                                             Run.state.not_in(FINAL_STATES))) or 0
            starting = session.scalar(select(func.count()).where(
                ScheduledRun.recurring_run_id == recurring_id, ScheduledRun.run_id.is_(None),
                ScheduledRun.error.is_(None), ScheduledRun.claimed_at >= aware(claimed_since))) or 0
        return int(runs) + int(starting)

    def abandon_stale_claims(self, claimed_before: dt.datetime, reason: str) -> list[str]:
        """Give a reason to claims whose scheduler died before starting their run; their recurring runs' ids."""
        stale = and_(ScheduledRun.run_id.is_(None), ScheduledRun.error.is_(None),
                     ScheduledRun.claimed_at < aware(claimed_before))
        with self._sessions() as session:
            rows = list(session.execute(select(ScheduledRun.recurring_run_id, ScheduledRun.scheduled_at).where(stale)))
            if not rows:
                return []
            session.execute(update(ScheduledRun).where(stale).values(error=reason))
            for recurring_id, moment in rows:
                message = f"the run at {aware(moment).isoformat()} was not started: {reason}"
                session.execute(update(RecurringRun).where(RecurringRun.id == recurring_id).values(error=message))
            session.commit()
        return sorted({recurring_id for recurring_id, _ in rows})

    def scheduled(self, recurring_id: str) -> list[tuple[dt.datetime, str | None, str | None]]:
        """The claimed times of a recurring run, oldest first: (time, run id, error)."""
        with self._sessions() as session:
            rows = session.execute(select(ScheduledRun.scheduled_at, ScheduledRun.run_id, ScheduledRun.error)
                                   .where(ScheduledRun.recurring_run_id == recurring_id)
                                   .order_by(ScheduledRun.scheduled_at))
            return [(aware(moment), run_id, error) for moment, run_id, error in rows]

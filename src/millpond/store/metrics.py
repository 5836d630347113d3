"""What ``/metrics`` reads from the metadata database: counts by state and task durations, as aggregates.

Why aggregates read at scrape time, not counters kept by the server: runs are not all the
server's — ``millpond run`` in a terminal, a recurring run's scheduler, another machine of a Ray
cluster write the same database — so only the database knows every task that finished, and a
server's counters would start from zero at each restart and count only its own runs. Each
scrape is a fixed number of ``GROUP BY`` queries the database answers in one pass over its rows
(no row comes back to Python): the cost grows with the table but stays small (measured in the
README: a few tens of milliseconds for 10,000 runs with 50,000 tasks on SQLite).

A task's duration is ``finished_at - started_at`` of a task that has both (cached ones included:
their duration is what the cache lookup took); each histogram bucket is one ``SUM(CASE ...)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import case, func, literal_column, select

from millpond.store.db import session_factory
from millpond.store.models import Run, Task, TrainingJob

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

# Seconds; a task lasts from a fraction of a second (a cached step) to hours (training)
DURATION_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 10800.0)


@dataclass(frozen=True)
class DurationHistogram:
    """Finished tasks of one state: cumulative counts per bucket bound (the last: all of them), their sum."""

    state: str
    buckets: tuple[tuple[float, int], ...]
    count: int
    total_seconds: float


@dataclass(frozen=True)
class ActiveInstance:
    """A running training job's instance, as ``/metrics`` measures it: the job, and its session leader."""

    namespace: str
    job: str
    pid: int | None
    pid_start: str | None


class MetricsQueries:
    """Aggregates over runs, tasks and training jobs for one scrape."""

    def __init__(self, database_url: str) -> None:
        self._sessions: sessionmaker[Session] = session_factory(database_url)

    def run_states(self) -> dict[str, int]:
        with self._sessions() as session:
            return {state: count for state, count in session.execute(
                select(Run.state, func.count()).group_by(Run.state))}

    def task_states(self) -> dict[str, int]:
        with self._sessions() as session:
            return {state: count for state, count in session.execute(
                select(Task.state, func.count()).group_by(Task.state))}

    def job_statuses(self) -> dict[str, int]:
        with self._sessions() as session:
            return {status: count for status, count in session.execute(
                select(TrainingJob.status, func.count()).group_by(TrainingJob.status))}

    def task_durations(self, bounds: tuple[float, ...] = DURATION_BUCKETS) -> list[DurationHistogram]:
        """One histogram per final state of the tasks that started and finished."""
        with self._sessions() as session:
            seconds = _seconds_between(session.get_bind().dialect.name)
            columns = [func.sum(case((seconds <= bound, 1), else_=0)) for bound in bounds]
            query = (select(Task.state, func.count(), func.sum(seconds), *columns)
                     .where(Task.started_at.is_not(None), Task.finished_at.is_not(None))
                     .group_by(Task.state))
            found = []
            for state, count, total, *cumulative in session.execute(query):
                buckets = tuple(zip(bounds, (int(c or 0) for c in cumulative), strict=True))
                found.append(DurationHistogram(state, buckets, int(count), max(0.0, float(total or 0.0))))
            return found

    def running_instances(self) -> list[ActiveInstance]:
        """The instances of the jobs that hold resources now (PENDING/RUNNING) and have not finished."""
        from millpond.store.models import TrainingInstance

        with self._sessions() as session:
            rows = session.execute(
                select(TrainingJob.namespace, TrainingJob.name, TrainingInstance.pid, TrainingInstance.pid_start)
                .join(TrainingInstance, TrainingInstance.job_uid == TrainingJob.uid)
                .where(TrainingJob.status.in_(("PENDING", "RUNNING")), TrainingInstance.finished_at.is_(None)))
            return [ActiveInstance(*row) for row in rows]


def _seconds_between(dialect: str):  # type: ignore[no-untyped-def]  # a SQL expression
    """``finished_at - started_at`` in seconds, as each database computes it."""
    if dialect == "postgresql":
        return func.extract("epoch", Task.finished_at - Task.started_at)
    # SQLite keeps DateTime as ISO text; julianday() reads it (with or without a zone suffix)
    return (func.julianday(Task.finished_at) - func.julianday(Task.started_at)) * literal_column("86400.0")

"""What ``/metrics`` reads from the metadata database: counts by state and task durations, as aggregates.

Why aggregates read at scrape time, not counters kept by the server: runs are not all the
server's — ``millpond run`` in a terminal, a recurring run's scheduler, another machine of a Ray
cluster write the same database — so only the database knows every task that finished, and a
server's counters would start from zero at each restart and count only its own runs. Each
scrape is a fixed number of ``GROUP BY`` queries the database answers in one pass over its rows
(no row comes back to Python): the cost grows with the table but stays small (measured in the
README: a few tens of milliseconds for 10,000 runs with 50,000 tasks on SQLite).

A task's duration is ``finished_at - started_at`` of a task that has both (cached ones included:
their duration is what the cache lookup took), computed once per row by the database.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import func, select, text

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
        """One histogram per state of the tasks that started and finished.

        Each task's duration is computed once (a materialised CTE on SQLite, which would otherwise
        inline the expression into every bucket's test) and put in its first bucket by one CASE; the
        database groups by (state, bucket) and the cumulative counts are summed here.
        """
        bucket_case = " ".join(f"WHEN s <= {bound!r} THEN {number}" for number, bound in enumerate(bounds))
        with self._sessions() as session:
            dialect = session.get_bind().dialect.name
            if dialect == "postgresql":
                seconds, materialized = "EXTRACT(EPOCH FROM (finished_at - started_at))", "MATERIALIZED"
            else:  # SQLite keeps DateTime as ISO text; julianday() reads it. MATERIALIZED: SQLite 3.35 on
                seconds = "(julianday(finished_at) - julianday(started_at)) * 86400.0"
                materialized = "MATERIALIZED" if sqlite3.sqlite_version_info >= (3, 35) else ""
            rows = session.execute(text(
                f"WITH d AS {materialized} (SELECT state, {seconds} AS s FROM tasks "
                "WHERE started_at IS NOT NULL AND finished_at IS NOT NULL) "
                f"SELECT state, CASE {bucket_case} ELSE {len(bounds)} END AS b, COUNT(*), SUM(s) "
                "FROM d GROUP BY state, b")).all()
        per_state: dict[str, list[int]] = {}
        totals: dict[str, float] = {}
        for state, bucket, count, total in rows:
            per_state.setdefault(state, [0] * (len(bounds) + 1))[int(bucket)] += int(count)
            totals[state] = totals.get(state, 0.0) + float(total or 0.0)
        found = []
        for state, counts in sorted(per_state.items()):
            cumulative, running = [], 0
            for bound, count in zip(bounds, counts, strict=False):
                running += count
                cumulative.append((bound, running))
            found.append(DurationHistogram(state, tuple(cumulative), sum(counts), max(0.0, totals[state])))
        return found

    def running_instances(self) -> list[ActiveInstance]:
        """The instances of the jobs that hold resources now (PENDING/RUNNING) and have not finished."""
        from millpond.store.models import TrainingInstance  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions() as session:
            rows = session.execute(
                select(TrainingJob.namespace, TrainingJob.name, TrainingInstance.pid, TrainingInstance.pid_start)
                .join(TrainingInstance, TrainingInstance.job_uid == TrainingJob.uid)
                .where(TrainingJob.status.in_(("PENDING", "RUNNING")), TrainingInstance.finished_at.is_(None)))
            return [ActiveInstance(*row) for row in rows]

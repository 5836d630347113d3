"""Triggers as Kubeflow takes them, and the times they are due, as its ScheduledWorkflow controller computes them.

- cron: read by :data:`millpond.cron.KUBEFLOW`, robfig/cron v1.2.0's ``cron.Parse``, in UTC: six
  fields, seconds first (``0 */5 * * * *``), or five with the day of week left out
  (``0 */5 * * *`` is every five minutes, at second 0), or a descriptor (``@hourly``,
  ``@every 1h30m``). Its first time is the first after ``start_time`` (or, without one, after
  the recurring run's creation), never ``start_time`` itself; each next one the first after the
  last scheduled;
- periodic: every ``interval_second`` seconds, the first run one interval after creation (or after
  ``start_time``);

both with optional ``start_time`` / ``end_time`` (a time after ``end_time`` is never due).
With catch-up, every time missed is due; without (``no_catchup``), only the latest.
"""

from __future__ import annotations

import datetime as dt

from millpond.cron import KUBEFLOW, Schedule, cron_problem, parse_schedule
from millpond.errors import UserError
from millpond.store.recurring import Trigger, aware

MAX_DUE = 10_000  # a schedule far behind (every second, a year off) is not walked to its end
# A longer period never comes round (and 2**63 seconds is past datetime's year 9999 and SQLite's int64).
MAX_INTERVAL_SECONDS = 100 * 366 * 24 * 3600


def parse_time(text: str | None, where: str) -> dt.datetime | None:
    """An RFC 3339 time (a missing zone is UTC), or None for an empty one."""
    if not text:
        return None
    try:
        moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise UserError(f"{where}: not an RFC 3339 time: {text!r}") from None
    return aware(moment)


def make_trigger(
    kind: str, cron: str | None, interval_second: int | None, start_time: str | None, end_time: str | None,
) -> Trigger:
    """A validated trigger; ``kind`` is ``cron_schedule`` or ``periodic_schedule`` (named in messages).

    A cron expression is kept as given: Kubeflow's API server checks the text itself.
    """
    if kind == "cron_schedule":
        problem = cron_problem(cron if cron is not None else "", KUBEFLOW)
        if problem is not None:
            raise UserError(f"trigger.cron_schedule.cron {cron!r} is not a cron schedule of {KUBEFLOW.reader}: "
                            f"{problem} (seconds first: {KUBEFLOW.example!r} is hourly)")
        interval_second = None
    else:
        if interval_second is None or interval_second <= 0:
            raise UserError("trigger.periodic_schedule.interval_second must be a positive number of seconds")
        if interval_second > MAX_INTERVAL_SECONDS:
            raise UserError(f"trigger.periodic_schedule.interval_second {interval_second} is over the maximum of "
                            f"{MAX_INTERVAL_SECONDS} (100 years)")
        cron = None
    start = parse_time(start_time, f"trigger.{kind}.start_time")
    end = parse_time(end_time, f"trigger.{kind}.end_time")
    if start and end and end <= start:
        raise UserError(f"trigger.{kind}: end_time must be after start_time")
    return Trigger(cron=cron, interval_second=interval_second, start_time=start, end_time=end)


def due_times(
    trigger: Trigger, created_at: dt.datetime, last: dt.datetime | None, now: dt.datetime, catchup: bool = True,
    most: int = MAX_DUE,
) -> list[dt.datetime]:
    """The scheduled times after ``last`` (the latest handled) up to ``now``, oldest first, at most ``most``.

    Without ``catchup``, only the latest of them. A stored cron expression this parser refuses
    (one an older millpond accepted) raises UserError.
    """
    if trigger.interval_second is not None:
        return _periodic_due(trigger, trigger.interval_second, created_at, last, now, catchup, most)
    assert trigger.cron is not None
    schedule = parse_schedule(trigger.cron, KUBEFLOW)
    # The controller's effective last time: the last scheduled, else start_time, else creation;
    # never before start_time.
    base = last if last is not None else (trigger.start_time or created_at)
    if trigger.start_time is not None and trigger.start_time > base:
        base = trigger.start_time
    anchor = trigger.start_time or created_at  # @every counts its intervals from here
    limit = now if trigger.end_time is None else min(now, trigger.end_time)
    moment = schedule.next_after(base, anchor)
    if moment is None or moment > limit:
        return []
    if not catchup:
        return [_latest(schedule, moment, limit, anchor)]
    due: list[dt.datetime] = []
    while moment is not None and moment <= limit and len(due) < most:
        due.append(moment)
        moment = schedule.next_after(moment, anchor)
    return due


def _latest(schedule: Schedule, first: dt.datetime, limit: dt.datetime, anchor: dt.datetime) -> dt.datetime:
    """The last time at or before ``limit``, ``first`` being one: the run a recurring run without catch-up starts."""
    latest = schedule.last_at_or_before(limit, anchor)
    return first if latest is None or latest < first else latest


def _periodic_due(
    trigger: Trigger, interval_second: int, created_at: dt.datetime, last: dt.datetime | None, now: dt.datetime,
    catchup: bool, most: int,
) -> list[dt.datetime]:
    """Every ``interval_second`` seconds after ``last`` (or ``start_time``, or creation)."""
    base = last if last is not None else (trigger.start_time or created_at)
    interval = dt.timedelta(seconds=interval_second)
    limit = now if trigger.end_time is None else min(now, trigger.end_time)
    count = (limit - base) // interval if limit >= base else 0
    if count < 1:
        return []
    if not catchup:
        return [base + count * interval]
    return [base + step * interval for step in range(1, min(count, most) + 1)]

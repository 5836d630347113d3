"""Triggers as Kubeflow takes them, and the times they are due.

- cron: six fields, seconds first (``"0 */5 * * * *"``), read in UTC; five fields get a 0 second;
- periodic: every ``interval_second`` seconds, the first run one interval after creation (or after
  ``start_time``);

both with optional ``start_time`` / ``end_time``.
"""

from __future__ import annotations

import datetime as dt

from croniter import croniter

from millpond.errors import UserError
from millpond.store.recurring import Trigger, aware

MAX_DUE = 10_000  # a schedule far behind (every second, a year off) is not walked to its end


def parse_time(text: str | None, where: str) -> dt.datetime | None:
    """An RFC 3339 time (a missing zone is UTC), or None for an empty one."""
    if not text:
        return None
    try:
        moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise UserError(f"{where}: not an RFC 3339 time: {text!r}") from None
    return aware(moment)


def cron_fields(text: str) -> str:
    """Kubeflow's six fields (seconds first); five fields get a leading 0 second."""
    fields = text.split()
    return " ".join(["0", *fields]) if len(fields) == 5 else text


def make_trigger(
    kind: str, cron: str | None, interval_second: int | None, start_time: str | None, end_time: str | None,
) -> Trigger:
    """A validated trigger; ``kind`` is ``cron_schedule`` or ``periodic_schedule`` (named in messages)."""
    if kind == "cron_schedule":
        cron = (cron or "").strip()
        if len(cron.split()) not in (5, 6) or not croniter.is_valid(cron_fields(cron), second_at_beginning=True):
            raise UserError(f"trigger.cron_schedule.cron: invalid cron expression {cron!r} "
                            "(six fields, seconds first, e.g. '0 0 * * * *')")
        interval_second = None
    else:
        if interval_second is None or interval_second <= 0:
            raise UserError("trigger.periodic_schedule.interval_second must be a positive number of seconds")
        cron = None
    start = parse_time(start_time, f"trigger.{kind}.start_time")
    end = parse_time(end_time, f"trigger.{kind}.end_time")
    if start and end and end <= start:
        raise UserError(f"trigger.{kind}: end_time must be after start_time")
    return Trigger(cron=cron, interval_second=interval_second, start_time=start, end_time=end)


def next_after(trigger: Trigger, after: dt.datetime) -> dt.datetime:
    if trigger.interval_second is not None:
        return after + dt.timedelta(seconds=trigger.interval_second)
    assert trigger.cron is not None
    moment: dt.datetime = croniter(cron_fields(trigger.cron), after, second_at_beginning=True).get_next(dt.datetime)
    return aware(moment)  # type: ignore[return-value]


def due_times(
    trigger: Trigger, created_at: dt.datetime, last: dt.datetime | None, now: dt.datetime
) -> list[dt.datetime]:
    """The scheduled times after ``last`` (the latest handled) up to ``now``, oldest first.

    Before the first run, a cron schedule is due at ``start_time`` itself, a periodic one an
    interval after it (or after creation when there is no ``start_time``).
    """
    if last is None:
        start = trigger.start_time
        if start is None:
            last = created_at
        else:
            last = start - dt.timedelta(microseconds=1) if trigger.cron is not None else start
    due: list[dt.datetime] = []
    moment = next_after(trigger, last)
    while moment <= now and (trigger.end_time is None or moment <= trigger.end_time) and len(due) < MAX_DUE:
        due.append(moment)
        moment = next_after(trigger, moment)
    return due

"""``policy: Cron``: run an operation at each time its schedule names, for as long as it lives.

As the CronJob Fluid makes for it would: the schedule is read by :mod:`millpond.cron` (``CRONJOB``)
(the very parser ``apply`` checked it with), in UTC; one run at a time, a time that passes
during a run being skipped. Between runs the process sleeps in steps of at most
``lifeline.WAKE_S``, so deleting the operation or its dataset, or removing its home, ends it
within about a second; during a run the lifeline's watcher does the same.

Status, as Fluid's ``OperationStatus`` has it: the last run's ``phase`` and ``conditions``,
``lastScheduleTime`` and ``lastSuccessfulTime``; and ``nextScheduleTime`` while it waits.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from typing import Any

from millpond.cron import CRONJOB, HORIZON_YEARS, parse_schedule
from millpond.datasets.operations.lifeline import Lifeline
from millpond.errors import UserError
from millpond.store.resources import Resource, ResourceStore

Run = Callable[[str, str, str], dict[str, Any]]


def _stamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_on_schedule(resource: Resource, run: Run, lifeline: Lifeline) -> int:
    """Run ``resource`` at every time its schedule names until its lifeline breaks; the exit status.

    0 when it ended because it, its dataset or its home went away; 1 when its schedule cannot
    run (one stored before ``apply`` checked schedules so, or one with no time left).
    """
    store = ResourceStore(lifeline.settings)
    try:
        schedule = parse_schedule(str(resource.spec.get("schedule") or ""), CRONJOB)
    except UserError as exc:
        return _fail(store, resource, f"spec.schedule {resource.spec.get('schedule')!r} cannot run: {exc}")
    while True:
        due = schedule.next_after(dt.datetime.now(dt.timezone.utc), resource.created_at)
        if due is None:
            never = f"spec.schedule {schedule.text!r} names no time in the next {HORIZON_YEARS} years"
            return _fail(store, resource, never)
        reason = lifeline.broken()
        if reason is None:
            _update(store, resource, {"nextScheduleTime": _stamp(due)})
            reason = lifeline.sleep_until(due.timestamp())
        if reason is not None:
            print(f"{resource.kind} {resource.name}: schedule ended: {reason}", file=sys.stderr, flush=True)
            return 0
        with lifeline.working():
            status = run(resource.kind, resource.name, resource.namespace)
        done: dict[str, Any] = {"lastScheduleTime": _stamp(due)}
        if status.get("phase") == "Complete":
            done["lastSuccessfulTime"] = _stamp(dt.datetime.now(dt.timezone.utc))
        _update(store, resource, done)


def _update(store: ResourceStore, resource: Resource, fields: dict[str, Any]) -> None:
    """Add ``fields`` to the operation's status (``Pending`` until its first run)."""
    found = store.get(resource.kind, resource.name, resource.namespace)
    if found is None or found.uid != resource.uid:
        return
    status = {"phase": "Pending", "conditions": [], **found.status, **fields}
    store.set_status(resource.kind, resource.name, status, resource.namespace)


def _fail(store: ResourceStore, resource: Resource, message: str) -> int:
    now = _stamp(dt.datetime.now(dt.timezone.utc))
    # Kubernetes' word for a CronJob whose schedule cannot run: the schedule, not one run, failed.
    condition = {"type": "Failed", "status": "True", "reason": "InvalidSchedule", "message": message,
                 "lastProbeTime": now, "lastTransitionTime": now}
    _update(store, resource, {"phase": "Failed", "conditions": [condition]})
    print(f"{resource.kind} {resource.name}: Failed: {message}", file=sys.stderr, flush=True)
    return 1

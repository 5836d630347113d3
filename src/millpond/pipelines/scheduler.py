"""The scheduler: a daemon thread that starts the runs of enabled recurring runs when they are due.

It starts runs through a ``start`` function (the server passes ``pipelines.start.start_run``
bound to its store and workers), so a scheduled run is like any other. It honours
``max_concurrency`` (a due time waits while that many of the recurring run's runs are in
flight) and ``no_catchup`` (when several times are due, e.g. after a disable/enable or a
restart, only the latest is run; otherwise each missed time is run, at most
``CATCHUP_PER_TICK`` per tick). A recurring run whose stored cron expression cannot be read
(kept from an older millpond) says so in its ``error`` and starts nothing, as Kubeflow's
controller never schedules an unparsable one.

Each due time is claimed in the database before its run starts (``RecurringRunStore.claim``),
so two servers on one home never start the same scheduled run twice. A run that cannot be
started (its pipeline version deleted, its experiment archived, the database busy) leaves its
reason on the recurring run (``error``); a failing tick is logged and the next one tries again:
the thread never ends before :meth:`Scheduler.stop`.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable

from millpond.errors import UserError
from millpond.pipelines.recurring import scheduled_request
from millpond.pipelines.schedules import due_times
from millpond.pipelines.start import StartRequest
from millpond.store.keys import utcnow
from millpond.store.recurring import RecurringRunRecord, RecurringRunStore

log = logging.getLogger(__name__)

TICK_S = 0.5
CATCHUP_PER_TICK = 10
# A claim whose run is not recorded after this long belongs to a scheduler that died in between.
CLAIM_TTL = dt.timedelta(minutes=5)
SWEEP_EVERY = dt.timedelta(minutes=1)  # how often such claims are looked for (a scan of the claims)

Starter = Callable[[StartRequest], str]  # starts a run, returns its id; raises UserError for a run it refuses


class Scheduler:
    """Starts due runs every ``TICK_S`` seconds until stopped."""

    def __init__(self, store: RecurringRunStore, start: Starter, tick_s: float = TICK_S) -> None:
        self.store = store
        self.start_run = start
        self.tick_s = tick_s
        self.failed_ticks = 0  # ticks that raised (each logged); the thread went on
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_sweep: dt.datetime | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="millpond-scheduler")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _loop(self) -> None:
        while not self._stop.wait(self.tick_s):
            try:
                self.tick()
            except Exception:  # the database busy or gone a moment: log it, try again next tick
                self.failed_ticks += 1
                log.exception("recurring run scheduler: tick failed (will retry)")

    def tick(self, now: dt.datetime | None = None) -> None:
        """Start what is due at ``now``; one recurring run's failure does not hold up the others."""
        now = now or utcnow()
        if self._next_sweep is None or now >= self._next_sweep:
            self.store.abandon_stale_claims(now - CLAIM_TTL, "the scheduler stopped before starting it")
            self._next_sweep = now + SWEEP_EVERY
        for record in self.store.enabled():
            try:
                self._advance(record, now)
            except Exception as exc:
                log.exception("recurring run %s: scheduling failed", record.id)
                self._note(record.id, f"scheduling failed: {type(exc).__name__}: {exc}")

    def _advance(self, record: RecurringRunRecord, now: dt.datetime) -> None:
        try:
            due = due_times(record.trigger, record.created_at, record.last_scheduled_at, now,
                            catchup=not record.no_catchup, most=CATCHUP_PER_TICK)
        except UserError as exc:  # a stored cron expression this millpond refuses: it never runs
            message = f"the schedule cannot run: cron {record.trigger.cron!r}: {exc}"
            if record.error != message:  # said once, not at every tick
                log.warning("recurring run %s: %s", record.id, message)
                self._note(record.id, message)
            return
        for moment in due:
            if self.store.in_flight(record.id, now - CLAIM_TTL) >= record.max_concurrency:
                return  # wait: the time stays due
            claim = self.store.claim(record.id, moment)
            if claim == "disabled":
                return
            if claim == "taken":  # another server on this home starts it
                self.store.advance(record.id, moment)
                continue
            self._start(record, moment)

    def _start(self, record: RecurringRunRecord, moment: dt.datetime) -> None:
        when = moment.isoformat().replace("+00:00", "Z")
        try:
            run_id = self.start_run(scheduled_request(record, moment))
        except UserError as exc:  # e.g. a deleted pipeline version, an archived experiment
            log.warning("recurring run %s: the run at %s was not started: %s", record.id, when, exc)
            self.store.settle(record.id, moment, error=f"the run at {when} was not started: {exc}")
            return
        except Exception as exc:
            log.exception("recurring run %s: the run at %s was not started", record.id, when)
            self.store.settle(
                record.id, moment, error=f"the run at {when} was not started: {type(exc).__name__}: {exc}"
            )
            return
        self.store.settle(record.id, moment, run_id=run_id)

    def _note(self, recurring_id: str, message: str) -> None:
        try:
            self.store.record_error(recurring_id, message)
        except Exception:  # the database itself is failing: the log has it
            log.exception("recurring run %s: could not record the error", recurring_id)

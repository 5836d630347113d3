"""The recurring-run scheduler's rules, by the clock, over a real metadata database.

The tests that use the ``store`` run on SQLite and on PostgreSQL (the ``database`` fixture).

Runs are recorded by the ``start`` function the scheduler is given (the server gives it
``pipelines.start.start_run``); everything else — claims, schedule, errors — is the real store.
"""

from __future__ import annotations

import datetime as dt
import logging
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.orm import sessionmaker

from millpond.errors import UserError
from millpond.pipelines.scheduler import Scheduler
from millpond.pipelines.schedules import make_trigger
from millpond.pipelines.start import StartRequest
from millpond.store.db import driver_url, get_engine, session_factory
from millpond.store.recurring import RecurringRunRecord, RecurringRunStore, Trigger

T0 = dt.datetime(2030, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


class Recorder:
    """A scheduler over a home's database whose runs are recorded (their scheduled names) instead of started."""

    def __init__(self, store: RecurringRunStore, fail: Exception | None = None) -> None:
        self.started: list[str] = []
        self.fail = fail
        self.scheduler = Scheduler(store, self.start, tick_s=0.02)

    def start(self, request: StartRequest) -> str:
        if self.fail is not None:
            raise self.fail
        assert request.display_name is not None
        self.started.append(request.display_name.rsplit("-", 1)[1])
        return f"run-{len(self.started)}"


@pytest.fixture
def store(database: str) -> RecurringRunStore:
    return RecurringRunStore(session_factory(database))


def _add(store: RecurringRunStore, trigger: Trigger, **fields: object) -> RecurringRunRecord:
    record = RecurringRunRecord(id="r1", name="r", trigger=trigger, created_at=T0, updated_at=T0,
                                pipeline_spec={}, **fields)  # type: ignore[arg-type]
    assert store.add(record)
    return record


def _names(*seconds: int) -> list[str]:
    return [(T0 + dt.timedelta(seconds=s)).strftime("%Y%m%d%H%M%S") for s in seconds]


def test_catchup_runs_each_missed_time(store: RecurringRunStore) -> None:
    recorder = Recorder(store)
    _add(store, make_trigger("cron_schedule", "*/10 * * * * *", None, None, None))
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=35))
    assert recorder.started == _names(10, 20, 30)
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=39))
    assert len(recorder.started) == 3
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=40))
    assert recorder.started == _names(10, 20, 30, 40)
    assert [run_id for _, run_id, _ in store.scheduled("r1")] == ["run-1", "run-2", "run-3", "run-4"]


def test_no_catchup_runs_only_the_latest(store: RecurringRunStore) -> None:
    recorder = Recorder(store)
    _add(store, Trigger(interval_second=10), no_catchup=True)
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=35))
    assert recorder.started == _names(30)


def test_full_concurrency_keeps_the_time_due(store: RecurringRunStore, database: str) -> None:
    recorder = Recorder(store)
    _add(store, Trigger(interval_second=10))
    with get_engine(database).begin() as db:  # a run of r1 in flight
        db.execute(text("INSERT INTO experiments (id, name, description, created_at)"
                        " VALUES ('e', 'e', '', '2030-01-01')"))
        db.execute(text("INSERT INTO runs (id, name, experiment_id, pipeline_name, pipeline_spec, parameters,"
                        " pipeline_root, state, outputs, created_at, recurring_run_id) VALUES ('busy', 'b', 'e', 'p',"
                        " '{}', '{}', '/x', 'RUNNING', '{}', '2030-01-01', 'r1')"))
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=25))
    assert recorder.started == []
    with get_engine(database).begin() as db:
        db.execute(text("UPDATE runs SET state = 'SUCCEEDED' WHERE id = 'busy'"))
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=26))
    assert recorder.started == _names(10, 20)


def test_start_and_end_times_bound_the_schedule(store: RecurringRunStore) -> None:
    """The first time is the first after start_time, never start_time itself, as Kubeflow's controller
    has it (robfig's Next is strictly after; its cron_schedule_test.go: start 10:10:00, "0 * * * * *",
    first run 10:11:00); none after end_time."""
    recorder = Recorder(store)
    start, end = T0 + dt.timedelta(seconds=100), T0 + dt.timedelta(seconds=125)
    _add(store, make_trigger("cron_schedule", "*/10 * * * * *", None, start.isoformat(), end.isoformat()))
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=90))
    assert recorder.started == []
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=200))
    assert recorder.started == _names(110, 120)


# (cron, seconds after creation the scheduler looks, the runs started by then): Kubeflow reads a
# cron with robfig/cron v1.2.0's Parse, seconds first; five fields leave out the day of week.
KUBEFLOW_READS = [
    ("0 */5 * * *", 11 * 60, [300, 600]),  # every 5 minutes at second 0 (millpond read every 5 hours)
    ("*/2 * * * *", 7, [2, 4, 6]),  # every 2 seconds (millpond read every 2 minutes)
    ("0 0 * * * *", 2 * 3600 + 1, [3600, 7200]),  # Kubeflow's docs: hourly
    ("*/2 * * * * *", 7, [2, 4, 6]),
    ("@every 90s", 200, [90, 180]),  # robfig's descriptors (millpond refused them)
    ("@every 1m30s", 200, [90, 180]),
    ("@hourly", 3601, [3600]),
    ("0 0 * * 7 *", 3601, []),  # the fifth field is the month: hourly in July
]


@pytest.mark.parametrize(("cron", "look_at", "expected"), KUBEFLOW_READS)
def test_cron_fields_are_read_as_kubeflow_reads_them(
    store: RecurringRunStore, cron: str, look_at: int, expected: list[int]
) -> None:
    recorder = Recorder(store)
    _add(store, make_trigger("cron_schedule", cron, None, None, None), max_concurrency=10)
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=look_at))
    assert recorder.started == _names(*expected)


@pytest.mark.parametrize(("cron", "said"), [
    ("0 0 0 * * 7", "day of week field '7': 7 is above 6"),  # robfig's days are 0-6 (croniter took 7)
    ("0 0 * * * * *", "expected 5 to 6 fields"),
    ("0 * * *", "found 4"),
    ("@every banana", "not a Go duration"),
    ("@Hourly", "unknown descriptor"),
    ("0 0 0 30 2 *", "never fires"),
])
def test_a_cron_kubeflow_refuses_is_refused(cron: str, said: str) -> None:
    with pytest.raises(UserError) as refused:
        make_trigger("cron_schedule", cron, None, None, None)
    assert said in str(refused.value) and "seconds first" in str(refused.value), refused.value


def test_every_counts_from_start_time_and_stops_at_end_time(store: RecurringRunStore) -> None:
    recorder = Recorder(store)
    start, end = T0 + dt.timedelta(seconds=100), T0 + dt.timedelta(seconds=125)
    _add(store, make_trigger("cron_schedule", "@every 10s", None, start.isoformat(), end.isoformat()))
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=105))
    assert recorder.started == []
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=200))
    assert recorder.started == _names(110, 120)


@pytest.mark.parametrize("trigger", [
    make_trigger("cron_schedule", "* * * * * *", None, None, None), Trigger(interval_second=1),
], ids=["cron", "periodic"])
def test_no_catchup_far_behind_runs_the_latest_time(store: RecurringRunStore, trigger: Trigger) -> None:
    """A day behind an every-second schedule: the one run is for the latest time, not the 10,000th."""
    recorder = Recorder(store)
    _add(store, trigger, no_catchup=True)
    recorder.scheduler.tick(T0 + dt.timedelta(days=1, milliseconds=500))
    assert recorder.started == _names(86400)


def test_no_catchup_runs_the_latest_time_before_end_time(store: RecurringRunStore) -> None:
    recorder = Recorder(store)
    end = T0 + dt.timedelta(seconds=125)
    _add(store, make_trigger("cron_schedule", "*/10 * * * * *", None, None, end.isoformat()), no_catchup=True)
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=500))
    assert recorder.started == _names(120)
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=900))
    assert recorder.started == _names(120)


def test_a_stored_cron_this_parser_refuses_starts_nothing_and_says_why_once(
    store: RecurringRunStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A home's recurring run stored when millpond read crons with croniter: day of week 7 (Sunday there)."""
    recorder = Recorder(store)
    _add(store, Trigger(cron="0 0 0 * * 7"))
    with caplog.at_level(logging.WARNING, logger="millpond.pipelines.scheduler"):
        for days in (8, 9, 10):
            recorder.scheduler.tick(T0 + dt.timedelta(days=days))
    assert recorder.started == []
    record = store.get("r1")
    assert record is not None and record.error is not None
    assert "the schedule cannot run: cron '0 0 0 * * 7'" in record.error and "7 is above 6" in record.error
    assert [r.levelname for r in caplog.records] == ["WARNING"], caplog.text  # once, and no traceback


def test_disabled_recurring_runs_start_nothing(store: RecurringRunStore) -> None:
    recorder = Recorder(store)
    _add(store, Trigger(interval_second=1), enabled=False)
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=30))
    assert recorder.started == []


def test_two_schedulers_start_each_time_once(database: str) -> None:
    """Two servers on one database: each has its own engine and scheduler; the claims let one through per time."""
    get_engine(database)  # the schema
    options = {"connect_args": {"timeout": 30}} if database.startswith("sqlite") else {}
    engines = [create_engine(driver_url(database), **options) for _ in range(2)]
    stores = [RecurringRunStore(sessionmaker(bind=engine, expire_on_commit=False)) for engine in engines]
    _add(stores[0], Trigger(interval_second=1), max_concurrency=10)
    recorders = [Recorder(store) for store in stores]
    barrier = threading.Barrier(2)

    def tick(recorder: Recorder) -> None:
        for second in range(2, 40, 3):
            barrier.wait()
            recorder.scheduler.tick(T0 + dt.timedelta(seconds=second))

    threads = [threading.Thread(target=tick, args=(recorder,)) for recorder in recorders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for engine in engines:
        engine.dispose()
    started = recorders[0].started + recorders[1].started
    assert sorted(started) == _names(*range(1, 39)), "a scheduled time was started twice or never"
    assert all(run_id for _, run_id, _ in stores[0].scheduled("r1"))


def test_a_refused_run_is_recorded_on_the_recurring_run(store: RecurringRunStore) -> None:
    recorder = Recorder(store, fail=UserError("no pipeline version with id 'gone'"))
    _add(store, Trigger(interval_second=10))
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=15))
    record = store.get("r1")
    assert record is not None and record.error is not None
    assert "the run at 2030-01-01T12:00:10Z was not started: no pipeline version with id 'gone'" in record.error
    assert record.last_scheduled_at == T0 + dt.timedelta(seconds=10)  # that time is over, with its reason
    recorder.fail = None
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=25))
    assert recorder.started == _names(20)
    record = store.get("r1")
    assert record is not None and record.error is None


def test_the_scheduler_outlives_a_busy_database(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A writer holding the database makes ticks fail (logged); the thread goes on and starts the run later."""
    url = f"sqlite:///{tmp_path / 'millpond.db'}"
    get_engine(url)
    impatient = sessionmaker(bind=create_engine(url, connect_args={"timeout": 0.05}), expire_on_commit=False)
    store = RecurringRunStore(impatient)
    now = dt.datetime.now(dt.UTC)
    record = RecurringRunRecord(id="r1", name="r", trigger=Trigger(interval_second=3600),
                                created_at=now - dt.timedelta(seconds=3599), pipeline_spec={})
    assert store.add(record)
    recorder = Recorder(store)
    holder = sqlite3.connect(tmp_path / "millpond.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the write lock, as a long transaction of another process holds it
    with caplog.at_level(logging.ERROR, logger="millpond.pipelines.scheduler"):
        recorder.scheduler.start()
        try:
            deadline = time.monotonic() + 30
            while "database is locked" not in caplog.text:
                assert time.monotonic() < deadline, "no tick met the locked database"
                time.sleep(0.05)
            assert recorder.started == [] and recorder.scheduler.is_alive()
            holder.execute("ROLLBACK")
            while not recorder.started:
                assert time.monotonic() < deadline, "the due run never started once the database was free"
                time.sleep(0.05)
            assert recorder.scheduler.is_alive()
        finally:
            recorder.scheduler.stop()
            holder.close()
    assert len(recorder.started) == 1
    [(moment, run_id, error)] = store.scheduled("r1")
    assert (run_id, error) == ("run-1", None) and moment == record.created_at + dt.timedelta(seconds=3600)


def test_a_claim_whose_scheduler_died_gets_a_reason_and_holds_nothing_back(store: RecurringRunStore) -> None:
    now = dt.datetime.now(dt.UTC)
    record = RecurringRunRecord(id="r1", name="r", trigger=Trigger(interval_second=3600), created_at=now,
                                pipeline_spec={})
    assert store.add(record)
    moment = now.replace(microsecond=0)
    assert store.claim("r1", moment) == "claimed"  # ... and the server holding it was killed here
    assert store.claim("r1", moment) == "taken"
    assert store.in_flight("r1", now - dt.timedelta(minutes=5)) == 1
    Recorder(store).scheduler.tick(now + dt.timedelta(minutes=6))
    [(_, run_id, error)] = store.scheduled("r1")
    assert run_id is None and error == "the scheduler stopped before starting it"
    got = store.get("r1")
    assert got is not None and got.error is not None and "was not started: the scheduler stopped" in got.error
    assert store.in_flight("r1", now - dt.timedelta(minutes=5)) == 0

"""Cron data operations: apply accepts exactly the schedules a Kubernetes CronJob takes (what Fluid
hands them to) and the scheduler runs every one of them; a scheduled or working operation ends when
its dataset is deleted (its operations go with it, as Fluid's owner references make them) or its
home is removed. Real processes, a real SeaweedFS, no mocks."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from millpond.cron import CRONJOB, cron_problem, parse_schedule
from millpond.datasets.mounts import fuse_available
from millpond.runners.processes import is_running, start_ticks
from tests.datasets_support import create_s3_dataset, payload

GONE_WITHIN_S = 60.0  # generous: it says "it does not hang", not how fast

# Accepted by robfig/cron's ParseStandard (what the Kubernetes API server checks a CronJob with).
ACCEPTED = [
    "0 * * * *", "*/15 9-17 * * mon-fri", "0 9 * JAN,jul *", "5/15 * * * *", "0 0 1,15 * *", "0 0 29 2 *",
    "? * * * *", "* * * * ?", "+5 * * * *", "1,,2 * * * *", " 0 * * * *",
    "@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually",
    "@every 1m", "@every 2s", "@every 1h30m", "@every 1.5s", "@every 0",
]
# (schedule, what the refusal says): refused by ParseStandard or the API server's TZ rule, or never firing.
REFUSED = [
    ("0 0 31 2 *", "never fires"),
    ("0 0 30 2 *", "never fires"),
    ("0 0 31 4,6,9,11 *", "never fires"),
    (", * * * *", "never fires"),
    ("0 0 * * 7", "7 is above 6"),
    ("@every banana", "not a Go duration"),
    ("@every 1mins", "not a Go duration"),
    ("@every", "unknown descriptor"),
    ("@Daily", "unknown descriptor"),
    ("CRON_TZ=UTC 0 * * * *", "TZ"),
    ("TZ=Europe/Paris 0 * * * *", "TZ"),
    ("0 * * * * *", "expected exactly 5 fields"),
    ("61 * * * *", "61 is above 59"),
    ("*/0 * * * *", "step must be a positive number"),
    ("0 9 * * fri-mon", "begins (5) after it ends (1)"),
    ("1-2-3 * * * *", "too many hyphens"),
    ("L * * * *", "not a number"),
    ("0 0 1W * *", "not a number"),
    ("0 0 ? * 1#2", "not a number"),
    ("H * * * *", "not a number"),
    ("", "empty"),
]


@pytest.mark.parametrize("schedule", ACCEPTED)
def test_every_schedule_a_cronjob_accepts_is_accepted_and_has_a_next_time(schedule: str) -> None:
    assert cron_problem(schedule, CRONJOB) is None
    now = dt.datetime.now(dt.timezone.utc)
    assert parse_schedule(schedule, CRONJOB).next_after(now, now) is not None  # what the scheduler calls


@pytest.mark.parametrize(("schedule", "said"), REFUSED)
def test_a_schedule_a_cronjob_refuses_or_that_never_fires_is_refused(schedule: str, said: str) -> None:
    problem = cron_problem(schedule, CRONJOB)
    assert problem is not None and said in problem, problem
    assert "\n" not in problem


def _times(schedule: str, start: dt.datetime, count: int = 4) -> list[str]:
    parsed, moment, found = parse_schedule(schedule, CRONJOB), start, []
    for _ in range(count):
        moment = parsed.next_after(moment, start)
        found.append(moment.strftime("%a %d %H:%M:%S"))
    return found


def test_times_follow_robfig_day_rule_and_every_counts_from_creation() -> None:
    wednesday = dt.datetime(2025, 1, 1, 12, 0, 30, tzinfo=dt.timezone.utc)
    # Day of month OR day of week when neither is a star; AND when either is ('*' or '*/1' or '?').
    assert _times("0 0 13 * 5", wednesday) == ["Fri 03 00:00:00", "Fri 10 00:00:00", "Mon 13 00:00:00",
                                               "Fri 17 00:00:00"]
    assert _times("0 0 */1 * 5", wednesday) == ["Fri 03 00:00:00", "Fri 10 00:00:00", "Fri 17 00:00:00",
                                                "Fri 24 00:00:00"]
    assert _times("0 0 ? * fri", wednesday)[:1] == ["Fri 03 00:00:00"]
    assert _times("0 0 1-31 * 5", wednesday)[:3] == ["Thu 02 00:00:00", "Fri 03 00:00:00", "Sat 04 00:00:00"]
    assert _times("@weekly", wednesday)[:1] == ["Sun 05 00:00:00"]
    # @every: creation time (to the second) plus whole intervals, whenever the scheduler asks.
    created = wednesday.replace(microsecond=600_000)
    every = parse_schedule("@every 1m30s", CRONJOB)
    assert every.next_after(created, created) == wednesday + dt.timedelta(seconds=90)
    later = wednesday + dt.timedelta(seconds=200)
    assert every.next_after(later, created) == wednesday + dt.timedelta(seconds=270)
    assert parse_schedule("@every 0.3s", CRONJOB).every == dt.timedelta(seconds=1)  # robfig's Every: at least 1 s


# --- real processes -------------------------------------------------------------------------------

def _dataload(name: str, dataset: str, schedule: str) -> str:
    return (f"apiVersion: data.fluid.io/v1alpha1\nkind: DataLoad\nmetadata: {{name: {name}}}\nspec:\n"
            f"  dataset: {{name: {dataset}, namespace: default}}\n  policy: Cron\n  schedule: \"{schedule}\"\n")


def _sleeping_process(name: str, dataset: str) -> str:
    return (f"apiVersion: data.fluid.io/v1alpha1\nkind: DataProcess\nmetadata: {{name: {name}}}\nspec:\n"
            f"  dataset: {{name: {dataset}, namespace: default, mountPath: /data}}\n  processor:\n"
            "    script:\n      command: [bash]\n      source: |\n        sleep 600\n")


def _apply(cli: Any, tmp_path: Path, text: str, name: str) -> Any:
    (tmp_path / f"{name}.yaml").write_text(text)
    return cli("apply", "-f", tmp_path / f"{name}.yaml")


def _status(cli: Any, kind: str, name: str) -> dict[str, Any]:
    result = cli("get", kind, name, "-o", "json")
    assert result.code == 0, result.err
    return result.json()["status"]


def _wait_for(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout:.0f}s: {what}")


def _operation_process(home: Path, kind: str, name: str) -> tuple[int, str]:
    """(pid, start ticks) of the background process running ``kind/name`` for ``home``, found in /proc."""
    def find() -> tuple[int, str] | None:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if (b"millpond.datasets.operations" in argv and kind.encode() in argv and name.encode() in argv
                    and f"MILLPOND_HOME={home}".encode() in environ):
                ticks = start_ticks(int(entry.name))
                if ticks is not None and is_running(int(entry.name), ticks):
                    return int(entry.name), ticks
        return None
    return _wait_for(find, GONE_WITHIN_S, f"a process running {kind} {name}")


def _group(pid: int) -> list[tuple[int, str]]:
    """Every running process of the process group ``pid`` leads (the operation and what it started)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == pid:
                    ticks = start_ticks(int(entry.name))
                    if ticks is not None and is_running(int(entry.name), ticks):
                        members.append((int(entry.name), ticks))
            except OSError:
                continue
    return members


def _seconds_until_gone(processes: list[tuple[int, str]], since: float) -> float:
    _wait_for(lambda: not any(is_running(pid, ticks) for pid, ticks in processes), GONE_WITHIN_S,
              f"processes {processes} ending")
    return time.monotonic() - since


def _files() -> dict[str, bytes]:
    return {f"part-{i}.bin": payload(f"part{i}", 20_000) for i in range(3)}


@pytest.mark.s3
@pytest.mark.parametrize("schedule", ["0 0 31 2 *", "0 0 * * 7", "@every banana"])
def test_a_schedule_that_cannot_run_is_refused_at_apply(cli, home, tmp_path, s3_server, schedule) -> None:
    create_s3_dataset(cli, home, tmp_path, s3_server, _files(), name="ds")
    result = _apply(cli, tmp_path, _dataload("bad", "ds", schedule), "bad")
    assert result.code == 2, (result.out, result.err)
    assert result.err.startswith("error: ") and len(result.err.strip().splitlines()) == 1, result.err
    assert "spec.schedule" in result.err and "Traceback" not in result.err
    assert cli("get", "dataload", "bad").code != 0  # nothing stored
    assert "bad" not in cli("get", "dataloads").out


@pytest.mark.s3
def test_every_two_seconds_runs_again_and_again_and_a_question_mark_schedule_is_timed(
    cli, home, tmp_path, s3_server
) -> None:
    dataset = create_s3_dataset(cli, home, tmp_path, s3_server, _files(), name="ds")
    assert _apply(cli, tmp_path, _dataload("often", "ds", "@every 2s"), "often").code == 0
    assert _apply(cli, tmp_path, _dataload("minutely", "ds", "? * * * *"), "minutely").code == 0
    first = _wait_for(lambda: _status(cli, "dataload", "often").get("lastSuccessfulTime"), GONE_WITHIN_S,
                      "a first run of the @every 2s DataLoad")
    _wait_for(lambda: _status(cli, "dataload", "often").get("lastSuccessfulTime", first) > first, GONE_WITHIN_S,
              "a second run of the @every 2s DataLoad")
    status = _status(cli, "dataload", "often")
    assert status["phase"] == "Complete" and status["infos"]["files"] == str(len(dataset.files)), status
    # "? * * * *" is every minute to a CronJob: the scheduler has its next time, within the minute.
    timed = _wait_for(lambda: _status(cli, "dataload", "minutely").get("nextScheduleTime"), GONE_WITHIN_S,
                      "the next time of the '? * * * *' DataLoad")
    due = dt.datetime.strptime(timed, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    assert due - dt.datetime.now(dt.timezone.utc) <= dt.timedelta(seconds=60) and due.second == 0
    assert _status(cli, "dataload", "minutely")["phase"] in ("Pending", "Executing", "Complete")
    assert cli("delete", "dataset", "ds").code == 0


@pytest.mark.s3
@pytest.mark.skipif(fuse_available() is not None, reason=f"FUSE unavailable: {fuse_available()}")
@pytest.mark.usefixtures("database")  # on SQLite and on PostgreSQL
def test_deleting_a_dataset_deletes_its_operations_and_ends_their_processes(cli, home, tmp_path, s3_server) -> None:
    create_s3_dataset(cli, home, tmp_path, s3_server, _files(), name="ds")
    create_s3_dataset(cli, home, tmp_path, s3_server, _files(), name="other")
    assert _apply(cli, tmp_path, _dataload("nightly", "ds", "@daily"), "nightly").code == 0
    assert _apply(cli, tmp_path, _sleeping_process("busy", "ds"), "busy").code == 0
    assert _apply(cli, tmp_path, _dataload("kept", "other", "@daily"), "kept").code == 0
    _wait_for(lambda: _status(cli, "dataload", "nightly").get("nextScheduleTime"), GONE_WITHIN_S, "a sleeping Cron")
    _wait_for(lambda: _status(cli, "dataprocess", "busy").get("phase") == "Executing", GONE_WITHIN_S, "busy working")
    sleeper = _operation_process(home, "DataLoad", "nightly")
    worker = _operation_process(home, "DataProcess", "busy")
    script = _wait_for(lambda: [p for p in _group(worker[0]) if p != worker], GONE_WITHIN_S, "the script running")
    kept = _operation_process(home, "DataLoad", "kept")

    started = time.monotonic()
    result = cli("delete", "dataset", "ds")
    returned = time.monotonic() - started
    assert result.code == 0, result.err
    # delete waits for the working ones: the DataProcess and its script are gone when it returns.
    assert not any(is_running(pid, ticks) for pid, ticks in [worker, *script]), "still working after delete"
    sleeper_s = _seconds_until_gone([sleeper], started)
    assert "nightly" not in cli("get", "dataloads").out
    assert "busy" not in cli("get", "dataprocesses").out
    assert cli("get", "dataload", "nightly").code != 0
    # Another dataset's operation is not touched.
    assert "kept" in cli("get", "dataloads").out and is_running(*kept)
    started = time.monotonic()
    assert cli("delete", "dataset", "other").code == 0
    kept_s = _seconds_until_gone([kept], started)
    print(f"\ndelete returned after {returned:.2f}s (the DataProcess and its script ended by then); "
          f"the Cron sleeper ended {sleeper_s:.2f}s after the delete began; "
          f"the other dataset's Cron {kept_s:.2f}s after its own delete")  # capsys: printed after the last cli


@pytest.mark.s3
@pytest.mark.usefixtures("database")  # on SQLite and on PostgreSQL
def test_removing_the_home_ends_a_scheduled_operation(cli, home, tmp_path, s3_server) -> None:
    create_s3_dataset(cli, home, tmp_path, s3_server, _files(), name="ds")
    assert _apply(cli, tmp_path, _dataload("hourly", "ds", "@hourly"), "hourly").code == 0
    _wait_for(lambda: _status(cli, "dataload", "hourly").get("nextScheduleTime"), GONE_WITHIN_S, "a sleeping Cron")
    sleeper = _operation_process(home, "DataLoad", "hourly")
    assert any(str(home) in os.readlink(f"/proc/{sleeper[0]}/fd/{fd}") for fd in os.listdir(f"/proc/{sleeper[0]}/fd"))

    started = time.monotonic()
    shutil.rmtree(home)
    print(f"\nthe Cron sleeper ended {_seconds_until_gone([sleeper], started):.2f}s after its home was removed")
    assert not home.exists()  # nor did it make the home again


@pytest.mark.s3
def test_a_deleted_operation_ends_its_own_process(cli, home, tmp_path, s3_server) -> None:
    create_s3_dataset(cli, home, tmp_path, s3_server, _files(), name="ds")
    assert _apply(cli, tmp_path, _dataload("alone", "ds", "@hourly"), "alone").code == 0
    _wait_for(lambda: _status(cli, "dataload", "alone").get("nextScheduleTime"), GONE_WITHIN_S, "a sleeping Cron")
    sleeper = _operation_process(home, "DataLoad", "alone")
    started = time.monotonic()
    assert cli("delete", "dataload", "alone").code == 0
    print(f"\nthe deleted DataLoad's process ended {_seconds_until_gone([sleeper], started):.2f}s later")


@pytest.mark.s3
@pytest.mark.usefixtures("database")  # on SQLite and on PostgreSQL
def test_a_reapplied_cron_operation_runs_its_new_schedule_in_one_process(cli, home, tmp_path, s3_server) -> None:
    create_s3_dataset(cli, home, tmp_path, s3_server, _files(), name="ds")
    assert _apply(cli, tmp_path, _dataload("moved", "ds", "@hourly"), "moved").code == 0
    _wait_for(lambda: _status(cli, "dataload", "moved").get("nextScheduleTime"), GONE_WITHIN_S, "a sleeping Cron")
    old = _operation_process(home, "DataLoad", "moved")
    result = _apply(cli, tmp_path, _dataload("moved", "ds", "@daily"), "moved")
    assert result.code == 0 and "configured" in result.out, result.out
    started = time.monotonic()
    old_s = _seconds_until_gone([old], started)
    new = _operation_process(home, "DataLoad", "moved")
    midnight = _wait_for(lambda: _status(cli, "dataload", "moved").get("nextScheduleTime", "").endswith("T00:00:00Z"),
                         GONE_WITHIN_S, "the new schedule's next time")
    assert midnight and new != old and is_running(*new)
    assert cli("delete", "dataset", "ds").code == 0
    gone_s = _seconds_until_gone([new], time.monotonic())  # deleting its dataset ends it, on either database
    print(f"\nthe new schedule's process ended {gone_s:.2f}s after its dataset was deleted")
    print(f"\nthe process of the old schedule ended {old_s:.2f}s after the re-apply")


@pytest.mark.s3
def test_removing_the_home_ends_an_operation_waiting_out_its_ttl(cli, home, tmp_path, s3_server) -> None:
    create_s3_dataset(cli, home, tmp_path, s3_server, _files(), name="ds")
    text = ("apiVersion: data.fluid.io/v1alpha1\nkind: DataLoad\nmetadata: {name: once}\nspec:\n"
            "  dataset: {name: ds, namespace: default}\n  ttlSecondsAfterFinished: 3600\n")
    assert _apply(cli, tmp_path, text, "once").code == 0
    _wait_for(lambda: _status(cli, "dataload", "once").get("phase") == "Complete", GONE_WITHIN_S, "the load")
    waiting = _operation_process(home, "DataLoad", "once")
    started = time.monotonic()
    shutil.rmtree(home)
    print(f"\nthe process waiting out its TTL ended {_seconds_until_gone([waiting], started):.2f}s after rm -rf")
    assert not home.exists()  # it did not make the home again to delete the operation from it


@pytest.mark.s3
def test_a_stored_schedule_that_cannot_run_fails_with_the_reason_instead_of_pending_for_ever(
    cli, home, tmp_path, s3_server
) -> None:
    from millpond.datasets.operations import runner as operations
    from millpond.store.resources import ResourceStore

    create_s3_dataset(cli, home, tmp_path, s3_server, _files(), name="ds")
    # As an older millpond stored it (its apply took "@every banana"): straight into the store.
    manifest = {"apiVersion": "data.fluid.io/v1alpha1", "kind": "DataLoad", "metadata": {"name": "old"},
                "spec": {"dataset": {"name": "ds", "namespace": "default"}, "policy": "Cron",
                         "schedule": "@every banana"}}
    ResourceStore().apply([manifest])
    operations.start("DataLoad", "old", "default")
    status = _wait_for(lambda: (s := _status(cli, "dataload", "old"))["phase"] == "Failed" and s, GONE_WITHIN_S,
                       "the DataLoad to fail")
    condition = status["conditions"][0]
    assert condition["reason"] == "InvalidSchedule" and "'@every banana'" in condition["message"], condition
    assert "not a Go duration" in condition["message"]


@pytest.mark.s3
@pytest.mark.postgresql
def test_dropping_the_postgresql_database_ends_a_sleeping_cron_operation(
    cli, home, tmp_path, s3_server, pg_server, monkeypatch
) -> None:
    """On PostgreSQL the database is the home: dropping it ends the operations that lived in it,
    as removing a SQLite home does, instead of leaving a process that reads nothing for ever."""
    from millpond.store.db import forget_engines

    name = pg_server.new_database()
    monkeypatch.setenv("MILLPOND_DATABASE_URL", pg_server.url(name))
    try:
        create_s3_dataset(cli, home, tmp_path, s3_server, _files(), name="ds")
        assert _apply(cli, tmp_path, _dataload("hourly", "ds", "@hourly"), "hourly").code == 0
        _wait_for(lambda: _status(cli, "dataload", "hourly").get("nextScheduleTime"), GONE_WITHIN_S, "a sleeping Cron")
        sleeping = _operation_process(home, "DataLoad", "hourly")
    finally:
        forget_engines()
        pg_server.drop_database(name)  # WITH (FORCE): its connections end too
    started = time.monotonic()
    gone_s = _seconds_until_gone([sleeping], started)
    print(f"\nthe sleeping operation ended {gone_s:.2f}s after its database was dropped")

"""Killing the engine with SIGKILL mid-run, then resuming: no succeeded task runs twice."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from millpond.runners.processes import is_alive
from millpond.settings import load_settings
from millpond.store.runs import RunStore
from tests.conftest import PIPELINES, spawn_cli


def _wait_for(path: Path, limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_sigkill_then_resume(home: Path, tmp_path: Path, cli) -> None:
    marks = tmp_path / "marks"
    engine = spawn_cli(home, "run", PIPELINES / "resumable.py", "-p", f"folder={marks}", "--run-name", "killed",
                       env={"MILLPOND_MAX_PARALLEL": "2"})  # two tasks in flight, even on one CPU
    _wait_for(marks / "slow1.started")
    _wait_for(marks / "slow2.started")
    os.kill(engine.pid, signal.SIGKILL)
    engine.wait()

    listed = cli("runs", "list", "-o", "json").json()
    assert listed[0]["state"] == "RUNNING"  # nobody recorded an end: the engine died
    run_id = listed[0]["run_id"]
    store = RunStore(load_settings().database_url)
    in_flight = [t for t in store.list_tasks(run_id) if t.state == "RUNNING" and t.pid]
    assert len(in_flight) == 2
    deadline = time.monotonic() + 10
    while any(is_alive(t.pid, t.pid_start) for t in in_flight):  # sandboxed tasks die with their engine
        assert time.monotonic() < deadline, "task processes outlived their engine"
        time.sleep(0.05)

    resumed = cli("runs", "resume", run_id, "-o", "json")
    assert resumed.code == 0, resumed.err
    data = resumed.json()
    assert data["state"] == "SUCCEEDED"
    assert data["outputs"] == {"Output": "5000+5000"}  # the inputs were whole, not half-written
    assert (marks / "first.started").read_text() == "x"  # succeeded before the kill: not run again
    assert (marks / "first.done").read_text() == "x"
    assert (marks / "slow1.done").read_text() == "x"
    assert (marks / "combine.started").read_text() == "x"
    steps = {t["outputs"]["Output"]: t for t in data["tasks"] if t["name"].startswith("step")}
    for name in ("slow1", "slow2"):
        assert Path(steps[name]["outputs"]["data"]).read_text() == name * 1000
    assert not list((home / "staging").iterdir())


def test_resume_refuses_a_live_or_finished_run(cli, tmp_path: Path) -> None:
    done = cli("run", PIPELINES / "typed_params.py", "--pipeline", "returns_int", "-o", "json").json()
    again = cli("runs", "resume", done["run_id"])
    assert again.code == 2
    assert "already SUCCEEDED" in again.err


def test_retry_reruns_only_the_failed_tasks(cli, tmp_path: Path) -> None:
    counter = tmp_path / "count"
    failed = cli("run", PIPELINES / "control_flow.py", "--pipeline", "retrying", "-p", f"counter={counter}",
                 "-p", "succeed_on=6", "-o", "json")
    assert failed.code == 1
    assert counter.read_text() == "4"
    retried = cli("runs", "retry", failed.json()["run_id"], "-o", "json")
    assert retried.code == 0, retried.err
    assert retried.json()["outputs"] == {"Output": "attempt=6"}
    assert retried.json()["run_id"] == failed.json()["run_id"]

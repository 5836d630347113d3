"""A task's recorded start is when its process starts, not when it began to wait (issue 11, defect 10).

A task that waits for the resource budget or a process slot is PENDING (KFP's state name), with
no start time, in ``runs get``, the REST API's task details and the engine's progress listener.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

from millpond.pipelines.loader import load_pipeline
from millpond.pipelines.submit import RunRequest, execute_run, prepare_run
from millpond.settings import load_settings
from millpond.store.journal import open_journal
from tests.conftest import PIPELINES, spawn_cli
from tests.server_support import Served

RESOURCES = PIPELINES / "resources.py"
WAITING = PIPELINES / "waiting.py"


class Recorder:
    """An engine listener that keeps every task state it is told, in order."""

    def __init__(self) -> None:
        self.changes: list[tuple[str, str]] = []

    def task_changed(self, path: str, name: str, state: str, error: str | None) -> None:
        self.changes.append((path, state))

    def run_changed(self, state: str, error: str | None) -> None:
        pass


def _moment(text: str | None) -> dt.datetime:
    assert text, "no time recorded"
    return dt.datetime.fromisoformat(text)


def test_a_task_waiting_for_cpus_is_pending_and_starts_after_the_other_ends(home: Path, tmp_path: Path) -> None:
    settings = load_settings()
    store = open_journal(settings.database_url)
    loaded = load_pipeline(RESOURCES, "cpu-hogs")
    run = prepare_run(store, settings, RunRequest(pipeline=loaded, texts={}, values={"folder": str(tmp_path / "busy")}))
    recorder = Recorder()
    result = execute_run(store, settings, run, listener=recorder)
    assert (result.state, result.error) == ("SUCCEEDED", None)
    first, second = sorted(store.list_tasks(run.id), key=lambda t: t.started_at or dt.datetime.max)
    # The second hog got its CPUs only when the first had ended and released them.
    assert first.finished_at is not None and second.started_at is not None
    assert second.started_at >= first.finished_at
    assert [state for path, state in recorder.changes if path == second.path] == ["PENDING", "RUNNING", "SUCCEEDED"]


def _wait_until(check: Any, what: str, limit_s: float = 120.0) -> Any:
    deadline = time.monotonic() + limit_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def test_a_task_waiting_for_a_process_slot_shows_pending_everywhere(cli, home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "marks"
    served = Served()
    one_slot = {"MILLPOND_MAX_PARALLEL": "1"}
    engine = spawn_cli(home, "run", WAITING, "-p", f"folder={folder}", "-o", "json", env=one_slot)
    try:
        _wait_until(lambda: list(folder.glob("*.started")) if folder.exists() else [], "a task started")
        listed = _wait_until(lambda: cli("runs", "list", "-o", "json").json(), "the run is listed")
        run_id = listed[0]["run_id"]

        tasks = {t["name"]: t for t in cli("runs", "get", run_id, "-o", "json").json()["tasks"]}
        [running] = [t for t in tasks.values() if t["state"] == "RUNNING"]
        [pending] = [t for t in tasks.values() if t["state"] == "PENDING"]
        assert running["started_at"] and pending["started_at"] is None
        assert len(list(folder.glob("*.started"))) == 1  # one slot: the other task's process has not started

        with urllib.request.urlopen(f"{served.url}/apis/v2beta1/runs/{run_id}") as response:
            details = json.loads(response.read())["run_details"]["task_details"]
        by_id = {t["task_id"]: t for t in details}
        assert by_id[pending["id"]]["state"] == "PENDING" and "start_time" not in by_id[pending["id"]]
        assert by_id[running["id"]]["state"] == "RUNNING" and "start_time" in by_id[running["id"]]

        opened = dt.datetime.now(dt.timezone.utc)
        (folder / "gate").touch()
        out, err = engine.communicate(timeout=120)
        assert engine.returncode == 0, err
    finally:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "gate").touch()  # whatever failed, the run ends
        if engine.poll() is None:
            engine.communicate(timeout=120)
        served.stop()
    data = json.loads(out)
    assert data["state"] == "SUCCEEDED"
    waited = next(t for t in data["tasks"] if t["id"] == pending["id"])
    # It started once the gate let the other task end, not when it was queued.
    assert _moment(waited["started_at"]) >= opened

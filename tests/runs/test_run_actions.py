"""``millpond runs terminate|archive|unarchive|delete`` and ``runs retry``, run as processes against a real home.

Terminate stops a run whoever runs its engine (a ``millpond run`` in a terminal, a server's
worker); delete removes the run's records, its logs and its artifacts under the default root,
terminating a run in flight first, as Kubeflow does.
"""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

kfp = pytest.importorskip("kfp")
from kfp import compiler, dsl

from millpond.runners.processes import is_alive, start_ticks
from tests.conftest import MILLPOND_BIN, PIPELINES, CliResult, spawn_cli
from tests.server_support import Served


@dsl.component
def nap(marker: str, seconds: int) -> str:
    import os
    import time

    with open(marker + ".tmp", "w") as out:
        out.write(str(os.getpid()))
    os.rename(marker + ".tmp", marker)
    time.sleep(seconds)
    return "woke"


@dsl.pipeline(name="napping")
def napping(marker: str, seconds: int = 120) -> str:
    return nap(marker=marker, seconds=seconds).output


def millpond(home: Path, *args: Any) -> CliResult:
    """``millpond ARGS`` as its own process, over ``home``."""
    done = subprocess.run([str(MILLPOND_BIN), *[str(a) for a in args]], env={**os.environ, "MILLPOND_HOME": str(home)},
                          capture_output=True, text=True, timeout=180, check=False)
    return CliResult(done.returncode, done.stdout, done.stderr)


def _wait_for(path: Path, process: subprocess.Popen[str] | None = None, limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while not path.exists():
        if process is not None and process.poll() is not None:
            pytest.fail(f"the engine ended before {path} appeared: {process.communicate()}")
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _task_process(marker: Path) -> tuple[int, str | None]:
    pid = int(marker.read_text())
    return pid, start_ticks(pid)


def _wait_gone(pid: int, ticks: str | None, limit_s: float = 20.0) -> None:
    deadline = time.monotonic() + limit_s
    while is_alive(pid, ticks):
        assert time.monotonic() < deadline, f"task process {pid} outlived its run"
        time.sleep(0.05)


def _one_error_line(result: CliResult, *words: str) -> None:
    lines = result.err.strip().splitlines()
    assert result.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (result.code, result.err)
    assert "Traceback" not in result.err and not result.out
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture
def napping_yaml(tmp_path: Path) -> Path:
    path = tmp_path / "napping.yaml"
    compiler.Compiler().compile(napping, str(path))
    return path


def _start_napping(home: Path, napping_yaml: Path, marker: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    engine = spawn_cli(home, "run", napping_yaml, "-p", f"marker={marker}", "--run-name", "napping", *extra)
    _wait_for(marker, engine)
    [run] = millpond(home, "runs", "list", "-o", "json").json()
    return engine, run["run_id"]


def test_terminate_a_run_started_in_a_terminal(home: Path, tmp_path: Path, napping_yaml: Path) -> None:
    marker = tmp_path / "started"
    engine, run_id = _start_napping(home, napping_yaml, marker)
    task_pid, task_ticks = _task_process(marker)

    stopped = millpond(home, "runs", "terminate", run_id[:8], "-o", "json")  # a unique prefix is enough
    assert stopped.code == 0, stopped.err
    data = stopped.json()
    assert data["run_id"] == run_id and data["state"] == "CANCELED"
    assert engine.wait(timeout=30) != 0  # the engine ended: its run was cancelled, not finished
    _wait_gone(task_pid, task_ticks)
    shown = millpond(home, "runs", "get", run_id, "-o", "json").json()
    assert shown["state"] == "CANCELED" and all(t["state"] != "RUNNING" for t in shown["tasks"])

    _one_error_line(millpond(home, "runs", "terminate", run_id), "CANCELED", run_id)  # already finished
    _one_error_line(millpond(home, "runs", "terminate", "no-such-run"), "no-such-run")


def test_terminate_a_run_whose_engine_was_killed(home: Path, tmp_path: Path, napping_yaml: Path) -> None:
    marker = tmp_path / "started"
    engine, run_id = _start_napping(home, napping_yaml, marker)
    task_pid, task_ticks = _task_process(marker)
    os.kill(engine.pid, signal.SIGKILL)
    engine.wait()

    stopped = millpond(home, "runs", "terminate", run_id)
    assert stopped.code == 0, stopped.err
    assert stopped.out.strip() == f"run {run_id} terminated: CANCELED"
    _wait_gone(task_pid, task_ticks)
    shown = millpond(home, "runs", "get", run_id, "-o", "json").json()
    assert shown["state"] == "CANCELED" and "no engine" in shown["error"]
    assert all(t["state"] != "RUNNING" for t in shown["tasks"])


def test_terminate_a_run_of_a_server_worker(home: Path, tmp_path: Path) -> None:
    served = Served()
    try:
        client = kfp.Client(host=served.url)
        marker = tmp_path / "started"
        result = client.create_run_from_pipeline_func(napping, arguments={"marker": str(marker)})
        _wait_for(marker)
        task_pid, task_ticks = _task_process(marker)
        stopped = millpond(home, "runs", "terminate", result.run_id, "-o", "json")
        assert stopped.code == 0, stopped.err
        assert stopped.json()["state"] == "CANCELED"
        assert client.get_run(result.run_id).state == "CANCELED"
        _wait_gone(task_pid, task_ticks)
    finally:
        served.stop()


def test_archive_and_unarchive(home: Path) -> None:
    done = millpond(home, "run", PIPELINES / "typed_params.py", "--pipeline", "returns_int", "-o", "json")
    assert done.code == 0, done.err
    run_id = done.json()["run_id"]

    archived = millpond(home, "runs", "archive", run_id[:10], "-o", "json")
    assert archived.code == 0, archived.err
    assert archived.json()["storage_state"] == "ARCHIVED" and archived.json()["state"] == "SUCCEEDED"
    _one_error_line(millpond(home, "runs", "archive", run_id), "already archived")
    restored = millpond(home, "runs", "unarchive", run_id)
    assert restored.code == 0 and restored.out.strip() == f"run {run_id} unarchived"
    _one_error_line(millpond(home, "runs", "unarchive", run_id), "not archived")
    _one_error_line(millpond(home, "runs", "archive", "0000"), "0000")


def test_delete_removes_records_logs_and_default_root_artifacts(home: Path, tmp_path: Path) -> None:
    done = millpond(home, "run", PIPELINES / "artifacts.py", "-o", "json")
    assert done.code == 0, done.err
    run = done.json()
    pipeline = millpond(home, "runs", "get", run["run_id"], "-o", "json").json()["pipeline"]
    folder = home / "artifacts" / pipeline / run["run_id"]
    logs = home / "logs" / run["run_id"]
    assert folder.is_dir() and any(folder.rglob("*")) and logs.is_dir()

    deleted = millpond(home, "runs", "delete", run["run_id"][:8], "-o", "json")
    assert deleted.code == 0, deleted.err
    data = deleted.json()
    assert data["run_id"] == run["run_id"] and data["deleted"] is True
    assert str(folder) in data["removed"] and str(logs) in data["removed"]
    assert not folder.exists() and not logs.exists()
    _one_error_line(millpond(home, "runs", "get", run["run_id"]), run["run_id"])
    _one_error_line(millpond(home, "runs", "delete", run["run_id"]), run["run_id"])
    assert millpond(home, "runs", "list", "-o", "json").json() == []

    # a pipeline root the user chose is not millpond's to clean: its artifacts stay
    root = tmp_path / "my-root"
    mine = millpond(home, "run", PIPELINES / "artifacts.py", "--pipeline-root", root, "-o", "json").json()
    files = sorted(root.rglob("*"))
    assert files
    kept = millpond(home, "runs", "delete", mine["run_id"])
    assert kept.code == 0, kept.err
    assert f"kept {root.resolve()}" in kept.out and sorted(root.rglob("*")) == files
    assert not (home / "logs" / mine["run_id"]).exists()


def test_delete_terminates_a_run_in_flight_first(home: Path, tmp_path: Path, napping_yaml: Path) -> None:
    marker = tmp_path / "started"
    engine, run_id = _start_napping(home, napping_yaml, marker)
    task_pid, task_ticks = _task_process(marker)
    deleted = millpond(home, "runs", "delete", run_id)
    assert deleted.code == 0, deleted.err
    assert deleted.out.startswith(f"run {run_id} deleted")
    assert engine.wait(timeout=30) != 0
    _wait_gone(task_pid, task_ticks)
    assert millpond(home, "runs", "list", "-o", "json").json() == []
    assert not (home / "logs" / run_id).exists() and not (home / "artifacts" / "napping" / run_id).exists()


def test_server_delete_of_a_run_in_flight_stops_it_and_removes_its_files(home: Path, tmp_path: Path) -> None:
    served = Served()
    try:
        client = kfp.Client(host=served.url)
        marker = tmp_path / "started"
        result = client.create_run_from_pipeline_func(napping, arguments={"marker": str(marker)})
        _wait_for(marker)
        task_pid, task_ticks = _task_process(marker)
        assert (home / "logs" / result.run_id).is_dir()
        client.delete_run(result.run_id)  # as Kubeflow: deleting a run in flight stops it
        _wait_gone(task_pid, task_ticks)
        assert not (home / "logs" / result.run_id).exists()
        assert not (home / "logs" / f"engine-{result.run_id}.log").exists()
        assert millpond(home, "runs", "list", "-o", "json").json() == []
    finally:
        served.stop()


def test_retry_says_retried(home: Path) -> None:
    failed = millpond(home, "run", PIPELINES / "failing.py", "--pipeline", "fails", "-o", "json")
    assert failed.code == 1, failed.err
    retried = millpond(home, "runs", "retry", failed.json()["run_id"])
    assert retried.code == 1
    assert "retried" in retried.err and "resumed" not in retried.err


def test_a_run_terminated_before_its_worker_starts_is_never_started(tmp_path: Path) -> None:
    """`runs terminate` of a recorded run with no engine yet (a server's worker still starting) records it
    CANCELED; the worker that starts afterwards must not run it."""
    from millpond.pipelines.loader import load_pipeline
    from millpond.pipelines.submit import RunRequest, prepare_run
    from millpond.settings import load_settings
    from millpond.store.journal import open_journal

    home = tmp_path / "home"
    package = tmp_path / "napping.yaml"
    compiler.Compiler().compile(napping, str(package))
    marker = tmp_path / "started"
    os.environ["MILLPOND_HOME"] = str(home)
    try:
        settings = load_settings()
        store = open_journal(settings.database_url)
        run = prepare_run(store, settings, RunRequest(load_pipeline(package), {}, {"marker": str(marker)}))
    finally:
        del os.environ["MILLPOND_HOME"]
    assert millpond(home, "runs", "terminate", run.id).code == 0
    worker = subprocess.run([str(MILLPOND_BIN.parent / "python"), "-m", "millpond.server.worker", run.id],
                            env={**os.environ, "MILLPOND_HOME": str(home)}, capture_output=True, text=True,
                            timeout=120, check=False)
    assert worker.returncode == 130, worker.stderr
    assert not marker.exists(), "the worker ran a run that had been terminated"
    got = millpond(home, "runs", "get", run.id, "-o", "json").json()
    assert got["state"] == "CANCELED", got

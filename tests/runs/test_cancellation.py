"""A stop signal to the engine (alone, not its process group) at any moment ends the run CANCELED with no task
process left; a SIGKILLed engine leaves no task behind; a cancelled run is never resumed but by ``runs retry``.

Every process a run starts (engine, guardian, fork server, tasks, their children) carries the test's
MILLPOND_HOME in its environment, so "no process of the run is alive" is a scan of /proc for it.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kfp import compiler

from tests.conftest import MILLPOND_BIN, spawn_cli
from tests.pipelines import cancellable
from tests.server_support import Served

pytestmark = pytest.mark.timeout(300)

STOP = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGHUP": signal.SIGHUP}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The test pipelines as IR YAML (a .py file would be compiled by every `millpond run`)."""
    folder = tmp_path_factory.mktemp("pipelines")
    found = {}
    for name in ("cancellable", "stubborn", "many_quick", "wide"):
        found[name] = folder / f"{name}.yaml"
        compiler.Compiler().compile(getattr(cancellable, name), str(found[name]))
    return found


# --- helpers --------------------------------------------------------------------------
def processes_of(home: Path) -> list[str]:
    """'PID COMMAND' of every live process started for this home (its environment names it)."""
    needle = f"\0MILLPOND_HOME={home}\0".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = b"\0" + Path(f"/proc/{entry}/environ").read_bytes()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in environ:
            found.append(f"{entry} {command[:120]}")
    return found


def living(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running (a zombie, killed and waiting for a parent to reap it, is not)."""
    found = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            found.append(pid)
    return found


def until(what: str, check: Callable[[], Any], limit_s: float = 60.0) -> Any:
    deadline = time.monotonic() + limit_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def assert_nothing_left(home: Path) -> None:
    """No process of the run lives on (polled: the guardian and the kernel need a moment)."""
    deadline = time.monotonic() + 30
    while (left := processes_of(home)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, "processes outlived the run:\n" + "\n".join(left)


def runs(home: Path) -> list[sqlite3.Row]:
    if not (home / "millpond.db").exists():
        return []
    with sqlite3.connect(home / "millpond.db", timeout=30) as db:
        db.row_factory = sqlite3.Row
        try:
            return db.execute("SELECT id, state, error, engine_pid FROM runs ORDER BY created_at").fetchall()
        except sqlite3.OperationalError:  # the schema is still being created
            return []


def tasks(home: Path, run_id: str) -> dict[str, sqlite3.Row]:
    with sqlite3.connect(home / "millpond.db", timeout=30) as db:
        db.row_factory = sqlite3.Row
        return {row["path"]: row for row in db.execute("SELECT * FROM tasks WHERE run_id = ?", (run_id,))}


def started(folder: Path) -> list[str]:
    """The tasks that got going (each leaves NAME.pids)."""
    return sorted(p.stem for p in folder.glob("*.pids")) if folder.exists() else []


def finished(folder: Path) -> list[str]:
    """The long tasks that ran to their end (NAME.done): none may, once their run is cancelled."""
    return sorted(p.stem for p in folder.glob("*.done")) if folder.exists() else []


def assert_cancelled(home: Path, engine: subprocess.Popen[str], signame: str, marks: Path) -> None:
    """The run (if the signal came after it was recorded) is CANCELED with every task final, and nothing lives on."""
    _out, err = engine.communicate(timeout=120)
    recorded = runs(home)
    assert len(recorded) <= 1
    assert_nothing_left(home)
    assert not finished(marks)
    if recorded:
        assert_recorded_cancelled(home, recorded[0], err)
        assert engine.returncode == 130, err
        assert f"cancelled by {signame}" in err  # the CLI says why it stopped


def assert_recorded_cancelled(home: Path, run: sqlite3.Row, err: str) -> None:
    """The run is CANCELED, and so is every task of it that had not ended (loops and iterations too)."""
    assert run["state"] == "CANCELED", (run["state"], run["error"], err)
    unfinished = {path: row["state"] for path, row in tasks(home, run["id"]).items()
                  if row["state"] not in ("SUCCEEDED", "CANCELED", "SKIPPED")}
    assert not unfinished, unfinished


# --- a stop signal, at moments chosen by what the run has done -------------------------
def _at_run_recorded(home: Path, marks: Path) -> bool:
    return bool(runs(home))


def _at_first_task(home: Path, marks: Path) -> bool:
    return len(started(marks)) >= 1


def _while_tasks_wait_for_a_slot(home: Path, marks: Path) -> bool:
    return len(started(marks)) >= 2  # two slots: the other four tasks wait


@pytest.mark.parametrize(("moment", "signame"), [
    (_at_run_recorded, "SIGINT"),
    (_at_first_task, "SIGTERM"),
    (_while_tasks_wait_for_a_slot, "SIGHUP"),
    (_while_tasks_wait_for_a_slot, "SIGINT"),
])
def test_a_stop_signal_cancels_the_run_and_stops_every_task(
    compiled: dict[str, Path], home: Path, tmp_path: Path, moment: Callable[[Path, Path], bool], signame: str,
) -> None:
    marks = tmp_path / "marks"
    engine = spawn_cli(home, "run", compiled["cancellable"], "-p", f"folder={marks}",
                       env={"MILLPOND_MAX_PARALLEL": "2"})
    until(moment.__name__, lambda: moment(home, marks) or engine.poll() is not None)
    assert engine.poll() is None, engine.communicate()
    os.kill(engine.pid, STOP[signame])  # the engine alone, not its process group
    assert_cancelled(home, engine, signame, marks)
    assert runs(home), "the run was recorded before the signal"


def test_tasks_queued_for_a_worker_when_the_run_is_cancelled_touch_nothing(
    compiled: dict[str, Path], home: Path, tmp_path: Path,
) -> None:
    """A 60-item loop on two slots: two tasks run, the rest wait. Once cancelled, a waiting task makes
    no workspace and stages nothing (it once did, each in turn, so a cancelled 20,000-item loop
    took a minute to end): only the tasks that ran or were being prepared leave a log."""
    marks = tmp_path / "marks"
    engine = spawn_cli(home, "run", compiled["wide"], "-p", f"folder={marks}", env={"MILLPOND_MAX_PARALLEL": "2"})
    until("two tasks to run", lambda: len(started(marks)) >= 2 or engine.poll() is not None, 120)
    os.kill(engine.pid, signal.SIGTERM)
    assert_cancelled(home, engine, "SIGTERM", marks)
    states = [row["state"] for row in tasks(home, runs(home)[0]["id"]).values() if row["name"] == "sleeper"]
    assert len(states) == 60 and set(states) == {"CANCELED"}
    logs = [p for p in (home / "logs").rglob("*") if p.is_file()]
    assert len(started(marks)) <= len(logs) <= 2 * 2, logs  # the pool's threads: twice the slots


def test_every_kind_of_task_is_stopped(compiled: dict[str, Path], home: Path, tmp_path: Path) -> None:
    """Forked, container (with a grandchild), sandboxed and looped tasks all running: all stopped, pids gone."""
    marks = tmp_path / "marks"
    engine = spawn_cli(home, "run", compiled["cancellable"], "-p", f"folder={marks}",
                       env={"MILLPOND_MAX_PARALLEL": "8"})
    until("all six tasks to run", lambda: len(started(marks)) == 6 or engine.poll() is not None, 120)
    pids = [int(pid) for name in started(marks) for pid in (marks / f"{name}.pids").read_text().split()]
    os.kill(engine.pid, signal.SIGINT)
    assert_cancelled(home, engine, "SIGINT", marks)
    assert not living(pids)
    states = {row["name"]: row["state"] for row in tasks(home, runs(home)[0]["id"]).values()}
    assert states["sandboxed-sleeper"] == states["shell-sleeper"] == states["sleeper"] == "CANCELED"


@pytest.mark.parametrize("after_s", [0.3, 1.0, 2.0, 3.0, 4.5, 6.0])
def test_timeout_sigint_at_any_moment(compiled: dict[str, Path], home: Path, tmp_path: Path, after_s: float) -> None:
    """The tester's own command: ``timeout -s INT N millpond run slow.yaml``, at start-up and later."""
    marks = tmp_path / "marks"
    engine = subprocess.Popen(
        ["timeout", "-s", "INT", str(after_s), str(MILLPOND_BIN), "run", str(compiled["cancellable"]),
         "-p", f"folder={marks}"],
        env={**os.environ, "MILLPOND_HOME": str(home), "MILLPOND_MAX_PARALLEL": "2"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    _out, err = engine.communicate(timeout=120)
    assert_nothing_left(home)
    assert not finished(marks)
    recorded = runs(home)
    if recorded:  # the signal came once the run existed
        assert_recorded_cancelled(home, recorded[0], err)
        assert "cancelled by SIGINT" in err


def test_a_signal_while_tasks_publish(compiled: dict[str, Path], home: Path, tmp_path: Path) -> None:
    """Many short tasks writing artifacts: the signal lands while some publish or are recorded."""
    marks = tmp_path / "marks"
    engine = spawn_cli(home, "run", compiled["many_quick"], "-p", f"folder={marks}", env={"MILLPOND_MAX_PARALLEL": "2"})
    until("a few tasks to finish", lambda: len(list(marks.glob("quick-*.done"))) >= 3 or engine.poll() is not None)
    os.kill(engine.pid, signal.SIGTERM)
    _out, err = engine.communicate(timeout=120)
    run = runs(home)[0]
    assert run["state"] == "CANCELED", (run["state"], err)
    states = [row["state"] for row in tasks(home, run["id"]).values()]
    assert set(states) <= {"SUCCEEDED", "CANCELED"}, states
    assert "CANCELED" in states
    assert_nothing_left(home)


_ENDLESS_RECURSION = """\
pipelineInfo: {name: endless}
schemaVersion: 2.1.0
sdkVersion: kfp-2.7.0
deploymentSpec: {executors: {}}
components:
  comp-again:
    dag: {tasks: {again: {componentRef: {name: comp-again}, taskInfo: {name: again}}}}
root:
  dag: {tasks: {again: {componentRef: {name: comp-again}, taskInfo: {name: again}}}}
"""


def test_a_signal_ends_an_endless_walk_with_no_process(home: Path, tmp_path: Path) -> None:
    """A DAG that calls itself for ever (as an Argo template may) starts no process: the engine
    never waits on a task, and only its walk can notice the stop. It does, between two scopes."""
    package = tmp_path / "endless.yaml"
    package.write_text(_ENDLESS_RECURSION)
    engine = spawn_cli(home, "run", package)
    until("the recursion to go deep", lambda: (r := runs(home)) and len(tasks(home, r[0]["id"])) > 200, 120)
    os.kill(engine.pid, signal.SIGTERM)
    _out, err = engine.communicate(timeout=60)
    assert engine.returncode == 130, err[-2000:]
    run = runs(home)[0]
    assert_recorded_cancelled(home, run, err)
    assert "cancelled by SIGTERM" in err


# --- SIGKILL: no cleanup of the engine's own; the guardian and the kernel stop the tasks ---------------
def test_tasks_do_not_outlive_an_engine_killed_with_sigkill(
    compiled: dict[str, Path], home: Path, tmp_path: Path
) -> None:
    """Container (``sh -c "sleep …"`` with a grandchild), sandboxed, forked, SIGTERM-ignoring and venv tasks."""
    marks = tmp_path / "marks"
    engine = spawn_cli(home, "run", compiled["cancellable"], "-p", f"folder={marks}",
                       env={"MILLPOND_MAX_PARALLEL": "8"})
    other = spawn_cli(home, "run", compiled["stubborn"], "-p", f"folder={marks}")
    until("all eight tasks to run", lambda: len(started(marks)) == 8 or engine.poll() is not None
          or other.poll() is not None, 120)
    for early in (process for process in (engine, other) if process.poll() is not None):
        pytest.fail(f"an engine ended before its tasks ran (exit {early.returncode}): {early.communicate()[1][-3000:]}")
    pids = [int(pid) for name in started(marks) for pid in (marks / f"{name}.pids").read_text().split()]
    assert len(pids) == 16
    os.kill(engine.pid, signal.SIGKILL)
    os.kill(other.pid, signal.SIGKILL)
    engine.wait()
    other.wait()
    assert_nothing_left(home)
    assert not living(pids)
    assert {run["state"] for run in runs(home)} == {"RUNNING"}  # nobody recorded an end: `runs resume` may go on


# --- a cancelled run stays cancelled --------------------------------------------------------------------------
def test_server_start_resumes_a_killed_run_but_never_a_cancelled_one(
    compiled: dict[str, Path], home: Path, tmp_path: Path, cli: Callable[..., Any],
) -> None:
    marks = tmp_path / "marks"
    # 1. cancelled by SIGINT, recorded CANCELED
    cancelled = spawn_cli(
        home, "run", compiled["cancellable"], "-p", f"folder={marks / 'a'}", "--run-name", "cancelled"
    )
    until("a task of the cancelled run", lambda: started(marks / "a") or cancelled.poll() is not None)
    os.kill(cancelled.pid, signal.SIGINT)
    assert cancelled.wait(120) == 130
    # 2. cancelled, then SIGKILLed while it waits for a task that ignores SIGTERM: left CANCELING
    dying = spawn_cli(home, "run", compiled["stubborn"], "-p", f"folder={marks / 'b'}", "--run-name", "dying")
    until("the stubborn task", lambda: "stubborn" in started(marks / "b") or dying.poll() is not None, 120)
    os.kill(dying.pid, signal.SIGTERM)
    until("CANCELING", lambda: any(r["state"] == "CANCELING" for r in runs(home)) or dying.poll() is not None)
    if dying.poll() is None:
        os.kill(dying.pid, signal.SIGKILL)
    dying.wait()
    assert_nothing_left(home)
    # 3. killed without a cancel: left RUNNING, to be resumed (and quick to finish when it is)
    killed = spawn_cli(home, "run", compiled["cancellable"], "-p", f"folder={marks / 'c'}", "-p", "seconds=1",
                       "--run-name", "killed", env={"MILLPOND_MAX_PARALLEL": "8"})
    until("a task of the killed run", lambda: started(marks / "c") or killed.poll() is not None)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    assert_nothing_left(home)
    by_name = {row["id"]: row for row in runs(home)}
    states = [row["state"] for row in by_name.values()]
    assert states == ["CANCELED", "CANCELING", "RUNNING"], states
    ids = list(by_name)
    before = {run_id: {path: row["attempts"] for path, row in tasks(home, run_id).items()} for run_id in ids[:2]}

    served = Served()
    try:
        until("the killed run to be resumed to its end", lambda: runs(home)[2]["state"] == "SUCCEEDED", 120)
    finally:
        served.stop()
    after = runs(home)
    assert after[0]["state"] == "CANCELED" and after[1]["state"] == "CANCELED", [r["state"] for r in after]
    assert after[0]["engine_pid"] == by_name[ids[0]]["engine_pid"]  # no engine took them up again
    assert after[1]["engine_pid"] == by_name[ids[1]]["engine_pid"]
    for run_id in ids[:2]:
        now = tasks(home, run_id)
        assert {path: row["attempts"] for path, row in now.items()} == before[run_id]
        assert {row["state"] for row in now.values()} == {"CANCELED"}

    resumed = cli("runs", "resume", ids[0])
    assert resumed.code == 2 and "runs retry" in resumed.err  # only an explicit retry runs it again


def test_only_retry_runs_a_cancelled_run_again(
    compiled: dict[str, Path], home: Path, tmp_path: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch,
) -> None:
    marks = tmp_path / "marks"
    engine = spawn_cli(home, "run", compiled["cancellable"], "-p", f"folder={marks}", "-p", "seconds=1",
                       env={"MILLPOND_MAX_PARALLEL": "8"})
    until("a task", lambda: started(marks) or engine.poll() is not None)
    os.kill(engine.pid, signal.SIGINT)
    assert engine.wait(120) == 130
    run_id = runs(home)[0]["id"]
    resumed = cli("runs", "resume", run_id)
    assert resumed.code == 2, resumed.err
    assert f"run {run_id} was cancelled; to run it again use: millpond runs retry {run_id}" in resumed.err
    assert runs(home)[0]["state"] == "CANCELED"
    monkeypatch.setenv("MILLPOND_MAX_PARALLEL", "8")
    retried = cli("runs", "retry", run_id, "-o", "json")
    assert retried.code == 0, retried.err
    assert retried.json()["state"] == "SUCCEEDED"


def test_terminate_through_the_api_stops_the_tasks(compiled: dict[str, Path], home: Path, tmp_path: Path) -> None:
    import kfp

    marks = tmp_path / "marks"
    served = Served()
    try:
        client = kfp.Client(host=served.url)
        run_id = client.create_run_from_pipeline_package(
            str(compiled["cancellable"]), arguments={"folder": str(marks)}, enable_caching=False,
        ).run_id
        until("the tasks to run", lambda: len(started(marks)) >= 2, 120)
        pids = [int(pid) for name in started(marks) for pid in (marks / f"{name}.pids").read_text().split()]
        client.terminate_run(run_id)
        until("the run to end", lambda: runs(home)[0]["state"] not in ("RUNNING", "CANCELING"), 60)
        assert runs(home)[0]["state"] == "CANCELED"
        assert_nothing_left(home)
        assert not living(pids)
    finally:
        served.stop()


def test_terminate_kills_a_worker_that_does_not_stop_in_time(
    compiled: dict[str, Path], home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A task that ignores SIGTERM holds its engine up (it waits out its grace before SIGKILL): past the server's
    own grace the worker is killed, its guardian kills the tasks, and the server records the run CANCELED."""
    import kfp

    from millpond.server import executor

    monkeypatch.setattr(executor, "TERMINATE_GRACE_S", 0.5)
    marks = tmp_path / "marks"
    served = Served()
    try:
        client = kfp.Client(host=served.url)
        run_id = client.create_run_from_pipeline_package(
            str(compiled["stubborn"]), arguments={"folder": str(marks)}, enable_caching=False,
        ).run_id
        until("the stubborn task", lambda: "stubborn" in started(marks), 120)
        worker = served.app.state.millpond.executor._workers[run_id]
        client.terminate_run(run_id)
        until("the run to end", lambda: runs(home)[0]["state"] == "CANCELED", 60)
        assert worker.wait(10) == -signal.SIGKILL  # the server did not wait out the engine's cleanup
        assert_nothing_left(home)
        assert {row["state"] for row in tasks(home, run_id).values()} == {"CANCELED"}
    finally:
        served.stop()

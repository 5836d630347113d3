"""The engines ``millpond server`` starts for its runs: below the server in CPU priority, started off the request.

A run's worker is started from a thread of the executor (``POST /runs`` does not wait for its
fork and exec), at niceness ``MILLPOND_ENGINE_NICE`` (10 by default) for itself and its session's
scheduling group; a terminate that comes while the worker is still being started waits for it
and cancels the run; a worker that cannot be started leaves its run FAILED saying why.
"""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

kfp = pytest.importorskip("kfp")
from kfp import dsl

from millpond.errors import UserError
from tests.queues_support import until
from tests.server_support import Served, call


@dsl.component
def wait_for(path: str) -> str:
    import os
    import time

    while not os.path.exists(path):
        time.sleep(0.05)
    return "waited"


@dsl.pipeline(name="waits")
def waits(go: str) -> str:
    return wait_for(path=go).output


def niceness(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def group_niceness(pid: int) -> int | None:
    """The niceness of ``pid``'s autogroup (``/autogroup-N nice K``); None where the kernel has none, and where
    the process is in a cgroup other than the root (a container, a CI job), whose file Linux leaves empty."""
    try:
        words = Path(f"/proc/{pid}/autogroup").read_text().split()
    except OSError:
        return None
    return int(words[-1]) if words else None


def run_row(served: Served, run_id: str) -> dict[str, Any]:
    status, run = call(served.url, "GET", f"/apis/v2beta1/runs/{run_id}")
    assert status == 200, run
    return run


def test_a_run_s_engine_runs_below_the_server(home: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    served = Served()
    try:
        client = kfp.Client(host=served.url)
        run_id = client.create_run_from_pipeline_func(waits, arguments={"go": str(go)}).run_id
        store = served.app.state.millpond.store
        engine = until(lambda: store.find_run(run_id).engine_pid, 120, "the engine to record itself")
        assert niceness(engine) == max(10, os.nice(0))
        if group_niceness(os.getpid()) == 0:  # a group of its own, lowered too
            assert group_niceness(engine) == 10
        go.touch()
        run = client.wait_for_run_completion(run_id, timeout=120, sleep_duration=0.2)
        assert run.state == "SUCCEEDED", run.error
    finally:
        served.stop()


def test_yield_to_the_server_sets_the_process_and_its_group() -> None:
    """In a session of its own, as the executor starts a worker; 0 leaves both as they were."""
    script = ("import os; from millpond.server.worker import yield_to_the_server as y; y(int(os.sys.argv[1])); "
              "p = '/proc/self/autogroup'; w = open(p).read().split() if os.path.exists(p) else []; "
              "print(os.nice(0), w[-1] if w else '-')")  # empty in a cgroup other than the root
    for asked, expected in ((7, "7"), (0, str(os.nice(0)))):
        done = subprocess.run([sys.executable, "-c", script, str(asked)], capture_output=True, text=True,
                              start_new_session=True, check=True)
        nice, group = done.stdout.split()
        assert nice == expected
        assert group in ("-", "7" if asked else "0")


def test_a_niceness_that_is_none_is_refused_at_start(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from millpond.server.executor import RunExecutor, engine_niceness
    from millpond.settings import load_settings
    from millpond.store.runs import RunStore

    for bad in ("-5", "20", "ten", "1.5", "²"):  # "²": isdigit() takes it, int() does not
        monkeypatch.setenv("MILLPOND_ENGINE_NICE", bad)
        with pytest.raises(UserError, match="MILLPOND_ENGINE_NICE must be a whole number from 0 to 19"):
            RunExecutor(load_settings(), RunStore(load_settings().database_url))
    monkeypatch.setenv("MILLPOND_ENGINE_NICE", "19")
    assert engine_niceness() == 19
    monkeypatch.delenv("MILLPOND_ENGINE_NICE")
    assert engine_niceness() == 10
    monkeypatch.setenv("MILLPOND_ENGINE_NICE", "nope")
    done = subprocess.run([str(Path(sys.executable).parent / "millpond"), "server", "--port", "0"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: MILLPOND_ENGINE_NICE must be a whole number from 0 to 19 (a niceness), not 'nope'"
    ]


def test_a_terminate_right_after_create_cancels_the_run(home: Path, tmp_path: Path) -> None:
    """The terminate may come before the worker is started: it waits for it, and the run ends CANCELED."""
    served = Served()
    try:
        client = kfp.Client(host=served.url)
        run_id = client.create_run_from_pipeline_func(waits, arguments={"go": str(tmp_path / "never")}).run_id
        client.terminate_run(run_id)
        until(lambda: run_row(served, run_id)["state"] == "CANCELED", 120, "the run to end CANCELED")  # kfp's own
        # wait_for_run_completion does not count CANCELED as an end
        executor = served.app.state.millpond.executor
        until(lambda: not executor.running(run_id), 60, "the worker to end")
    finally:
        served.stop()


def test_an_engine_that_cannot_start_fails_its_run(home: Path) -> None:
    """No worker can be started (here the engines' log folder is a file): the create still answers the run,
    which is then recorded FAILED with the reason; nothing is left launching."""
    home.mkdir(parents=True, exist_ok=True)
    served = Served()
    try:
        logs = served.app.state.millpond.settings.logs_dir
        if logs.exists():
            for path in sorted(logs.rglob("*"), reverse=True):
                path.rmdir() if path.is_dir() else path.unlink()
            logs.rmdir()
        logs.write_text("not a folder")
        client = kfp.Client(host=served.url)
        run_id = client.create_run_from_pipeline_func(waits, arguments={"go": "/nowhere"}).run_id
        run = until(lambda: (row := run_row(served, run_id))["state"] == "FAILED" and row, 120, "the run to fail")
        assert run["error"]["message"].startswith("its engine could not be started: ")
        assert not served.app.state.millpond.executor.running(run_id)
    finally:
        served.stop()

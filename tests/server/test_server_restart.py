"""A server restart resumes the runs it left in flight: ``millpond server`` and its run's worker SIGKILLed mid-run."""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

kfp = pytest.importorskip("kfp")
from kfp import dsl

MILLPOND = Path(sys.executable).parent / "millpond"


@dsl.component
def count(path: str) -> str:
    with open(path, "a") as out:  # one line per execution
        out.write("ran\n")
    return "counted"


@dsl.component
def wait_for(path: str, after: str) -> str:
    import os
    import time

    while not os.path.exists(path):
        time.sleep(0.05)
    return after + "+waited"


@dsl.pipeline(name="two-steps")
def two_steps(counter: str, go: str) -> str:
    first = count(path=counter)
    return wait_for(path=go, after=first.output).output


class ServerProcess:
    def __init__(self, home: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "MILLPOND_HOME": str(home)}
        self.log = open(home.parent / f"server-{self.port}.log", "wb")  # noqa: SIM115 - open while the server runs
        self.process = subprocess.Popen([str(MILLPOND), "server", "--port", str(self.port)], env=env,
                                        stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/apis/v2beta1/healthz", timeout=5):
                    break
            except OSError:
                assert self.process.poll() is None, "server exited"
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self.log.close()


def _run_row(home: Path, run_id: str) -> sqlite3.Row:
    with sqlite3.connect(home / "millpond.db") as db:
        db.row_factory = sqlite3.Row
        return db.execute("SELECT state, engine_pid FROM runs WHERE id = ?", (run_id,)).fetchone()


def _tasks(client: Any, run_id: str) -> dict[str, str]:
    details = client.get_run(run_id).run_details
    return {t.display_name: t.state for t in (details.task_details or [])} if details else {}


def _until(what: str, check: Any, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_restart_resumes_a_run_whose_server_and_worker_were_killed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    counter, go = tmp_path / "counter.txt", tmp_path / "go"
    first = ServerProcess(home)
    server_killed = False
    try:
        client = kfp.Client(host=first.url)
        run_id = client.create_run_from_pipeline_func(
            two_steps, arguments={"counter": str(counter), "go": str(go)}, experiment_name="restart",
            enable_caching=False,  # a re-run of `count` would run it, not take it from the cache
        ).run_id
        _until("count to succeed and wait-for to run",
               lambda: _tasks(client, run_id).get("count") == "SUCCEEDED"
               and _tasks(client, run_id).get("wait-for") == "RUNNING")
        engine = _run_row(home, run_id)["engine_pid"]
        assert engine
        first.kill()
        server_killed = True
        os.kill(engine, signal.SIGKILL)  # the worker: its own session, so the server's death left it running
        _until("the worker to die", lambda: not Path(f"/proc/{engine}").exists() or
               Path(f"/proc/{engine}/stat").read_text().split(") ")[-1].startswith("Z"), timeout=10)
        assert _run_row(home, run_id)["state"] == "RUNNING"  # as a killed engine leaves it
    finally:
        if not server_killed:
            first.kill()
    go.touch()
    second = ServerProcess(home)
    try:
        client = kfp.Client(host=second.url)
        run = client.wait_for_run_completion(run_id, timeout=120, sleep_duration=0.2)
        assert run.state == "SUCCEEDED", run.error
        assert counter.read_text() == "ran\n"  # `count` succeeded before the kill and did not run again
        assert _run_row(home, run_id)["engine_pid"] != engine
        assert _tasks(client, run_id)["wait-for"] == "SUCCEEDED"
    finally:
        second.kill()


def test_restart_leaves_a_live_run_to_its_worker(tmp_path: Path) -> None:
    """Only the server dies: its worker goes on, and the next server does not start a second engine."""
    home = tmp_path / "home"
    counter, go = tmp_path / "counter.txt", tmp_path / "go"
    first = ServerProcess(home)
    try:
        client = kfp.Client(host=first.url)
        run_id = client.create_run_from_pipeline_func(
            two_steps, arguments={"counter": str(counter), "go": str(go)}, experiment_name="restart",
            enable_caching=False,
        ).run_id
        _until("wait-for to run", lambda: _tasks(client, run_id).get("wait-for") == "RUNNING")
        engine = _run_row(home, run_id)["engine_pid"]
    finally:
        first.kill()
    second = ServerProcess(home)
    try:
        time.sleep(1.5)  # what the second server would have started by now, it has
        assert _run_row(home, run_id)["engine_pid"] == engine
        go.touch()
        client = kfp.Client(host=second.url)
        run = client.wait_for_run_completion(run_id, timeout=120, sleep_duration=0.2)
        assert run.state == "SUCCEEDED", run.error
        assert counter.read_text() == "ran\n"
        assert _run_row(home, run_id)["engine_pid"] == engine  # the same engine finished it
    finally:
        second.kill()

"""Helpers for the training-job tests: the arena CLI in this process, waiting for a job, processes gone."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from millpond.cli.arena import main as arena_main
from millpond.runners.processes import is_running, start_ticks
from millpond.store.training import JobStore
from tests.conftest import CliResult

FINISHED = ("SUCCEEDED", "FAILED")


def arena(capsys: Any, *args: Any) -> CliResult:
    """``arena ARGS`` in this process: exit code and what it printed."""
    capsys.readouterr()
    try:
        arena_main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return CliResult(code, out, err)


def job_json(capsys: Any, name: str) -> dict[str, Any]:
    result = arena(capsys, "get", name, "-o", "json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def wait_status(capsys: Any, name: str, wanted: tuple[str, ...] = FINISHED, timeout: float = 120) -> dict[str, Any]:
    """Poll ``arena get NAME -o json`` (as seed 000's script does) until the status is one of ``wanted``."""
    deadline = time.monotonic() + timeout
    while True:
        info = job_json(capsys, name)
        if info["status"] in wanted:
            return info
        assert time.monotonic() < deadline, f"{name} still {info['status']} after {timeout}s"
        time.sleep(0.2)


def gone(pid: int | None, ticks: str | None, timeout: float = 20) -> bool:
    """Whether the recorded process stopped running (it may need a moment to be reaped)."""
    deadline = time.monotonic() + timeout
    while is_running(pid, ticks):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def reaped(pid: int | None, timeout: float = 20) -> bool:
    """Whether no process has the pid any more (not even a zombie waiting for its parent)."""
    deadline = time.monotonic() + timeout
    while start_ticks(int(pid or 0)) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def group_empty(pgid: int | None, timeout: float = 20) -> bool:
    """Whether no process is left in the process group ``pgid`` (an instance's leader and all it started)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(int(pgid or 0), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False  # someone else's group: the pid is not ours any more
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def record(name: str, namespace: str = "default"):
    job = JobStore().get(name, namespace)
    assert job is not None
    return job


def instances(name: str):
    return JobStore().instances(record(name).uid)

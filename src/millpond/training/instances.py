"""Starting and stopping one instance: its own process group, in the task sandbox, its output timestamped.

Each instance is started in a new session (so it leads its own process group and a signal to
the group reaches everything it started), inside bubblewrap when the job binds datasets or host
folders (``--die-with-parent``: an instance never outlives its supervisor). Its output goes
through a pipe to a thread of the supervisor that writes each line to the instance's log with
the time it was read.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from millpond.errors import TaskFailure
from millpond.runners.base import Bind
from millpond.runners.environment import inherited_environment
from millpond.runners.processes import start_ticks
from millpond.runners.sandbox import SandboxUnavailable, sandbox_problem, wrap
from millpond.training.launch import Planned

STOP_GRACE_S = 5.0  # SIGTERM, then this long, then SIGKILL (a pod's grace period, shortened)


@dataclass
class Running:
    """A started instance: its process, its recorded identity, the thread copying its output."""

    planned: Planned
    process: subprocess.Popen[bytes]
    ticks: str | None
    pump: threading.Thread


def start(planned: Planned, binds: list[Bind], cwd: Path, log: Path) -> Running:
    """Start ``planned`` in its own session; a sandbox that cannot be made when binds need it is a TaskFailure."""
    argv = list(planned.argv)
    if binds or sandbox_problem() is None:
        try:
            argv = wrap(argv, binds, cwd)
        except SandboxUnavailable as exc:
            raise TaskFailure(f"cannot mount the job's data: {exc}") from None
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**inherited_environment(), **planned.env}
    try:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True, env=env, cwd=cwd if not binds else None,
        )
    except OSError as exc:
        raise TaskFailure(f"cannot start {planned.name}: {exc}") from None
    assert process.stdout is not None
    pump = threading.Thread(target=_copy, args=(process.stdout, log), daemon=True, name=f"log-{planned.name}")
    pump.start()
    return Running(planned, process, start_ticks(process.pid), pump)


def _copy(source: IO[bytes], log: Path) -> None:
    """Every line the instance prints, appended to its log after the time it was read."""
    with open(log, "ab", buffering=0) as out:
        for line in iter(source.readline, b""):
            stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ").encode()
            out.write(stamp + b" " + (line if line.endswith(b"\n") else line + b"\n"))


def end_group(pid: int | None, ticks: str | None) -> bool:
    """SIGKILL an instance's process group, whether its leader is alive, a zombie or already reaped.

    The leader (the instance's first process, bwrap when sandboxed) may be gone while what it
    started lives on: a shell's forked children survive bwrap's ``--die-with-parent``, and a
    leader reaped before anyone looked no longer matches its start time. The group is still
    ours: the kernel gives no process a pid that is the id of a group with members. Only a pid
    now held by another process (a different start time) is left alone. True if a group was signalled.
    """
    if not pid or start_ticks(pid) not in (None, ticks):
        return False
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def stop(running: list[Running]) -> None:
    """SIGTERM each instance's group still running, SIGKILL what is left after ``STOP_GRACE_S``."""
    alive = [item for item in running if item.process.poll() is None]
    for item in alive:
        try:
            os.killpg(item.process.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and any(item.process.poll() is None for item in alive):
        time.sleep(0.1)
    for item in running:
        end_group(item.process.pid, item.ticks)  # also what a finished leader left behind in its group
        try:
            item.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        item.pump.join(timeout=2)

"""The background processes a home keeps, so that ``millpond ps`` can list them and nothing is left unseen.

A data operation's runner, a Cron schedule waiting for its next time, a training job's
supervisor and the API server live beyond the command that started them. Each writes one
record under ``$MILLPOND_HOME/processes`` as it starts: what it is (``kind``, the ``object`` it
serves), its pid and the pid's start time (pids are reused: a record only counts while that
very process runs) and when it started. Nothing removes a record when the process exits (a
runner leaves with ``os._exit``, a killed one runs nothing): whoever reconciles (``millpond
ps``) ends what is left of a dead one's process group, then drops its record.

FUSE mount daemons keep their own records (``datasets.mounts``), with the folder they serve;
``millpond ps`` lists them beside these. Every record names its process by a
``ProcessIdentity`` and asks it whether the process runs.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from millpond.runners.processes import ProcessIdentity, start_ticks
from millpond.settings import load_settings


@dataclass(frozen=True)
class BackgroundProcess:
    """One process a home keeps running: ``kind`` (operation, server), the ``object`` it serves, pid + start."""

    kind: str
    object: str
    pid: int
    ticks: str | None
    started: str  # ISO 8601, UTC
    uid: str = ""  # the served object's uid where it has one: a re-created object is another object

    @property
    def identity(self) -> ProcessIdentity:
        return ProcessIdentity(self.pid, self.ticks)

    @property
    def running(self) -> bool:
        return self.identity.is_running()


def end_all(found: list[BackgroundProcess], grace_s: float) -> None:
    """SIGTERM each process and wait until they ended; SIGKILL (with its group) one still running after
    ``grace_s``: how a family stops the supervisors of an object it deletes."""
    for record in found:
        record.identity.signal()
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(record.running for record in found):
        time.sleep(0.05)
    for record in found:
        if record.running:
            record.identity.kill_group()


def _folder() -> Path:
    return load_settings().home / "processes"


def _file(pid: int, ticks: str | None) -> Path:
    return _folder() / f"{pid}-{ticks or 'x'}.json"


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def register(kind: str, served: str, uid: str = "", process: ProcessIdentity | None = None) -> BackgroundProcess:
    """Record this process (or ``process``, one it spawned) as the home's ``kind`` process for ``served``."""
    who = process or ProcessIdentity.own()
    record = BackgroundProcess(kind, served, who.pid, who.start, now_iso(), uid)
    folder = _folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = _file(who.pid, who.start)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(asdict(record)))
    os.replace(partial, path)  # a reader sees the whole record or none
    return record


def records() -> list[BackgroundProcess]:
    """Every record, its process running or not, oldest first (an unreadable one is removed)."""
    folder = _folder()
    found: list[BackgroundProcess] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            found.append(BackgroundProcess(**json.loads(path.read_text())))
        except (OSError, ValueError, TypeError):
            path.unlink(missing_ok=True)  # written whole or not at all: this is no record of ours
    return sorted(found, key=lambda record: (record.started, record.pid))


def running() -> list[BackgroundProcess]:
    """The recorded processes still running, oldest first."""
    return [record for record in records() if record.running]


def forget(record: BackgroundProcess) -> None:
    _file(record.pid, record.ticks).unlink(missing_ok=True)


def end_leftover_group(record: BackgroundProcess) -> bool:
    """SIGKILL what is left of a dead leader's process group (its children, a script's background jobs).

    Safe because the leader is gone: the kernel reuses no pid while a group of that id has
    members, so a group ``pid`` is still ours; a pid already reused by another process is
    left alone. True if a group was signalled.
    """
    if record.running:
        return False
    if start_ticks(record.pid) not in (None, record.ticks):
        return False  # the pid went to another process: not our group
    # (the same start time here is our leader as a zombie, not yet reaped by its parent)
    try:
        os.killpg(record.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True

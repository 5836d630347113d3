"""Telling whether a recorded process is still the one we started (pids get reused).

Every record of a background process keeps a ``ProcessIdentity`` (pid + start time) and asks it
whether that process lives: the home's background records (``runners.background``: data
operations' runners, Cron schedules, training jobs' supervisors, the server), a data
operation's row (``store.resources.ProcessRecord``), a training job's supervisor and
instances, a mount's daemon and its users' leases, a run's engine, a ledger grant's holder.
Where the pid and the start are stored differs (a file, a row's columns); the check is this one.

A run's engine is recorded as pid and ``TICKS@MACHINE`` (:func:`engine_mark`): with the metadata
in a database several machines share, a pid means something on its own machine only. Another
machine's process is never judged by this machine's ``/proc``: it counts as running (it may
well be), and it is never signalled from here.
"""

from __future__ import annotations

import functools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path


@functools.cache
def machine() -> str:
    """This machine, as long as it stays up: the kernel's boot id, shortened (``unknown`` without /proc)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:12] or "unknown"
    except OSError:
        return "unknown"


def engine_mark(ticks: str | None) -> str | None:
    """What a run's row keeps beside the engine's pid: its start ticks and the machine it runs on."""
    return f"{ticks}@{machine()}" if ticks is not None else None


def elsewhere(ticks: str | None) -> bool:
    """True when ``ticks`` is another machine's mark: its process cannot be seen or signalled from here."""
    return ticks is not None and "@" in ticks and ticks.split("@", 1)[1] != machine()


def _local_ticks(ticks: str | None) -> str | None:
    return ticks.split("@", 1)[0] if ticks is not None else None


def start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its closing one.
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def is_alive(pid: int | None, ticks: str | None) -> bool:
    if elsewhere(ticks):
        return bool(pid)  # another machine's: not this one's to call dead
    if not pid or ticks is None:
        return False
    return start_ticks(int(pid)) == _local_ticks(ticks)


def is_running(pid: int | None, ticks: str | None) -> bool:
    """``is_alive``, and not a zombie: an engine killed but not yet reaped by its parent is not running."""
    if not is_alive(pid, ticks):
        return False
    if elsewhere(ticks):
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _members(field: int, value: int | set[int], running_only: bool) -> list[int]:
    """Processes whose ``/proc/PID/stat`` field (after the command: 1 ppid, 2 pgrp, 3 session) is ``value``
    (or one of them: one pass over /proc for many)."""
    wanted = {str(one) for one in value} if isinstance(value, set) else {str(value)}
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after the command: state ppid pgrp session ...
        if len(fields) > field and fields[field] in wanted and not (running_only and fields[0] in ("Z", "X")):
            members.append(int(entry))
    return members


def session_members(sid: int) -> list[int]:
    """Every process whose session is ``sid`` (from ``/proc``): an instance's whole tree, whatever its groups.

    mpirun puts each rank in a process group of its own, so signalling the launcher's group
    misses them; they all stay in the session the instance was started in.
    """
    return _members(3, sid, running_only=False)


def sessions_members(sids: set[int]) -> list[int]:
    """Every process whose session is one of ``sids``, in one pass over /proc (``session_members`` of many)."""
    return _members(3, sids, running_only=False) if sids else []


def running_group_members(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that still run (zombies, already dead, left out)."""
    return _members(2, pgid, running_only=True)


def signal_process(pid: int | None, ticks: str | None, signum: int = signal.SIGTERM) -> bool:
    """Send ``signum`` to ``pid`` if it is still the recorded, running process; True if it was sent.

    How anyone stops a run's engine, whoever started it (a ``millpond run`` in a terminal, a
    server's worker): the pid and start time in the run's row name it, and a reused pid or a
    zombie is never signalled.
    """
    if pid is None or elsewhere(ticks) or not is_running(pid, ticks):
        return False
    try:
        os.kill(int(pid), signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def kill_group(pid: int | None, ticks: str | None) -> bool:
    """SIGKILL the process group led by ``pid`` if it is still the recorded process; True if it was."""
    if pid is None or elsewhere(ticks) or not is_alive(pid, ticks):
        return False
    try:
        os.killpg(int(pid), signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def own_identity() -> tuple[int, str | None]:
    return os.getpid(), start_ticks(os.getpid())


@dataclass(frozen=True)
class ProcessIdentity:
    """One process, told apart from a later one given the same pid by its start time (clock ticks
    since boot, /proc/PID/stat field 22; None when it could not be read, and then it never counts
    as alive)."""

    pid: int
    start: str | None

    @classmethod
    def own(cls) -> ProcessIdentity:
        return cls(*own_identity())

    @classmethod
    def of(cls, pid: int) -> ProcessIdentity:
        """The process ``pid`` is now (a child just spawned: present while unreaped, even if it exited)."""
        return cls(pid, start_ticks(pid))

    def is_alive(self) -> bool:
        """The same pid with the same start time exists (a zombie too)."""
        return is_alive(self.pid, self.start)

    def is_running(self) -> bool:
        """``is_alive``, and not a zombie: the process still does its work."""
        return is_running(self.pid, self.start)

    def signal(self, signum: int = signal.SIGTERM) -> bool:
        return signal_process(self.pid, self.start, signum)

    def kill_group(self) -> bool:
        return kill_group(self.pid, self.start)

    def stop(self, grace_s: float, poll_s: float = 0.05) -> None:
        """SIGTERM, wait up to ``grace_s`` while it still runs, then SIGKILL its group: how a family stops
        the supervisor of an object it deletes (the supervisor stops its own children on SIGTERM; the
        group kill is for one that hangs). Nothing happens when the process is already gone."""
        if not self.signal():
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and self.is_running():
            time.sleep(poll_s)
        self.kill_group()

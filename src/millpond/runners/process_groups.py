"""Ending a started process's whole tree, and stamping the lines of its log, for long-lived local processes.

A training job's instances and a served model's replicas are each started in a session of their
own (they lead their process group), so a signal to the group, and to every member of the
session, reaches whatever they started. Stopping one is a pod's ending, shortened: SIGTERM, a
grace period, then SIGKILL of what is left of the group and session, even when the leader
itself is already gone. Their output goes to a log one line at a time, each after the time it
was read (``stamp_now``), which ``arena logs --timestamps`` reads back.

A group and a session are not the whole tree: a process may leave both (``setsid sleep 4646 &``,
a daemon's double fork) and is then reparented to init, out of reach of any signal to them and
of bubblewrap's ``--die-with-parent``. So each started process also carries a mark of its own in
its environment (``MARK_VAR``, ``marked``), which every process it starts inherits whatever
session, group or parent it moves to, and its end sweeps /proc for the mark (``end_marked``, the
guardian's sweep): a Kubernetes container's processes all end with it, and these do too.

Why a mark and not ``PR_SET_CHILD_SUBREAPER``: a subreaper receives the orphans but must reap
them with ``waitpid(-1)``, which races ``subprocess``'s own waits (a task's exit status lost), and
cannot tell which of its instances an orphan came from; the mark survives setsid, double forks
and reparenting, finds processes inside the sandbox, and names its owner. What it misses is a
process that replaced its whole environment (``env -i``), which the group and session still catch
while it stays in them.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import Protocol

from millpond.runners.guardian import kill_stamped, stamped
from millpond.runners.processes import sessions_members, start_ticks

MARK_VAR = "MILLPOND_PROCESS_MARK"  # a started process's own mark, inherited by everything it starts


class GroupLeader(Protocol):
    """A started process that leads its group: a ``subprocess.Popen`` of a ``start_new_session`` child."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def stamp_now() -> bytes:
    """The time a log line is written before it (``arena logs --timestamps`` reads it back)."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ").encode()


def marked() -> dict[str, str]:
    """A new mark, as the variable to add to a process's environment (``end_marked`` takes its value)."""
    return {MARK_VAR: secrets.token_hex(12)}


def _needle(mark: str) -> bytes:
    return f"\0{MARK_VAR}={mark}\0".encode()


def signal_marked(marks: Sequence[str | None], signum: int) -> None:
    """``signum`` to every running process that carries one of ``marks`` (one pass over /proc)."""
    for pid in stamped(*(_needle(mark) for mark in marks if mark)):
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def end_marked(*marks: str | None) -> None:
    """SIGKILL every process that carries one of ``marks``, until none is left: what started processes
    left behind in other sessions and groups (nothing for a None or empty mark)."""
    needles = [_needle(mark) for mark in marks if mark]
    if needles:
        kill_stamped(*needles)


class SweepBehind:
    """Ends, in the background, what finished pipeline tasks left running: many marks a pass over /proc.

    A task's end must not wait for its sweep: two passes over /proc with a pause between them
    cost ~20 ms, which a forked task (6 ms in all) would pay inside its slot on every step of a
    chain (a 40-step chain went from 2.9 to 3.6 s). The task's thread hands its mark over and
    goes on; the marks of tasks ending together share one sweep; ``flush`` (the runner's close,
    before a run is recorded ended) sweeps whatever is still pending, and waits for a sweep in
    flight.
    """

    def __init__(self, gather_s: float = 0.05) -> None:
        self._gather_s = gather_s
        self._pending: list[str] = []
        self._lock = threading.Lock()  # guards _pending and _thread
        self._sweeping = threading.Lock()  # one sweep at a time
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, mark: str) -> None:
        """Sweep for ``mark`` soon (within ``gather_s`` and one sweep)."""
        with self._lock:
            self._pending.append(mark)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="millpond-sweep-behind", daemon=True)
                self._thread.start()
        self._wake.set()

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(self._gather_s)
            self._wake.clear()
            self.flush()

    def flush(self) -> None:
        """Sweep every pending mark now (and wait for a sweep already under way)."""
        with self._sweeping:
            with self._lock:
                marks, self._pending = self._pending, []
            end_marked(*marks)


SWEEP_BEHIND = SweepBehind()  # one per process: a server's engines share it


def signal_session(sid: int | set[int], signum: int) -> None:
    """``signum`` to every process of session ``sid`` (or of each of them, in one pass over /proc): what
    ignores its group, mpirun's ranks."""
    for member in sessions_members(sid if isinstance(sid, set) else {sid}):
        try:
            os.kill(member, signum)
        except (ProcessLookupError, PermissionError):
            pass


def end_group(pid: int | None, ticks: str | None) -> bool:
    """SIGKILL a started process's group and session, whether its leader is alive, a zombie or already reaped.

    The leader (the first process, bwrap when sandboxed) may be gone while what it started lives
    on: a shell's forked children survive bwrap's ``--die-with-parent``, mpirun's ranks lead
    groups of their own in the leader's session, and a leader reaped before anyone looked no
    longer matches its start time. The group and session are still ours: the kernel gives no
    process a pid that is the id of a group or session with members. Only a pid now held by
    another process (a different start time) is left alone. True if a group was signalled.
    """
    return bool(end_groups([(pid, ticks)]))


def end_groups(started: Sequence[tuple[int | None, str | None]]) -> list[int]:
    """``end_group`` of each (pid, start ticks), their sessions found in one pass over /proc; the groups signalled."""
    ours = {pid for pid, ticks in started if pid and start_ticks(pid) in (None, ticks)}
    signal_session(ours, signal.SIGKILL)
    ended = []
    for pid in ours:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
        ended.append(pid)
    return ended


def stop_groups(started: Sequence[tuple[GroupLeader, str | None]], grace_s: float,
                marks: Sequence[str | None] = ()) -> None:
    """SIGTERM each (leader, start ticks)'s group and session still running (and what carries ``marks``),
    SIGKILL what is left after ``grace_s``, marked processes included, and reap the leaders."""
    alive = [leader for leader, _ in started if leader.poll() is None]
    for leader in alive:
        try:
            os.killpg(leader.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    signal_session({leader.pid for leader in alive}, signal.SIGTERM)
    signal_marked(marks, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(leader.poll() is None for leader in alive):
        time.sleep(0.05)
    end_groups([(leader.pid, ticks) for leader, ticks in started])  # also what finished leaders left behind
    end_marked(*marks)  # and in other sessions
    for leader, _ in started:
        try:
            leader.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

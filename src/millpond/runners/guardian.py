"""A small process that stops every task an engine started once that engine is gone.

PR_SET_PDEATHSIG and bubblewrap's ``--die-with-parent`` reach only a direct child, and a
task's grandchildren (a shell's background job, a component's subprocess) escape them; an
engine killed with SIGKILL runs no cleanup of its own. So each engine process starts one
guardian (on its first task). The engine tells it every task's process group as the task
starts and ends, and stamps every process it starts with ``MILLPOND_ENGINE_TOKEN``. When the
guardian's pipe from the engine reaches end of file, or its parent changes — the engine
exited, however it exited — it SIGKILLs each group still recorded, then every process whose
environment carries the token (which also finds a child that left its group), and exits.

The guardian sits in a session of its own and ignores SIGINT, SIGTERM and SIGHUP, so a
signal to the engine's process group does not take it down with the engine. It runs as
``python -I -S guardian.py TOKEN`` with the standard library only (~15 ms to start).
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import secrets
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

TOKEN_VAR = "MILLPOND_ENGINE_TOKEN"
_POLL_S = 0.5
_SWEEPS = 50  # passes over /proc until no stamped process is left (one forking while we kill)
PR_SET_PDEATHSIG = 1


@functools.cache
def _prctl() -> Callable[..., int]:
    return ctypes.CDLL(None, use_errno=True).prctl


def die_with_parent() -> Callable[[], None]:
    """A ``preexec_fn`` that has the kernel SIGKILL the child when the thread starting it ends.

    The first line of defence, before the guardian knows the child; it needs no guardian at
    all. (The kernel counts the forking *thread*: the runner's thread waits for the child, so
    it outlives it.) Everything it calls is resolved here, in the parent, before the fork.
    """
    prctl, parent, kill, getppid, getpid = _prctl(), os.getpid(), os.kill, os.getppid, os.getpid
    sigkill = int(signal.SIGKILL)

    def in_child() -> None:
        prctl(PR_SET_PDEATHSIG, sigkill, 0, 0, 0)
        if getppid() != parent:  # the parent died before the line above
            kill(getpid(), sigkill)

    return in_child


class Guardian:
    """The engine's handle on its guardian process (started on first use, restarted if it died)."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(12)
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._groups: set[int] = set()
        self._runtimes: list[str] = []  # the container runtimes' command prefixes it was told (JSON lines)

    def env(self) -> dict[str, str]:
        """The variable every process this engine starts carries, so the guardian can find it."""
        with self._lock:
            self._ensure()
        return {TOKEN_VAR: self.token}

    def add(self, pgid: int) -> None:
        with self._lock:
            self._groups.add(pgid)
            self._send(f"+{pgid}\n")

    def watch_containers(self, runtime_argv: list[str], label: str) -> None:
        """Once the engine has started a container: remove every one labelled ``label`` when the engine goes.

        A container outlives its runtime client when the client is SIGKILLed (conmon keeps it), so the
        guardian asks the runtime itself (``RUNTIME ps -aq --filter label=…`` then ``rm -f``).
        """
        line = json.dumps({"argv": runtime_argv, "label": label})
        with self._lock:
            if line in self._runtimes:
                return
            self._runtimes.append(line)
            self._send(f"c{line}\n")

    def remove(self, pgid: int) -> None:
        with self._lock:
            self._groups.discard(pgid)
            self._send(f"-{pgid}\n")

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", __file__, self.token, str(os.getpid())],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True,  # a signal to the engine's group is not one to its guardian
            )
            assert self._process.stdin is not None
            told = [f"+{pgid}\n" for pgid in self._groups] + [f"c{line}\n" for line in self._runtimes]
            self._process.stdin.write("".join(told).encode())
            self._process.stdin.flush()
        return self._process

    def _send(self, line: str) -> None:
        for _ in range(2):
            process = self._ensure()
            assert process.stdin is not None
            try:
                process.stdin.write(line.encode())
                process.stdin.flush()
                return
            except OSError:  # it was killed: the next _ensure starts another, told the groups so far
                process.wait()


_ours: dict[int, Guardian] = {}  # by the pid that owns it: a forked child starts its own
_ours_lock = threading.Lock()


def guardian() -> Guardian:
    """This process's guardian: one per engine process, however many runs it executes."""
    with _ours_lock:
        pid = os.getpid()
        if pid not in _ours:
            _ours[pid] = Guardian()
        return _ours[pid]


# --- the guardian process -------------------------------------------------------------
def stamped(*needles: bytes) -> list[int]:
    """Pids of the processes whose environment holds one of ``needles`` (``\\0NAME=VALUE\\0``; zombies
    have none): one pass over /proc, however many."""
    found: list[int] = []
    if not needles:
        return found
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                block = b"\0" + environ.read()
            if any(needle in block for needle in needles):
                found.append(int(entry))
        except OSError:
            continue
    return found


def _kill(pid: int, group: bool) -> None:
    try:
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
    except OSError:
        pass


def kill_stamped(*needles: bytes) -> None:
    """SIGKILL every process whose environment holds one of ``needles``, until none is left (one may fork
    meanwhile).

    The one sweep every owner of processes uses: this guardian when its engine ends, and
    ``runners.process_groups.end_marked`` when one training instance or pipeline task ends."""
    quiet = 0
    for _ in range(_SWEEPS):
        found = stamped(*needles)
        quiet = 0 if found else quiet + 1
        if quiet == 2:  # twice nothing: a process caught inside execve (its environ reads empty) is seen again
            return
        for pid in found:
            _kill(pid, group=False)
        time.sleep(0.02)


def stop_everything(groups: set[int], token: str) -> None:
    """SIGKILL the recorded groups, then every process stamped with the token, until none is left."""
    own_group = os.getpgrp()
    for pgid in groups:
        if pgid > 1 and pgid != own_group:
            _kill(pgid, group=True)
    kill_stamped(f"\0{TOKEN_VAR}={token}\0".encode())


def remove_containers(runtimes: list[dict[str, object]]) -> None:
    """Remove the containers each runtime holds with the engine's label (running or not)."""
    for runtime in runtimes:
        words, label = runtime.get("argv"), str(runtime.get("label", ""))
        argv = [str(word) for word in words] if isinstance(words, list) else []
        if not argv or not label:
            continue
        try:
            listed = subprocess.run([*argv, "ps", "-aq", "--filter", f"label={label}"], capture_output=True,
                                    text=True, timeout=60, stdin=subprocess.DEVNULL)
            ids = listed.stdout.split()
            if ids:
                subprocess.run([*argv, "rm", "-f", *ids], capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            continue


def _guard(token: str, engine: int) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    groups: set[int] = set()
    runtimes: list[dict[str, object]] = []
    pending = b""
    while os.getppid() == engine:
        ready, _, _ = select.select([0], [], [], _POLL_S)
        if not ready:
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            if line[:1] == b"+":
                groups.add(int(line[1:]))
            elif line[:1] == b"-":
                groups.discard(int(line[1:]))
            elif line[:1] == b"c":
                runtimes.append(json.loads(line[1:]))
    stop_everything(groups, token)
    remove_containers(runtimes)


if __name__ == "__main__":
    _guard(sys.argv[1], int(sys.argv[2]))

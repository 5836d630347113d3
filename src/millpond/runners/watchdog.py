"""Stops tasks on cancel or deadline, so the threads waiting for them can block in waitpid.

Polling a child's exit (Popen.wait with a timeout) costs up to 50 ms of latency per task;
blocking in waitpid costs none. One watchdog thread per runner looks after every running
task's cancel flag and deadline instead, ten times a second.

Each watched group is also told to this process's guardian, which kills it should the engine
die first; and a group stopped here (cancelled, timed out) is SIGKILLed once its leader has
exited, so a grandchild that ignored SIGTERM does not outlive its task.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass

from millpond.runners.guardian import guardian

_TICK_S = 0.1
KILL_GRACE_S = 5.0


@dataclass
class _Watch:
    cancel: threading.Event
    deadline: float | None
    timeout_s: float | None
    reason: str | None = None
    term_sent_at: float | None = None


class Watchdog:
    def __init__(self) -> None:
        self._watches: dict[int, _Watch] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, pgid: int, cancel: threading.Event, timeout_s: float | None) -> None:
        deadline = time.monotonic() + timeout_s if timeout_s is not None else None
        guardian().add(pgid)
        with self._lock:
            self._watches[pgid] = _Watch(cancel, deadline, timeout_s)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="millpond-watchdog", daemon=True)
                self._thread.start()

    def release(self, pgid: int) -> str | None:
        """Stop watching; returns why the task was stopped (cancelled, timed out) or None."""
        with self._lock:
            watch = self._watches.pop(pgid, None)
        if watch is not None and watch.reason is not None:
            _signal_group(pgid, signal.SIGKILL)  # what is left of a stopped task's group
        guardian().remove(pgid)
        return watch.reason if watch else None

    def _loop(self) -> None:
        while True:
            time.sleep(_TICK_S)
            now = time.monotonic()
            with self._lock:
                items = list(self._watches.items())
            for pgid, watch in items:
                if watch.reason is None:
                    if watch.cancel.is_set():
                        watch.reason = "cancelled"
                    elif watch.deadline is not None and now > watch.deadline:
                        watch.reason = f"timed out after {watch.timeout_s:g}s"
                    if watch.reason:
                        watch.term_sent_at = now
                        _signal_group(pgid, signal.SIGTERM)
                elif watch.term_sent_at is not None and now - watch.term_sent_at > KILL_GRACE_S:
                    _signal_group(pgid, signal.SIGKILL)
                    watch.term_sent_at = None


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def exit_status(returncode: int) -> int:
    """A shell's view of how a process ended: 128 + N when a signal N ended it (as containers report)."""
    return 128 - returncode if returncode < 0 else returncode

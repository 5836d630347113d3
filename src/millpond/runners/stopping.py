"""SIGINT, SIGTERM and SIGHUP as a request to stop, acted on where stopping is safe.

A Python signal handler that raises (the default KeyboardInterrupt) lands between any two
bytecodes of the main thread: inside ``concurrent.futures.wait`` it leaves the waiter's lock
held, so the task threads hang on it and the engine never records its end (seen: runs left
RUNNING after ``timeout -s INT``); inside a SQLite write it can leave a transaction open. So a
process that runs a pipeline installs these handlers: before a run exists they raise
``Stopped`` at once (nothing to clean up); inside ``deferred()`` they only record the request,
and the engine polls it between its steps, stops its tasks and records the run CANCELED.

A second signal while stopping is ignored: the cleanup it would cut short is what keeps tasks
from outliving the run (SIGKILL still ends everything; the guardian then stops the tasks).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """Raised where a stop request is acted on; a KeyboardInterrupt, so Ctrl-C and a signal take one path."""


class StopRequest:
    """Whether (and why) this process was asked to stop; set by a signal handler, so it takes no lock."""

    def __init__(self) -> None:
        self.reason: str | None = None

    def is_set(self) -> bool:
        return self.reason is not None

    def set(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason

    def check(self) -> None:
        """Raise ``Stopped`` when a stop was requested: call it where stopping leaves nothing half-done."""
        if self.reason is not None:
            raise Stopped(self.reason)


class _State:
    request = StopRequest()
    deferring = 0
    installed = False


def current() -> StopRequest:
    """The stop request this process's handlers set (never set when none are installed)."""
    return _State.request


def _handle(signum: int, frame: Any) -> None:
    if signum == signal.SIGHUP and signal.getsignal(signal.SIGTERM) is not _handle:
        # Someone else took SIGTERM over (uvicorn, in ``millpond server``): a hang-up stops that the same way.
        os.kill(os.getpid(), signal.SIGTERM)
        return
    if _State.request.is_set():
        return  # already stopping: let the cleanup finish
    _State.request.set(f"cancelled by {signal.Signals(signum).name}")
    if _State.deferring == 0:
        raise Stopped(_State.request.reason)


@contextmanager
def handled() -> Iterator[StopRequest]:
    """Install the handlers for the block (a fresh request); a no-op off the main thread or when already installed."""
    if _State.installed or threading.current_thread() is not threading.main_thread():
        yield _State.request
        return
    previous = {sig: signal.signal(sig, _handle) for sig in STOP_SIGNALS}
    _State.request, _State.installed = StopRequest(), True
    try:
        yield _State.request
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _State.installed = False


@contextmanager
def deferred() -> Iterator[StopRequest]:
    """Inside, a stop signal is only recorded: the code polls the request it yields (``check()``).

    Only the main thread's code is interrupted by a handler, so only there does deferring mean
    anything; elsewhere this just yields the request.
    """
    on_main = threading.current_thread() is threading.main_thread()
    _State.deferring += on_main
    try:
        yield _State.request
    finally:
        _State.deferring -= on_main


class StopFlag:
    """SIGTERM, SIGINT or SIGHUP as a flag a wait loop polls (``event.wait(poll)``), for a pipeline step that
    waits on something it started (a training job, a served model): a handler that raised could cut a store
    write in half. ``signal`` is the first signal's name ("" until one came)."""

    def __init__(self) -> None:
        self.signal = ""
        self.event = threading.Event()

    def __call__(self, signum: int, _frame: Any) -> None:
        self.signal = self.signal or signal.Signals(signum).name
        self.event.set()

    @contextmanager
    def installed(self) -> Iterator[None]:
        """The handlers for the block (only the main thread can install them), the previous ones after."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {signum: signal.signal(signum, self) for signum in STOP_SIGNALS}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

"""An operation's process lives only as long as what it works for: its object and its home.

Fluid deletes a dataset's operations with it (they are owned by the dataset) and Kubernetes then
ends their pods; removing a millpond home removes every object in it. A background operation
process must notice both, or it sleeps on (a ``policy: Cron`` one for ever) holding deleted
database files open, and may write into a cache that was just removed. It notices by looking:

- the home folder and its SQLite database are still the same files (inode), never reopened once
  gone, so a removed home is not recreated by the process that should have ended with it;
- the object still exists with the uid and the applied spec it started with (a re-applied
  operation is a new process's, a deleted and re-created one another object).

:meth:`Lifeline.sleep_until` is how a scheduled operation sleeps: in steps of at most
``WAKE_S``, looking each time. While it works (:meth:`Lifeline.working`) a watcher thread looks
every ``WAKE_S`` and ends the process group (the scripts it started included) at once, and
the process holds a shared lock on its lock file: whoever deletes the object waits for that
lock (:func:`wait_until_idle`) to know the work has stopped before removing what it used.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

from sqlalchemy.exc import SQLAlchemyError

from millpond.datasets.operations.processor import remove_running
from millpond.runners.processes import running_group_members
from millpond.settings import Settings, load_settings
from millpond.store.resources import Resource, ResourceStore

WAKE_S = 1.0  # the longest a sleeping or working operation goes without looking
POLL_S = 0.05  # how often a waiting deleter tries the lock
GROUP_GONE_S = 5.0  # the longest an ending operation waits for its SIGKILLed scripts to be gone
UNREACHABLE_S = 600.0  # a database server silent this long is taken as gone (a restart takes less)
_NO_SUCH_DATABASE = "3D000"  # PostgreSQL's SQLSTATE for a database that does not exist (dropped)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def lock_path(settings: Settings, kind: str, name: str, namespace: str) -> Path:
    """The file an operation's working process holds a shared lock on (beside its log)."""
    return settings.home / "operations" / f"{namespace}_{kind}_{name}.lock"


class Lifeline:
    """What an operation's process must still find to go on: its home and its object, unchanged."""

    def __init__(self, resource: Resource, settings: Settings | None = None) -> None:
        self.settings = settings or load_settings()
        self.resource = resource
        self._home = _identity(self.settings.home)
        url = self.settings.database_url
        self._database = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None
        self._database_id = _identity(self._database) if self._database else None
        self._store = ResourceStore(self.settings)
        self._unreadable_since: float | None = None

    def broken(self) -> str | None:
        """Why the operation must stop now (its home or its object is gone), or None."""
        if self._home is None or _identity(self.settings.home) != self._home:
            return f"its home {self.settings.home} was removed"
        if self._database is not None and _identity(self._database) != self._database_id:
            return f"its database {self._database} was removed"
        try:
            found = self._store.get(self.resource.kind, self.resource.name, self.resource.namespace)
        except SQLAlchemyError as exc:
            return self._unreadable(exc)
        self._unreadable_since = None
        if found is None or found.uid != self.resource.uid:
            return "it was deleted"
        if found.updated_at != self.resource.updated_at:
            return "it was applied again (the new spec runs in a new process)"
        return None

    def _unreadable(self, exc: SQLAlchemyError) -> str | None:
        """Why an unreadable database ends the operation: dropped (PostgreSQL's home), or silent too long.

        A moment's failure (a file being removed, a server restarting) is not a reason: the next
        look decides. A dropped database is what removing the home is for SQLite.
        """
        orig = getattr(exc, "orig", None)
        # a statement gets the SQLSTATE; a new connection's refusal only says so in words
        if getattr(orig, "sqlstate", None) == _NO_SUCH_DATABASE or (
            orig is not None and "database" in str(orig) and "does not exist" in str(orig)
        ):
            return "its database was removed"
        now = time.monotonic()
        if self._unreadable_since is None:
            self._unreadable_since = now
        elif now - self._unreadable_since > UNREACHABLE_S:
            return f"its database did not answer for {UNREACHABLE_S:.0f}s"
        return None

    def sleep_until(self, moment: float) -> str | None:
        """Sleep until ``moment`` (a ``time.time()``), looking every ``WAKE_S``: why it broke, or None."""
        while True:
            reason = self.broken()
            left = moment - time.time()
            if reason is not None or left <= 0:
                return reason
            time.sleep(min(WAKE_S, left))

    @contextlib.contextmanager
    def working(self) -> Iterator[None]:
        """Hold the operation's lock and watch: a broken lifeline ends this process group at once."""
        path = lock_path(self.settings, self.resource.kind, self.resource.name, self.resource.namespace)
        try:
            path.parent.mkdir(exist_ok=True)  # not parents: a removed home is not made again
            lock = open(path, "a")
        except OSError as exc:
            _end(self.resource, self.broken() or f"cannot open its lock file: {exc}")
        with lock:
            fcntl.flock(lock, fcntl.LOCK_SH)
            reason = self.broken()  # deleted before the lock was taken: the deleter did not wait for us
            if reason is not None:
                _end(self.resource, reason)
            done = threading.Event()
            watcher = threading.Thread(target=self._watch, args=(done,), name="lifeline", daemon=True)
            watcher.start()
            try:
                yield
            finally:
                done.set()
                watcher.join()

    def _watch(self, done: threading.Event) -> None:
        while not done.wait(WAKE_S):
            reason = self.broken()
            if reason is not None and not done.is_set():
                _end(self.resource, reason)


def _end(resource: Resource, reason: str) -> NoReturn:
    """Say why in the operation's log, then end what this process started (its group), then itself.

    The rest of the group is killed and seen gone *before* this process exits, as its exit frees
    the operation's lock: a deleter that gets the lock then knows nothing of the work still runs
    (a SIGKILL to the whole group at once let the lock go while a script was still dying).
    """
    print(f"{resource.kind} {resource.name}: stopped: {reason}", file=sys.stderr, flush=True)
    remove_running()  # a DataProcess's containers: killing their runtime's client would leave them running
    if os.getpgid(0) == os.getpid():  # the group leader ``start`` made: its children are ours
        _kill_the_rest_of_the_group(os.getpid())
    os._exit(1)


def _kill_the_rest_of_the_group(pgid: int) -> None:
    deadline = time.monotonic() + GROUP_GONE_S
    while time.monotonic() < deadline:
        others = [pid for pid in running_group_members(pgid) if pid != os.getpid()]
        if not others:
            return
        for pid in others:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def wait_until_idle(settings: Settings, kind: str, name: str, namespace: str, timeout: float) -> bool:
    """Wait until no process works on the operation (its lock is free); False after ``timeout`` s.

    Call it after deleting the object: a working process notices within ``WAKE_S`` and ends.
    """
    path = lock_path(settings, kind, name, namespace)
    try:
        lock = open(path, "rb")
    except OSError:
        return True  # no lock file (never worked here), or its home is gone
    deadline = time.monotonic() + timeout
    with lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(POLL_S)
                continue
            fcntl.flock(lock, fcntl.LOCK_UN)
            return True

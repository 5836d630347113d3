"""The supervisor of one stored object (a Notebook, an Experiment): found, started, and alone per uid.

Such a supervisor is a ``python -m MODULE NAMESPACE NAME UID`` process started detached and recorded among
the home's background processes as the ``kind`` process serving ``NAMESPACE/NAME`` with the object's uid
(``millpond ps`` lists it). ``start`` starts one unless one runs for the uid; the supervisor itself takes
``exclusive`` on a lock file of its object's folder, so of two started at once (an apply and the server's
reconcile) one leaves at once.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from millpond.runners.background import BackgroundProcess, running
from millpond.runners.detached import spawn_detached
from millpond.runners.environment import detached_environment

LOCK_POLL_S = 0.1


def supervisors(kind: str, namespace: str, name: str, uid: str | None = None) -> list[BackgroundProcess]:
    """The live ``kind`` supervisors of object ``namespace/name`` (of its ``uid`` only, when given)."""
    served = f"{namespace}/{name}"
    return [record for record in running() if record.kind == kind and record.object == served
            and (uid is None or record.uid == uid)]


def start(module: str, kind: str, namespace: str, name: str, uid: str, log: Path) -> bool:
    """Start ``python -m module NAMESPACE NAME UID`` detached unless a ``kind`` supervisor runs for ``uid``;
    True if one was started (OSError: it could not be; the caller says so in the object's status)."""
    if supervisors(kind, namespace, name, uid):
        return False
    spawn_detached(module, [namespace, name, uid], log=log, env=detached_environment(), kind=kind,
                   served=f"{namespace}/{name}", uid=uid)
    return True


@contextmanager
def exclusive(lock_file: Path, wait_s: float = 0.0) -> Iterator[bool]:
    """Hold an exclusive lock on ``lock_file`` while the block runs: True when taken, False when another
    process held it for ``wait_s`` seconds (a supervisor that is leaving releases it soon)."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "w") as lock:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(LOCK_POLL_S)
        yield True

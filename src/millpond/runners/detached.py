"""One way to start a process that outlives whoever started it: a supervisor, an operation's runner.

An InferenceService's supervisor (``serving.lifecycle.start``), a training job's supervisor
(``training.jobs.submit``) and a data operation's process (``datasets.operations.liveness``) are
all started the same way: ``python -m MODULE ARGS`` in a session of its own (a signal to the
caller's group, or the caller's end, does not reach it), its output appended to its own log file,
reaped by a daemon thread when it ends (a long-lived caller, the server, keeps no zombie), and
named by its pid and start ticks so that a later reader can tell it alive (``ProcessIdentity``).
Where the caller keeps that identity differs (the home's background records, a job's row, an
operation's row); the start is this one function.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from millpond.runners.background import register
from millpond.runners.processes import ProcessIdentity


def spawn_detached(module: str, args: Sequence[str], *, log: Path, env: Mapping[str, str],
                   kind: str = "", served: str = "", uid: str = "") -> ProcessIdentity:
    """Start ``python -m module *args`` detached, its output appended to ``log``; the process it is.

    With ``kind``, the process is recorded among the home's background processes (``millpond ps``
    lists it) as the ``kind`` process serving ``served`` (with the served object's ``uid``). The
    identity is read before the child can be reaped, so a child that exits at once is still named
    (its start is None only when /proc cannot be read). OSError when no process could be made
    (the log's folder cannot be written, too many processes, no memory): the caller says so in
    its object's status.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True, close_fds=True,
            env=dict(env),
        )
    identity = ProcessIdentity.of(child.pid)  # before the reaper runs: present while unreaped, even if it exited
    threading.Thread(target=child.wait, daemon=True, name=f"reap-{child.pid}").start()
    if kind and identity.start is not None:
        register(kind, served, uid, identity)
    return identity

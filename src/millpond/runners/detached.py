"""One way to start a process that outlives whoever started it: a supervisor, an operation's runner.

An InferenceService's supervisor (``serving.lifecycle.start``), a training job's supervisor
(``training.jobs.submit``) and a data operation's process (``datasets.operations.liveness``) are
all started the same way: ``python -m MODULE ARGS`` in a session of its own (a signal to the
caller's group, or the caller's end, does not reach it), its output appended to its own log file,
reaped when it ends (a long-lived caller, the server, keeps no zombie), and named by its pid and
start ticks so that a later reader can tell it alive (``ProcessIdentity``). Where the caller keeps
that identity differs (the home's background records, a job's row, an operation's row); the start
is this one function.

It is forked from the home's zygote when one answers (``runners.zygote``: a few ms instead of an
interpreter's start and imports), which then reaps it; otherwise, and with ``warm=False``, it is a new
interpreter this process reaps, and a zygote is started for the next one.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from millpond.runners import warm_spawn
from millpond.runners.background import register
from millpond.runners.processes import ProcessIdentity
from millpond.settings import load_settings


def spawn_detached(module: str, args: Sequence[str], *, log: Path, env: Mapping[str, str],
                   kind: str = "", served: str = "", uid: str = "", warm: bool = True) -> ProcessIdentity:
    """Start ``python -m module *args`` detached, its output appended to ``log``; the process it is.

    With ``kind``, the process is recorded among the home's background processes (``millpond ps``
    lists it) as the ``kind`` process serving ``served`` (with the served object's ``uid``). The
    identity is read before the child can be reaped, so a child that exits at once is still named
    (its start is None only when /proc cannot be read). OSError when no process could be made
    (the log's folder cannot be written, too many processes, no memory): the caller says so in
    its object's status. ``warm=False``: always a new interpreter, never the zygote.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    identity: ProcessIdentity | None = None
    if warm and warm_spawn.enabled():
        paths = warm_spawn.ZygotePaths.of(load_settings().home)
        outcome = warm_spawn.spawn_warm(paths, module, args, log=log, env=env)
        if isinstance(outcome, ProcessIdentity):
            identity = outcome
        elif outcome is warm_spawn.WarmMiss.STALE or (outcome is warm_spawn.WarmMiss.ABSENT
                                                      and not warm_spawn.zygote_alive(paths)):
            _start_zygote(paths, env)
    if identity is None:
        identity = _spawn_cold(module, args, log=log, env=env)
    if kind and identity.start is not None:
        register(kind, served, uid, identity)
    return identity


def _spawn_cold(module: str, args: Sequence[str], *, log: Path, env: Mapping[str, str]) -> ProcessIdentity:
    """``python -m module *args``, a child of this process, reaped by a daemon thread."""
    with open(log, "ab") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True, close_fds=True,
            env=dict(env),
        )
    identity = ProcessIdentity.of(child.pid)  # before the reaper runs: present while unreaped, even if it exited
    threading.Thread(target=child.wait, daemon=True, name=f"reap-{child.pid}").start()
    return identity


def _start_zygote(paths: warm_spawn.ZygotePaths, env: Mapping[str, str]) -> None:
    """Start the home's zygote for the next detached start (it exits at once if another holds the lock)."""
    try:
        paths.log.parent.mkdir(parents=True, exist_ok=True)
        identity = _spawn_cold(warm_spawn.MODULE, [paths.socket, str(paths.lock)], log=paths.log, env=env)
    except OSError:
        return  # no zygote: every start stays cold, as before
    if identity.start is not None:
        register(warm_spawn.PROCESS_KIND, str(paths.lock.parent.parent), "", identity)

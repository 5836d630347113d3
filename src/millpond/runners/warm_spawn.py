"""Asking the home's zygote (``runners.zygote``) to start a detached module: ~5 ms instead of a new interpreter.

``spawn_detached`` calls ``spawn_warm`` first; anything but a started process (no zygote yet,
one that runs older code, one whose inherited context differs from the caller's, warm spawning
not turned on with ``MILLPOND_WARM_SPAWN=1``) is a ``WarmMiss`` and the caller starts the module
as it always did (``python -m``). The miss says whether a fresh zygote is wanted.

What a forked child would inherit from the zygote rather than from the caller must be the same
as what ``python -m`` inherits from the caller, or the zygote is not used: its code (a
fingerprint of millpond's files, the interpreter, the ``PYTHON*`` variables) and its process
context (user, groups, resource limits, cgroup, niceness). The environment, working folder and
umask are the caller's, sent with each request.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import resource
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from millpond.runners.fork_protocol import encode_message, read_message
from millpond.runners.processes import ProcessIdentity

logger = logging.getLogger(__name__)

WARM_VAR = "MILLPOND_WARM_SPAWN"  # "1": detached modules start from the zygote; unset or "0": python -m (the default)
PROCESS_KIND = "zygote"  # among the home's background processes (millpond ps)
MODULE = "millpond.runners.zygote"
REPLY_TIMEOUT_S = 10.0
MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes, the last a NUL
_LIMITS = ("RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_MEMLOCK",
           "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_STACK")


class WarmMiss(Enum):
    """Why a module was not started warm; the caller starts it with ``python -m``."""

    OFF = "warm spawning is off (MILLPOND_WARM_SPAWN is not 1)"
    ABSENT = "no zygote answers: start one"
    STALE = "the zygote runs other code: it exits, start a fresh one"
    REFUSED = "the zygote's context differs from the caller's, or it failed to fork"


@dataclass(frozen=True)
class ZygotePaths:
    """Where a home's zygote listens, the lock it holds while it lives, and its log."""

    socket: str
    lock: Path
    log: Path

    @classmethod
    def of(cls, home: Path) -> ZygotePaths:
        run = home / "run"
        path = str(run / "zygote.sock")
        if len(os.fsencode(path)) > MAX_SOCKET_PATH:  # a deep home: a short name that is still the home's own
            digest = hashlib.sha256(os.fsencode(home.resolve())).hexdigest()[:16]
            path = f"/tmp/millpond-zygote-{os.getuid()}-{digest}.sock"
        return cls(path, run / "zygote.lock", home / "logs" / "zygote.log")


def enabled() -> bool:
    return os.environ.get(WARM_VAR, "0") == "1"


def fingerprint(env: Mapping[str, str]) -> str:
    """The code a process started with ``env`` would run: interpreter, millpond's files (path, mtime, size),
    the ``PYTHON*`` variables. A zygote whose fingerprint differs must not fork it."""
    import millpond  # noqa: PLC0415 - the package's own folder

    digest = hashlib.sha256(f"{sys.executable}\0{sys.version}\0".encode())
    for name in sorted(env):
        if name.startswith("PYTHON"):
            digest.update(f"{name}={env[name]}\0".encode())
    root = os.path.dirname(os.path.abspath(millpond.__file__))
    for folder, folders, files in os.walk(root):
        folders.sort()
        for name in sorted(files):
            if name.endswith((".py", ".pth", ".so")):
                path = os.path.join(folder, name)
                try:
                    stat = os.stat(path)
                except OSError:
                    continue
                digest.update(f"{path}\0{stat.st_mtime_ns}\0{stat.st_size}\0".encode())
    return digest.hexdigest()


def process_context() -> dict[str, Any]:
    """What a child inherits from the process that forks it besides env, folder and umask."""
    try:
        cgroup = Path("/proc/self/cgroup").read_text()
    except OSError:
        cgroup = ""
    limits = {name: list(resource.getrlimit(getattr(resource, name))) for name in _LIMITS if hasattr(resource, name)}
    return {"uid": os.getuid(), "gid": os.getgid(), "groups": sorted(os.getgroups()), "limits": limits,
            "cgroup": cgroup, "nice": os.getpriority(os.PRIO_PROCESS, 0)}


def current_umask() -> int:
    """This process's umask, read without changing it (``os.umask`` would, for every thread)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def zygote_alive(paths: ZygotePaths) -> bool:
    """Whether a zygote holds the home's lock (running, or starting and importing)."""
    paths.lock.parent.mkdir(parents=True, exist_ok=True)
    with open(paths.lock, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(lock, fcntl.LOCK_UN)
        return False


def spawn_warm(paths: ZygotePaths, module: str, args: Sequence[str], *, log: Path,
               env: Mapping[str, str]) -> ProcessIdentity | WarmMiss:
    """The process the zygote forked to run ``module`` as ``python -m`` would, or why it did not."""
    if not enabled():
        return WarmMiss.OFF
    request = {"module": module, "args": list(args), "log": str(log), "env": dict(env), "cwd": os.getcwd(),
               "umask": current_umask(), "fingerprint": fingerprint(env), "context": process_context()}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(REPLY_TIMEOUT_S)
            conn.connect(paths.socket)
            conn.sendall(encode_message(request))
            reply = read_message(conn)
    except (OSError, ValueError) as exc:
        logger.debug("no warm start of %s: %s", module, exc)
        return WarmMiss.ABSENT
    if reply is None:
        return WarmMiss.ABSENT
    if reply.get("stale"):
        logger.debug("the zygote runs other code; starting %s cold", module)
        return WarmMiss.STALE
    if "pid" not in reply:
        logger.debug("the zygote refused %s: %s", module, json.dumps(reply))
        return WarmMiss.REFUSED
    return ProcessIdentity(int(reply["pid"]), reply.get("ticks"))

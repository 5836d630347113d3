"""A home's warm parent for detached supervisors: millpond's supervisor modules imported once, forked per start.

A supervisor started as ``python -m`` pays 0.3–0.8 s of interpreter start and imports on a busy
machine; forked from this process it starts in a few ms. ``spawn_detached`` starts one zygote
per home on first use (``runners.warm_spawn``), recorded among the home's background processes.

Unlike the pipeline tasks' fork server (``runners.forkserver``, whose line protocol this shares),
what it forks must outlive it and whoever asked: no parent-death signal, a session of its own,
stdin /dev/null, output appended to its log, the caller's environment exactly, folder and umask,
and then ``runpy.run_module(module, run_name="__main__")`` with ``sys.argv`` as ``python -m`` sets
it. It is single-threaded, ever (forking a threaded process is unsafe: it refuses to serve if a
preload started a thread), and reaps its children; one that outlives it is reaped by init.

It serves only its own user with its own code and context: a request whose fingerprint (millpond's
files, interpreter) differs is answered ``stale`` and the zygote exits, so old code never runs; one
whose context (groups, resource limits, cgroup, niceness) differs is refused and started cold.
It exits after ``IDLE_S`` without a request, on SIGTERM, and when its socket is taken from it.
"""

from __future__ import annotations

import atexit
import fcntl
import gc
import importlib
import json
import logging
import os
import random
import runpy
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

from millpond.runners.fork_protocol import drain, end_child, read_message, send_message, serve_selector
from millpond.runners.processes import start_ticks
from millpond.runners.warm_spawn import fingerprint, process_context
from millpond.store.db import prepare_orm

IDLE_S = 600.0
LOCK_WAIT_S = 10.0  # a stale zygote being replaced lets its lock go within this
PRELOADS = (  # every module spawn_detached starts (grep spawn_detached), and what they import
    "millpond.training.batch.controller", "millpond.training.jobset.controller", "millpond.training.supervisor",
    "millpond.serving.supervisor", "millpond.serving.seldon.supervisor", "millpond.kuberay.supervisor",
    "millpond.katib.supervisor", "millpond.notebooks.supervisor", "millpond.datasets.operations",
)


# --- the forked child -------------------------------------------------------------------
def _close_other_fds() -> None:
    """Keep 0, 1 and 2 only, as ``close_fds=True`` does."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own descriptor, already gone


def _become(request: dict[str, Any]) -> None:
    """Turn this fork into what ``python -m`` would have started for the caller."""
    os.setsid()
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as a new interpreter sets them
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    os.umask(request["umask"])
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    _close_other_fds()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = request["cwd"]  # python -m puts the working folder first
    random.seed()  # the zygote's seed is not the child's
    sys.argv = [request["module"], *request["args"]]  # run_module puts the module's file first, as -m


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None or isinstance(exc.code, int):
        return exc.code or 0
    print(exc.code, file=sys.stderr)
    return 1


def _child(request: dict[str, Any]) -> NoReturn:
    """Run the module as ``__main__`` and leave as the interpreter would: threads joined, atexit run."""
    end_child(lambda: _run_module(request))


def _run_module(request: dict[str, Any]) -> int:
    """``python -m``'s run of the module in this fork, its exit code."""
    _become(request)
    code = 1
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException:  # noqa: BLE001 - an uncaught error: printed, exit 1, as python does
        sys.excepthook(*sys.exc_info())
    threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads, as at interpreter exit
    atexit._run_exitfuncs()
    return code


# --- the zygote -------------------------------------------------------------------------
def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def _preload() -> None:
    for module in PRELOADS:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - a module that fails to import is imported (and fails) in its child
            logging.getLogger(__name__).debug("cannot preload %s", module, exc_info=True)
    try:
        prepare_orm()
    except Exception:  # noqa: BLE001 - then each child configures them itself, as a cold start does
        logging.getLogger(__name__).debug("cannot prepare the ORM", exc_info=True)


def _take_lock(path: Path) -> int | None:
    """The home's zygote lock, held for this process's life; None when another zygote keeps it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.05)


class _Zygote:
    """The accept-and-fork loop over one listening socket."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.fingerprint = fingerprint(os.environ)  # before importing: an edit during the preload makes it stale
        self.context = process_context()
        self.children: set[int] = set()

    def answer(self, conn: socket.socket) -> bool:
        """Serve one request; False when this zygote must exit (it runs other code than the caller)."""
        request = read_message(conn)
        if request is None:
            return True
        if _peer_uid(conn) != os.getuid():
            send_message(conn, {"refused": "another user"})
            return True
        if request.get("fingerprint") != self.fingerprint:
            send_message(conn, {"stale": True})
            return False
        if request.get("context") != self.context:
            send_message(conn, {"refused": "another process context"})
            return True
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as exc:
            send_message(conn, {"refused": f"fork: {exc}"})
            return True
        if pid == 0:
            _child(request)
        self.children.add(pid)
        send_message(conn, {"pid": pid, "ticks": start_ticks(pid)})  # before any reaping: a zombie still counts
        return True

    def reap(self) -> None:
        while self.children:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            except InterruptedError:
                continue
            if pid == 0:
                return
            self.children.discard(pid)

    def own_socket(self, inode: int) -> bool:
        try:
            return os.stat(self.socket_path).st_ino == inode
        except OSError:
            return False

    def serve(self, idle_s: float) -> None:
        if self.socket_path.startswith("/"):
            Path(self.socket_path).unlink(missing_ok=True)  # a dead zygote's; we hold the lock
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            listener.bind(self.socket_path)  # 0600: this user's only
        finally:
            os.umask(old_umask)
        inode = os.stat(self.socket_path).st_ino
        listener.listen(128)
        selector, wake_read, wake_write = serve_selector(listener)
        print(json.dumps({"ready": True, "pid": os.getpid(), "socket": self.socket_path}), flush=True)
        last = time.monotonic()
        try:
            while time.monotonic() - last < idle_s and self.own_socket(inode):
                for key, _ in selector.select(timeout=5.0):
                    if key.data == "child":
                        drain(wake_read)
                        continue
                    conn, _ = listener.accept()
                    last = time.monotonic()
                    with conn:
                        conn.settimeout(5.0)
                        try:
                            keep = self.answer(conn)
                        except (OSError, ValueError):
                            keep = True  # one bad client is no reason to stop
                    if not keep:
                        return
                self.reap()
        finally:
            if self.own_socket(inode):
                os.unlink(self.socket_path)
            listener.close()
            self.reap()


def main(argv: list[str]) -> int:
    socket_path, lock_path = argv[0], Path(argv[1])
    idle_s = float(argv[2]) if len(argv) > 2 else IDLE_S
    if _take_lock(lock_path) is None:
        return 0  # another zygote serves this home
    zygote = _Zygote(socket_path)
    _preload()
    if threading.active_count() != 1:
        print(f"a preload started threads ({threading.enumerate()}): not serving", file=sys.stderr, flush=True)
        return 1
    gc.freeze()  # what the zygote holds is never scanned in a child: fewer copy-on-write faults
    zygote.serve(idle_s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""A warm process that lightweight Python tasks fork from, with kfp already imported.

Starting an interpreter and importing kfp costs ~150 ms per task; forking a process that
has done both costs ~2 ms. Each task still gets its own process — its own session (so it
and its children can be signalled as a group), environment, working directory, umask and
log file, and its own mount namespace when its outputs are staged or its remote artifacts
mirrored (a private root, as bubblewrap makes, when a mount point such as ``/s3`` is new) — and
runs kfp's executor exactly as ``python3 -m kfp.dsl.executor_main`` would.

The server is single-threaded (forking from a threaded process is unsafe): it accepts one
connection per task on a Unix socket, forks, answers with the child's pid, and later with
its exit status. It exits, killing what it started, when its parent (the engine) is gone;
each task also has the kernel SIGKILL it should the server die first (PR_SET_PDEATHSIG).
A Ctrl-C or hang-up to the terminal's process group is the engine's to handle (it cancels the
run and stops the tasks itself): the server ignores SIGINT and SIGHUP, and its tasks do not.
"""

from __future__ import annotations

import ctypes
import errno
import gc
import hashlib
import json
import logging
import os
import signal
import socket
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any, NoReturn

from millpond.deferred_import import defer_package_init
from millpond.runners.fork_protocol import drain, end_child, read_message, send_message, serve_selector

PR_SET_PDEATHSIG = 1
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
ROOT_FOLDER = "root"  # beside the socket: the (empty) mount point of each task's private root
PROGRAMS_FOLDER = "programs"  # beside the socket: one folder per distinct component source (``_program_file``)
MODULE_FILE = "ephemeral_component.py"  # the name kfp's own command gives the module it writes


# --- inside a task's child process ------------------------------------------------------
def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _private_mounts() -> None:
    """Enter a mount namespace of our own (a user namespace too when we are not root)."""
    libc = _libc()
    if libc.unshare(CLONE_NEWNS) != 0:
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "unshare: " + os.strerror(ctypes.get_errno()))
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "mount --make-rprivate /: " + os.strerror(ctypes.get_errno()))


def _bind(source: str, target: str, read_only: bool) -> None:
    libc = _libc()
    if libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None) != 0:
        raise OSError(ctypes.get_errno(), f"bind {source} at {target}: {os.strerror(ctypes.get_errno())}")
    if read_only and libc.mount(b"none", target.encode(), None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_REC, None) != 0:
        raise OSError(ctypes.get_errno(), f"read-only {target}: {os.strerror(ctypes.get_errno())}")


def _mount_tmpfs(target: str) -> None:
    if _libc().mount(b"tmpfs", target.encode(), b"tmpfs", 0, b"mode=0755") != 0:
        raise OSError(ctypes.get_errno(), f"tmpfs at {target}: {os.strerror(ctypes.get_errno())}")


def _show_host_entry(entry: str, root: str) -> None:
    """Show the host's ``/entry`` at ``root/entry``, as bubblewrap's new root does (runners.sandbox)."""
    host, here = "/" + entry, os.path.join(root, entry)
    if os.path.islink(host):
        os.symlink(os.readlink(host), here)
    elif os.path.isdir(host):
        os.mkdir(here)
        _bind(host, here, read_only=False)
    elif os.path.isfile(host):  # top-level files stay read-only; sockets and such are left out
        open(here, "w").close()
        _bind(host, here, read_only=True)


def _enter_new_root(root: str, new_top: set[str]) -> None:
    """Make a tmpfs at ``root`` the task's ``/``: every host top-level entry shown there, plus empty
    folders for ``new_top`` (``s3``), so those mount points never touch the host; then chroot into it.

    ``root`` lies under a host folder that is itself shown (``/tmp``): the copy of the new root
    that the recursive bind carries along is detached, so the task does not see itself nested.
    """
    _mount_tmpfs(root)
    for entry in sorted(os.listdir("/")):
        _show_host_entry(entry, root)
    for entry in sorted(new_top):
        os.makedirs(os.path.join(root, entry), exist_ok=True)
    _libc().umount2((root + root).encode(), MNT_DETACH)  # the nested copy; none when root is not under a bind
    os.chroot(root)
    os.chdir("/")


def _apply_binds(binds: list[list[Any]], root_dir: str) -> None:
    """Private mounts for the task: its binds in place, through a private root when one lands on a new
    top-level folder (the pool sends only binds whose targets exist, are top-level, or lie in another's)."""
    _private_mounts()
    new_top = {Path(t).parts[1] for _, t, _ in binds if len(Path(t).parts) == 2 and not os.path.lexists(t)}
    if new_top:
        _enter_new_root(root_dir, new_top)
    for source, target, read_only in sorted(binds, key=lambda b: len(Path(b[1]).parts)):
        if not os.path.lexists(target):  # inside another bind's source, which is the task's own folder
            os.makedirs(target)
        _bind(source, target, read_only)


def _run_task(request: dict[str, Any]) -> int:
    """The forked child: become the task, run kfp's executor, return its exit status."""
    os.setsid()
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    _libc().prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != request["server_pid"]:  # the server died before the line above
        os._exit(1)
    log = os.open(request["log_path"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(null)
    if request["binds"]:
        _apply_binds(request["binds"], request["root_dir"])
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ["_KFP_RUNTIME"] = "true"
    sys.argv = ["executor_main", "--component_module_path", request["module"], *request["args"]]
    from kfp.dsl import executor_main  # noqa: PLC0415 - kfp's executor, loaded in the fork server only

    try:
        executor_main.executor_main()
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # the component raised: Python would print it and exit 1
        traceback.print_exc()
        return 1
    return 0


def _child(request: dict[str, Any]) -> NoReturn:
    end_child(lambda: _run_task(request))


# --- the server -----------------------------------------------------------------------
def _program_file(programs: str, source: str, written: dict[str, str]) -> str:
    """The module file of a component's ``source``: written once per distinct source, in a folder of its own.

    kfp's command writes the source into a fresh ``mktemp -d`` folder for each task; the folder holds
    only that module, which kfp's executor imports from it. Here every task of the same component
    shares one such folder, written by the (single-threaded) server before it forks: no task pays for
    making and removing a folder (~2.5 ms on this machine's disk), and the second task on imports the
    module's cached bytecode instead of compiling it again.
    """
    if source not in written:
        folder = os.path.join(programs, hashlib.sha256(source.encode()).hexdigest()[:32])
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, MODULE_FILE)
        with open(path, "w", encoding="utf-8") as module:
            module.write(source)
        written[source] = path
    return written[source]


_WARM_UP_COMPONENT = (
    "from kfp.dsl import *\nfrom typing import *\n\ndef warm_up(x: int, s: str) -> str:\n    return s * x\n"
)


def _warm_up() -> None:
    """Run one trivial component here, so each task's fork inherits a warm executor (~4 ms saved).

    The first executor run in a process pays for lazy work (argparse, typing, regexes,
    logging); doing it once before forking means no task pays it again.
    """
    from kfp.dsl import executor_main  # noqa: PLC0415 - kfp's executor, loaded in the fork server only

    with tempfile.TemporaryDirectory(prefix="millpond-warm-") as folder:
        module = Path(folder) / "warm_up.py"
        module.write_text(_WARM_UP_COMPONENT)
        executor_input = {
            "inputs": {"parameterValues": {"x": 2, "s": "a"}},
            "outputs": {
                "parameters": {"Output": {"outputFile": f"{folder}/Output"}},
                "outputFile": f"{folder}/executor_output.json",
            },
        }
        sys.argv = ["executor_main", "--component_module_path", str(module), "--executor_input",
                    json.dumps(executor_input), "--function_to_execute", "warm_up"]
        saved = sys.stdout
        try:
            with open(os.devnull, "w") as sink:
                sys.stdout = sink
                executor_main.executor_main()
        finally:
            sys.stdout = saved
            logging.root.handlers.clear()  # each task's executor sets up logging to its own log
            sys.modules.pop("warm_up", None)


def _probe_mounts() -> bool:
    """Whether a child can make a mount namespace here (root, or unprivileged user namespaces)."""
    pid = os.fork()
    if pid == 0:
        try:
            _private_mounts()
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def serve(socket_path: str) -> None:
    defer_package_init("kfp")  # the executor needs kfp.dsl, not the SDK's client: 185 ms and 23 MB, not 0.8 s
    _warm_up()
    gc.freeze()  # what the server holds is never collected in a task: no copy-on-write faults from GC scans

    parent = os.getppid()
    root_dir = os.path.join(os.path.dirname(socket_path), ROOT_FOLDER)
    os.makedirs(root_dir, exist_ok=True)
    programs = os.path.join(os.path.dirname(socket_path), PROGRAMS_FOLDER)
    written: dict[str, str] = {}
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(128)
    selector, wake_read, wake_write = serve_selector(listener)
    waiting: dict[int, socket.socket] = {}
    print(json.dumps({"ready": True, "mounts": _probe_mounts()}), flush=True)
    try:
        while os.getppid() == parent:
            for key, _ in selector.select(timeout=1.0):
                if key.data == "accept":
                    conn, _ = listener.accept()
                    request = read_message(conn)
                    if request is None:
                        conn.close()
                        continue
                    request["server_pid"] = os.getpid()
                    request["root_dir"] = root_dir
                    request["module"] = _program_file(programs, request.pop("source"), written)
                    pid = os.fork()
                    if pid == 0:
                        signal.set_wakeup_fd(-1)
                        listener.close()
                        conn.close()
                        os.close(wake_read)
                        os.close(wake_write)
                        _child(request)
                    waiting[pid] = conn
                    send_message(conn, {"pid": pid})
                else:
                    drain(wake_read)
            _reap(waiting)
    finally:
        for pid in list(waiting):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        _reap(waiting)


def _reap(waiting: dict[int, socket.socket]) -> None:
    while waiting:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        except OSError as exc:
            if exc.errno == errno.EINTR:
                continue
            raise
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is not None:
            send_message(conn, {"exit": os.waitstatus_to_exitcode(status)})
            conn.close()


if __name__ == "__main__":
    serve(sys.argv[1])

"""FUSE mounts as background processes: started by ``dataset mount``, found and stopped by ``unmount``.

Each mount is a ``python -m millpond.datasets.fuse_mount`` process in its own session (it
outlives the command that started it) with a record under ``$MILLPOND_HOME/mounts`` naming
the dataset, the folder, the pid and its start time, and whether millpond made it for its
own users (``shared``: ``shared_mounts`` ends it when the last one leaves) or the user asked
for it (it stays until ``unmount``). ``mount`` returns only once the kernel shows the folder
mounted, or fails with the process's own error line.

A daemon killed with ``kill -9`` leaves its folder in the mount table, answering every access
with "Transport endpoint is not connected". Nothing says so until a command touches it: then
(``clear_dead``: ``dataset mounts``, ``mount``, ``unmount``, every ``dataset`` command on the
dataset, ``millpond ps``) the mount is reported dead, unmounted lazily (``fusermount3 -uz``: a
process may still hold a file open there) and its record dropped, so the folder can be mounted again.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from millpond.datasets import mount_users
from millpond.datasets.config import load_config, mounts_home
from millpond.errors import UserError
from millpond.runners.background import now_iso
from millpond.runners.processes import ProcessIdentity

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class MountRecord:
    """A mount this home started."""

    dataset: str
    namespace: str
    folder: str
    pid: int
    log: str
    ticks: str | None = None  # the pid's start time (a record from before it was kept has none)
    started: str = ""
    shared: bool = False  # made by millpond for its DataProcess steps and tasks, not by ``dataset mount``

    @property
    def key(self) -> str:
        return key_of(self.folder)


def _records_dir() -> Path:
    return mounts_home() / "mounts"


def key_of(folder: str) -> str:
    """The name of a mounted folder's record (and of its users' folder): a hash of its absolute path."""
    return hashlib.sha256(folder.encode()).hexdigest()[:16]


def _record_path(folder: str) -> Path:
    return _records_dir() / (key_of(folder) + ".json")


def record_of(folder: str) -> MountRecord | None:
    """The record of the mount at ``folder`` (an absolute path), or None."""
    try:
        return MountRecord(**json.loads(_record_path(folder).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def forget(folder: str) -> None:
    _record_path(folder).unlink(missing_ok=True)


def is_mounted(folder: str) -> bool:
    """True when the kernel lists ``folder`` as a mount point (``/proc/self/mountinfo``)."""
    target = os.path.realpath(folder)
    try:
        with open("/proc/self/mountinfo") as info:
            for line in info:
                fields = line.split()
                if len(fields) > 4 and fields[4].replace("\\040", " ") == target:
                    return True
    except OSError:
        return os.path.ismount(target)
    return False


def fuse_available() -> str | None:
    """None when FUSE mounts can work here, else why not (one line)."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist (no FUSE in this kernel or container)"
    if shutil.which("fusermount3") is None and shutil.which("fusermount") is None:
        return "fusermount3 is not installed (Debian: apt-get install fuse3)"
    try:
        import mfusepy  # noqa: F401, PLC0415
    except (ImportError, OSError) as exc:
        return f"the FUSE library cannot be loaded ({exc}); Debian: apt-get install fuse3"
    return None


def mount(dataset: str, folder: Path, namespace: str = "default", shared: bool = False) -> MountRecord:
    """Mount ``dataset`` at ``folder`` in a background process; returns once the mount is ready.

    ``shared``: the mount is for millpond's own users (``shared_mounts``): its daemon also watches
    whether any is left, and unmounts itself when none is.
    """
    load_config(dataset, namespace)  # a dataset that does not exist is a user error, before any process starts
    reason = fuse_available()
    if reason:
        raise UserError(f"cannot mount {dataset}: {reason}")
    target = str(folder.expanduser().resolve())
    clear_dead(target)  # ours, its daemon killed: unmounted, so it can be mounted again
    if is_mounted(target) and _disconnected(target):
        lazy_detach(target)  # a FUSE mount whose daemon is gone, that no record of this home names
    if not os.path.isdir(target):
        raise UserError(f"mount point {target} is not a folder")
    if is_mounted(target):
        raise UserError(f"{target} is already a mount point (millpond dataset unmount {target})")
    records = _records_dir()
    records.mkdir(parents=True, exist_ok=True)
    log_path = records / (key_of(target) + ".log")
    module = "millpond.datasets.shared_mounts" if shared else "millpond.datasets.fuse_mount"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", module, dataset, target, namespace],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True,
        )
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not is_mounted(target):
        if process.poll() is not None:
            raise UserError(f"mount of {dataset} at {target} failed: {_last_error(log_path)}")
        if time.monotonic() > deadline:
            process.kill()
            raise UserError(
                f"mount of {dataset} at {target} was not ready within {READY_TIMEOUT_S:.0f}s (log: {log_path})"
            )
        time.sleep(0.05)
    _raise_read_ahead(target)
    record = MountRecord(
        dataset, namespace, target, process.pid, str(log_path), ProcessIdentity.of(process.pid).start, now_iso(), shared
    )
    partial = records / f".{key_of(target)}.tmp"
    partial.write_text(json.dumps(record.__dict__))
    os.replace(partial, _record_path(target))  # a reader sees the whole record or none
    return record


def _raise_read_ahead(target: str, kilobytes: int = 4096) -> None:
    """Let the kernel read ahead further on this mount (its 128 KiB default starves a sequential reader).

    Needs root (sysfs); elsewhere the default stays, which only costs speed.
    """
    with open("/proc/self/mountinfo") as info:
        for line in info:
            fields = line.split()
            if len(fields) > 4 and fields[4] == target:
                try:
                    Path(f"/sys/class/bdi/{fields[2]}/read_ahead_kb").write_text(str(kilobytes))
                except OSError:
                    pass
                return


def _last_error(log_path: Path) -> str:
    try:
        lines = [line for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    errors = [line for line in lines if line.startswith("error:")]
    return (errors or lines or ["(no output)"])[-1].removeprefix("error: ")


def records() -> list[MountRecord]:
    """Every mount this home started (and has not seen unmounted), by folder hash."""
    found = []
    for path in sorted(_records_dir().glob("*.json")) if _records_dir().is_dir() else []:
        try:
            found.append(MountRecord(**json.loads(path.read_text())))
        except (OSError, ValueError, TypeError):
            continue
    return found


def unmount(folder: Path) -> MountRecord | None:
    """Unmount ``folder`` and wait for its process to end; UserError if nothing is mounted there."""
    target = str(folder.expanduser().resolve())
    record = record_of(target)
    if record is not None and clear_dead(target) is not None:
        return record  # its daemon was dead: unmounted lazily, nothing left to wait for
    if not is_mounted(target):
        forget(target)
        if record is None:
            raise UserError(f"{target} is not mounted")
        return record
    detach(target)
    if record is not None:
        _wait_gone(record)
    forget(target)
    return record


def detach(target: str) -> None:
    """Unmount ``target`` (``fusermount3 -u``); its daemon's loop then ends. UserError if it is busy."""
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    command = [tool, "-u", target] if tool else ["umount", target]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        message = (result.stderr or result.stdout).strip().splitlines()
        raise UserError(f"cannot unmount {target}: {message[-1] if message else 'busy'} (is a process still using it?)")


def lazy_detach(target: str) -> None:
    """Unmount ``target`` lazily (``fusermount3 -uz``): at once for new users, for good once the last
    file a process still holds open there is closed. What a dead mount needs: nobody answers in it."""
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    subprocess.run([tool, "-u", "-z", target] if tool else ["umount", "-l", target], capture_output=True)


def _disconnected(target: str) -> bool:
    """Whether ``target`` is a mount whose FUSE daemon is gone: "Transport endpoint is not connected"."""
    try:
        with os.scandir(target) as entries:
            next(entries, None)
    except OSError as exc:
        return exc.errno == errno.ENOTCONN
    return False


@dataclass(frozen=True)
class DeadMount:
    """A mount of this home found dead (its daemon gone) and cleared: its record, and what was done."""

    record: MountRecord
    was_mounted: bool  # still in the mount table (now lazily unmounted), or already unmounted

    @property
    def words(self) -> str:
        pid = f"pid {self.record.pid}"
        if self.was_mounted:
            return f"dead ({pid} is gone): unmounted (fusermount3 -uz)"
        return f"gone ({pid} ended)"


def clear_dead(target: str) -> DeadMount | None:
    """If the recorded mount at ``target`` has lost its daemon (killed, crashed), unmount it lazily and
    drop its record; what was cleared, or None when nothing there is dead.

    A daemon that still runs is left alone, even when its folder is no longer mounted: it is ending,
    and drops its own record.
    """
    record = record_of(target)
    if record is None or daemon_runs(record):
        return None
    mounted = is_mounted(target)
    if mounted:
        lazy_detach(target)
    forget(target)  # a shared mount's live users keep their leases: the next ``use`` mounts it afresh for them
    return DeadMount(record, mounted)


def clear_all_dead(dataset: str | None = None, namespace: str = "default") -> list[DeadMount]:
    """``clear_dead`` for every mount of this home (or of one dataset): those found dead."""
    found = []
    for record in records():
        if dataset is None or (record.dataset, record.namespace) == (dataset, namespace):
            dead = clear_dead(record.folder)
            if dead is not None:
                found.append(dead)
    return found


def _wait_gone(record: MountRecord) -> None:
    """Wait for the mount's daemon to end (SIGKILL past ``STOP_TIMEOUT_S``); a zombie counts as ended."""
    pid = record.pid
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return  # our own child: reaped
        except ChildProcessError:
            pass
        if not daemon_runs(record):
            return
        time.sleep(0.05)
    if daemon_runs(record):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def daemon_runs(record: MountRecord) -> bool:
    """Whether the record's daemon still runs: the same pid and start time (if recorded), not a zombie."""
    daemon = ProcessIdentity(record.pid, record.ticks) if record.ticks else ProcessIdentity.of(record.pid)
    return daemon.is_running()


def unmount_dataset(dataset: str, namespace: str = "default") -> None:
    """Unmount every mount of a dataset (lazily if busy): it is being deleted."""
    for record in records():
        if record.dataset == dataset and record.namespace == namespace:
            try:
                unmount(Path(record.folder))
            except UserError:
                subprocess.run(["umount", "-l", record.folder], capture_output=True)
                forget(record.folder)
            mount_users.forget(record.key)  # its users' leases go with it

"""FUSE mounts as background processes: started by ``dataset mount``, found and stopped by ``unmount``.

Each mount is a ``python -m millpond.datasets.fuse_mount`` process in its own session (it
outlives the command that started it) with a record under ``$MILLPOND_HOME/mounts`` naming
the dataset, the folder and the pid. ``mount`` returns only once the kernel shows the folder
mounted, or fails with the process's own error line.
"""

from __future__ import annotations

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

from millpond.errors import UserError
from millpond.settings import load_settings

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


def _records_dir() -> Path:
    return load_settings().home / "mounts"


def _record_path(folder: str) -> Path:
    return _records_dir() / (hashlib.sha256(folder.encode()).hexdigest()[:16] + ".json")


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
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"the FUSE library cannot be loaded ({exc}); Debian: apt-get install fuse3"
    return None


def mount(dataset: str, folder: Path, namespace: str = "default") -> MountRecord:
    """Mount ``dataset`` at ``folder`` in a background process; returns once the mount is ready."""
    from millpond.datasets.config import load_config

    load_config(dataset, namespace)  # a dataset that does not exist is a user error, before any process starts
    reason = fuse_available()
    if reason:
        raise UserError(f"cannot mount {dataset}: {reason}")
    target = str(folder.expanduser().resolve())
    if not os.path.isdir(target):
        raise UserError(f"mount point {target} is not a folder")
    if is_mounted(target):
        raise UserError(f"{target} is already a mount point (millpond dataset unmount {target})")
    records = _records_dir()
    records.mkdir(parents=True, exist_ok=True)
    log_path = records / (hashlib.sha256(target.encode()).hexdigest()[:16] + ".log")
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "millpond.datasets.fuse_mount", dataset, target, namespace],
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
    record = MountRecord(dataset, namespace, target, process.pid, str(log_path))
    _record_path(target).write_text(json.dumps(record.__dict__))
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
    record_path = _record_path(target)
    record = None
    if record_path.exists():
        try:
            record = MountRecord(**json.loads(record_path.read_text()))
        except (OSError, ValueError, TypeError):
            record = None
    if not is_mounted(target):
        record_path.unlink(missing_ok=True)
        if record is None:
            raise UserError(f"{target} is not mounted")
        return record
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    command = [tool or "umount", "-u", target] if tool else ["umount", target]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        message = (result.stderr or result.stdout).strip().splitlines()
        raise UserError(f"cannot unmount {target}: {message[-1] if message else 'busy'} (is a process still using it?)")
    if record is not None:
        _wait_gone(record.pid)
    record_path.unlink(missing_ok=True)
    return record


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            pass
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def unmount_dataset(dataset: str, namespace: str = "default") -> None:
    """Unmount every mount of a dataset (lazily if busy): it is being deleted."""
    for record in records():
        if record.dataset == dataset and record.namespace == namespace:
            try:
                unmount(Path(record.folder))
            except UserError:
                subprocess.run(["umount", "-l", record.folder], capture_output=True)
                _record_path(record.folder).unlink(missing_ok=True)


def ensure_mounted(dataset: str, namespace: str = "default") -> Path:
    """The dataset's shared mount under ``$MILLPOND_HOME/mnt``, mounted now if it is not already.

    DataProcess steps and pipeline tasks that mount a dataset bind this folder into their own
    mount namespace; the mount stays up for the next one (``dataset unmount`` stops it).
    """
    folder = load_settings().home / "mnt" / namespace / dataset
    with _mount_lock(folder):
        if not is_mounted(str(folder)):
            folder.mkdir(parents=True, exist_ok=True)
            mount(dataset, folder, namespace)
    return folder


def _mount_lock(folder: Path):  # type: ignore[no-untyped-def]
    """One process mounts a shared folder; the others wait and find it mounted."""
    from filelock import FileLock

    folder.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder.parent / f".{folder.name}.lock"))

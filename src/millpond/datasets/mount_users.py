"""Who uses a shared dataset mount: one lease per user, so the last one to leave can end it.

A DataProcess and a pipeline task see their dataset through the shared mount under
``$MILLPOND_HOME/mnt/NAMESPACE/NAME`` (``shared_mounts``). Each use is a lease: a file under
``$MILLPOND_HOME/mounts/users/KEY/`` naming the user (``DataProcess default/clean``, ``task
run-1-train``) and the process that holds it, by pid and the pid's start time. A lease whose
process is gone — a runner killed with ``kill -9`` never releases — holds nothing: ``live``
drops it, so a dead user cannot keep a mount forever.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from millpond.datasets.config import mounts_home
from millpond.runners.background import now_iso
from millpond.runners.processes import ProcessIdentity


@dataclass(frozen=True)
class Lease:
    """One user of a shared mount, held by the process ``pid`` (started at ``ticks``) since ``since``."""

    key: str  # the mount's key (its record's file name without the suffix)
    id: str
    user: str
    pid: int
    ticks: str | None
    since: str

    @property
    def alive(self) -> bool:
        return ProcessIdentity(self.pid, self.ticks).is_running()


def _folder(key: str) -> Path:
    return mounts_home() / "mounts" / "users" / key


def take(key: str, user: str) -> Lease:
    """Record that ``user``, in this process, uses the mount ``key`` from now on."""
    me = ProcessIdentity.own()
    lease = Lease(key, uuid.uuid4().hex[:12], user, me.pid, me.start, now_iso())
    folder = _folder(key)
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{lease.id}.tmp"
    partial.write_text(json.dumps(asdict(lease)))
    os.replace(partial, folder / f"{lease.id}.json")
    return lease


def give_back(lease: Lease) -> None:
    (_folder(lease.key) / f"{lease.id}.json").unlink(missing_ok=True)


def live(key: str) -> list[Lease]:
    """The mount's leases whose process still runs, oldest first; the others are removed."""
    folder = _folder(key)
    found: list[Lease] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            lease = Lease(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            path.unlink(missing_ok=True)
            continue
        if lease.alive:
            found.append(lease)
        else:
            path.unlink(missing_ok=True)  # its holder died without releasing it
    return sorted(found, key=lambda lease: (lease.since, lease.id))


def forget(key: str) -> None:
    """Remove what is left of a mount's leases once the mount has ended."""
    folder = _folder(key)
    for path in folder.glob("*") if folder.is_dir() else []:
        path.unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:
        pass

"""The dataset mounts millpond makes for its own users, ended when the last user leaves.

A DataProcess step and a pipeline task that mounts a dataset's PVC see the dataset through
one shared FUSE mount per dataset, ``$MILLPOND_HOME/mnt/NAMESPACE/NAME``, bound into their
private mount namespace. ``use`` mounts it if it is not mounted yet and takes a lease
(``mount_users``) naming the user; ``release`` gives the lease back and, when no live lease is
left, unmounts the folder, so its daemon ends with its last user.

A user killed with ``kill -9`` never releases: its lease dies with its process, and the mount
ends at the next reconcile — within ``WATCH_S`` in the mount's own daemon, which looks for live
users while it serves (``python -m millpond.datasets.shared_mounts``), and at ``millpond ps``
(``reconcile``). A mount the user made with ``millpond dataset mount`` is theirs: it has no
leases to count and stays until ``dataset unmount``, even at this folder.

One file lock per folder orders it all: a mount being started, a lease taken or given back
and the decision to unmount never interleave, so no user is left with a folder unmounted under it.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from filelock import FileLock, Timeout

from millpond.datasets import mount_users
from millpond.datasets.config import mounts_home
from millpond.datasets.mount_users import Lease
from millpond.datasets.mounts import (
    STOP_TIMEOUT_S,
    MountRecord,
    clear_dead,
    daemon_runs,
    detach,
    forget,
    is_mounted,
    key_of,
    mount,
    record_of,
    records,
    unmount,
)
from millpond.datasets.references import resolve
from millpond.errors import UserError
from millpond.runners.reconcile import Applied, applied
from millpond.settings import load_settings

WATCH_S = 2.0  # how often a shared mount's daemon looks for a live user
RECONCILE_LOCK_S = 5.0  # a reconcile skips a mount whose lock is held longer (it is being used or ended)


@dataclass(frozen=True)
class SharedMount:
    """A dataset's shared folder, and this user's lease on it (give it back with ``release``)."""

    folder: Path
    lease: Lease


def folder_of(dataset: str, namespace: str = "default") -> Path:
    return mounts_home() / "mnt" / namespace / dataset


def _lock(folder: Path) -> FileLock:
    """One lock per shared folder (a file beside it): mounting, leases and unmounting take turns."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder.parent / f".{folder.name}.lock"))


def use(dataset: str, namespace: str, user: str) -> SharedMount:
    """The dataset's shared folder, mounted now if it is not already, with a lease for ``user`` on it.

    ``user`` says who uses it, as ``millpond ps`` shows it (``DataProcess default/clean``). A
    dataset that does not exist, or that cannot be mounted, is a UserError. A reference (``dataset://``) shares
    the mount of the dataset it names, as Fluid's references share its cache.
    """
    dataset, namespace = resolve(dataset, namespace, load_settings())
    folder = folder_of(dataset, namespace)
    with _lock(folder):
        clear_dead(str(folder))  # its daemon killed: still in the mount table, answering every read with an error
        if not is_mounted(str(folder)):
            folder.mkdir(parents=True, exist_ok=True)
            mount(dataset, folder, namespace, shared=True)
        lease = mount_users.take(key_of(str(folder)), user)
    return SharedMount(folder, lease)


def release(shared: SharedMount) -> bool:
    """Give the lease back; unmount the folder if no other live user holds it. True if it was unmounted."""
    with _lock(shared.folder):
        mount_users.give_back(shared.lease)
        return _end_if_unused(shared.folder)


@contextmanager
def using(dataset: str, namespace: str, user: str) -> Iterator[Path]:
    """``use`` for the length of a ``with`` block: the folder, released however the block ends."""
    shared = use(dataset, namespace, user)
    try:
        yield shared.folder
    finally:
        release(shared)


def _end_if_unused(folder: Path) -> bool:
    """Under the folder's lock: unmount a shared mount no live user holds; True if it ended.

    A mount the user made (not ``shared``) or that nobody recorded is left alone, and so is one
    still busy (someone outside millpond has a file open in it): the next reconcile tries again.
    """
    target = str(folder)
    record = record_of(target)
    if record is None or not record.shared or mount_users.live(record.key):
        return False
    if not is_mounted(target):
        if not daemon_runs(record):
            forget(target)  # else its daemon is ending, and drops the record itself
    else:
        try:
            unmount(folder)
        except UserError:
            return False
    mount_users.forget(record.key)
    return True


class MountTransition(Enum):
    """What the shared-mounts reconciler does."""

    END_UNUSED = "a shared mount no live user holds (its users ended or were killed): unmounted, its leases forgotten"


@dataclass(frozen=True)
class SharedMountsSnapshot:
    """The home's shared mounts, as recorded (whether a user holds one is decided under its lock, in ``step``)."""

    mounts: tuple[MountRecord, ...]


class SharedMountsReconciler:
    """Every shared mount of this home has a live user, or is ended.

    1. END_UNUSED: no live lease on it (under the folder's lock, so no user takes one meanwhile) →
       unmounted, its leases forgotten. A mount whose lock is held past ``RECONCILE_LOCK_S`` (being
       used or ended) and one still busy are left for the next pass.
    """

    name = "shared-mounts"

    def observe(self) -> SharedMountsSnapshot:
        return SharedMountsSnapshot(tuple(record for record in records() if record.shared))

    def step(self, snapshot: SharedMountsSnapshot) -> list[Applied]:
        done = []
        for record in snapshot.mounts:
            folder = Path(record.folder)
            try:
                with _lock(folder).acquire(timeout=RECONCILE_LOCK_S):
                    if _end_if_unused(folder):
                        done.append(applied(self.name, MountTransition.END_UNUSED, record.folder,
                                            f"dataset {record.namespace}/{record.dataset}"))
            except Timeout:
                continue
        return done


def reconcile() -> list[MountRecord]:
    """End every shared mount of this home whose users have all gone (killed ones included); those ended."""
    reconciler = SharedMountsReconciler()
    snapshot = reconciler.observe()
    ended = {done.subject for done in reconciler.step(snapshot)}
    return [record for record in snapshot.mounts if record.folder in ended]


def users(record: MountRecord) -> list[Lease]:
    """Who uses a mount now (its live leases)."""
    return mount_users.live(record.key)


# ------------------------------------------------------------------------------- the daemon


def _watch(folder: Path, stop: threading.Event) -> None:
    """In the mount's daemon: every ``WATCH_S``, unmount the folder if no live user is left.

    The daemon cannot wait for itself to end, so it only detaches the mount: the FUSE loop in
    the main thread then returns and the process exits. If that loop goes on serving — the
    leftover of a killed user, a script's background job, still has the dataset open in its
    own mount namespace — the daemon exits anyway after ``STOP_TIMEOUT_S``: nobody it was
    mounted for is left. A lock held by someone else (a user taking or giving back a lease, a
    reconcile) means: look again next time.
    """
    target = str(folder)
    while not stop.wait(WATCH_S):
        lock = _lock(folder)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            continue
        try:
            record = record_of(target)
            if record is None or not record.shared or mount_users.live(record.key):
                continue
            try:
                detach(target)
            except UserError:
                continue  # busy: an outside reader has a file open there; look again later
            mount_users.forget(record.key)
        finally:
            lock.release()
        if not stop.wait(STOP_TIMEOUT_S):
            _forget_self(target)
            os._exit(0)
        return


def _forget_self(target: str) -> None:
    """Drop the mount's record if it is still this daemon's (a newer mount at the folder keeps its own)."""
    record = record_of(target)
    if record is not None and record.pid == os.getpid():
        forget(target)


def main(argv: list[str] | None = None) -> int:
    """``python -m millpond.datasets.shared_mounts NAME DIR [NAMESPACE]``: a FUSE mount that ends itself when unused."""
    from millpond.datasets import fuse_mount  # noqa: PLC0415 - the cache engine and libfuse: only the daemon needs them

    args = argv if argv is not None else sys.argv[1:]
    stop = threading.Event()
    threading.Thread(target=_watch, args=(Path(args[1]), stop), daemon=True, name="mount-users").start()
    try:
        return fuse_mount.main(args)
    finally:
        stop.set()
        _forget_self(args[1])


if __name__ == "__main__":
    raise SystemExit(main())

"""A process's datasets mounted on the cluster node that runs it (cluster mode's ``Mounter``).

Locally a task that mounts a dataset's PVC, or a training job's ``--data``, sees the engine's
shared FUSE mount (``shared_mounts``). A Ray node cannot use a folder of the engine's machine,
so the ProcessSpec names the datasets instead (``DatasetBind``) and the node mounts them with
this function before it starts the process: the same shared mounts, leases and sandbox binds as
locally, only on the node — ``MILLPOND_NODE_DIR`` and ``MILLPOND_RAY_NODE_ID`` are set, so the
mount's folder, record and leases live under the node's folder (``config.mounts_home``) and its
daemon reads through the node's own cache.

The lease is the Ray worker's (the process that calls this): released when the task ends, and
dead with the worker when Ray kills it, after which the mount's daemon unmounts itself within
``shared_mounts.WATCH_S`` (plus the daemon's stop timeout) — no mount outlives its task on the node.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from millpond.datasets.shared_mounts import SharedMount, release, use
from millpond.errors import UserError
from millpond.runners.base import Bind, DatasetBind
from millpond.store.paths import UnsafePath, contained_path


def mount_all(datasets: list[DatasetBind], user: str) -> tuple[list[Bind], Callable[[], None]]:
    """Mount each dataset here (shared with other users of it on this machine); the binds that show
    them at their targets, and how to give every lease back. A dataset that cannot be mounted is a
    UserError, with the leases taken so far already given back."""
    held: list[SharedMount] = []

    def release_all() -> None:
        while held:
            release(held.pop())

    binds = []
    try:
        for data in datasets:
            try:
                shared = use(data.name, data.namespace, user)
            except UserError as exc:
                raise UserError(f"dataset {data.name} at {data.target}: {exc}") from None
            held.append(shared)
            binds.append(Bind(_inside(shared.folder, data), data.target, read_only=data.read_only))
    except BaseException:
        release_all()
        raise
    return binds, release_all


def _inside(folder: Path, data: DatasetBind) -> Path:
    """The dataset's folder, or its ``sub_path`` within it (a name that never leads out of it)."""
    if not data.sub_path.strip("/"):
        return folder
    try:
        return contained_path(folder, data.sub_path.strip("/"), what="subPath")
    except UnsafePath as exc:
        raise UserError(f"dataset {data.name} at {data.target}: {exc}") from None

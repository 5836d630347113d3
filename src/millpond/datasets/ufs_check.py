"""Whether a dataset's mounts answer now: one LIST request per mount, bounded in time, cached.

A Dataset's status must say ``Failed`` when its bucket is missing, its keys are refused or its
endpoint does not answer — also after it was listed once (the bucket deleted since, the dataset
re-applied over another one) — and ``Bound`` again as soon as that is fixed. Listing the whole
UFS on every ``get`` would be slow, and an endpoint that never answers would hang it, so
``check`` asks for the first page of each mount's listing in a thread it waits on for at most
``TIMEOUT_S``, and keeps the answer in the dataset's index for ``CHECK_TTL_S``: other ``get``\\ s
(other processes too: the server, the UI) read it from there. A full sync that succeeds is a
check too (``DatasetCache.sync`` writes the same keys).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from millpond.datasets.cache.index import CacheIndex
from millpond.datasets.config import DatasetConfig
from millpond.datasets.ufs import UfsError, open_ufs
from millpond.errors import UserError

CHECK_TTL_S = 10.0  # how long one answer stands for every reader of the status
TIMEOUT_S = 3.0  # the longest a status read waits for a UFS


def check(config: DatasetConfig, index: CacheIndex, volumes_dir: Path) -> str | None:
    """What the last check found wrong (None: every mount answered), asking the UFS again when
    that answer is older than CHECK_TTL_S or was about other mounts."""
    now = time.time()
    checked = index.meta("checked_at")
    if (checked and index.meta("checked_fingerprint") == config.fingerprint()
            and 0 <= now - float(checked) < CHECK_TTL_S):
        return index.meta("check_error") or None
    error = probe(config, volumes_dir)
    index.set_meta({"checked_at": repr(now), "checked_fingerprint": config.fingerprint(), "check_error": error or ""})
    return error


def probe(config: DatasetConfig, volumes_dir: Path, timeout: float = TIMEOUT_S) -> str | None:
    """The first page of each mount's listing, or why it could not be had within ``timeout``.

    The request runs in a daemon thread: one that outlives the wait ends with the backend's own
    timeouts, and nobody waits for it."""
    answer: list[str | None] = []

    def run() -> None:
        try:
            for mount in config.mounts:
                next(iter(open_ufs(mount.uri, mount.options, volumes_dir, config.namespace).list()), None)
            answer.append(None)
        except (UfsError, UserError) as exc:
            answer.append(str(exc))

    worker = threading.Thread(target=run, name=f"ufs-check-{config.name}", daemon=True)
    worker.start()
    worker.join(timeout)
    if not answer:
        where = ", ".join(mount.uri for mount in config.mounts)
        return f"cannot list {where}: no answer in {timeout:g}s"
    return answer[0]


def reason(error: str) -> str:
    """The condition's reason for a check's error: what the store said, in Fluid's CamelCase style."""
    if "NoSuchBucket" in error:
        return "BucketNotFound"
    if "AccessDenied" in error or "InvalidAccessKeyId" in error or "SignatureDoesNotMatch" in error or ": 403" in error:
        return "AccessDenied"
    return "UFSUnreachable"

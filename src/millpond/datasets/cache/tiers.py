"""Cache tiers: where a cached file lives, which tier takes a new one, and eviction.

Each tier has a quota and two watermarks. When a fill would take a tier above its high
watermark, the least recently read files are moved down a tier (or removed from the last
one) until it is under its low watermark. A file some reader holds open (a shared flock)
is skipped: eviction never pulls data from under a reader. If nothing can make room, the
fill goes to the next tier, or the read is served straight from the UFS, uncached.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from millpond.datasets.cache.blocks import try_exclusive
from millpond.datasets.cache.index import CacheIndex, CacheRow
from millpond.datasets.config import Tier

USAGE_REFRESH_S = 2.0


def disk_room(path: Path) -> int:
    """Bytes a tier may still write on its filesystem: what is free, less a little headroom (1%, at most
    64 MiB) for everything else on that disk. A quota larger than the disk is bounded by the disk."""
    while not path.exists() and path.parent != path:
        path = path.parent  # the tier's folder is made by its first fill
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return 2**63 - 1  # nothing to judge by: the quota alone bounds the tier
    return max(0, usage.free - min(64 << 20, usage.total // 100))


class TierSet:
    """The tiers of one dataset, with usage counted from the index."""

    def __init__(self, tiers: tuple[Tier, ...], index: CacheIndex, state_dir: Path, flush: Callable[[], None]) -> None:
        self.tiers = tiers
        self.index = index
        self._flush = flush  # writes rows a load has batched, so usage and eviction see them
        self._evict_lock_path = state_dir / "evict.lock"
        self._lock = threading.Lock()
        self._usage: dict[int, int] = {}
        self._pending: dict[int, int] = {}  # reserved by fills whose rows are not in the index yet
        self._usage_at = 0.0
        # Folders are made by the first fill, not here: looking at a dataset's status leaves no trace.
        self._roots = [(f"{tier.path}/files/", f"{tier.path}/partial/") for tier in tiers]

    # -- where --------------------------------------------------------------------------------

    def location(self, row: CacheRow) -> Path:
        return self.file_path(row.tier, row.path, row.complete)

    def file_path(self, tier: int, path: str, complete: bool) -> Path:
        return self.tiers[tier].path / ("files" if complete else "partial") / path

    def local_name(self, tier: int, path: str, complete: bool) -> str:
        """``file_path`` as a string, without pathlib: this runs on every open of a cached file."""
        return self._roots[tier][0 if complete else 1] + path

    # -- how much -----------------------------------------------------------------------------

    def usage(self, refresh: bool = False) -> dict[int, int]:
        """Bytes per tier: what the index records plus what was reserved and is not recorded yet."""
        if refresh or time.monotonic() - self._usage_at > USAGE_REFRESH_S:
            self._flush()
            with self._lock:  # read under the lock: a row settled between the read and the sum would count nowhere
                counted = self.index.usage()
                tiers = set(counted) | set(self._pending)
                self._usage = {t: counted.get(t, 0) + self._pending.get(t, 0) for t in tiers}
                self._usage_at = time.monotonic()
        with self._lock:
            return dict(self._usage)

    def settled(self, tier: int, size: int) -> None:
        """A reserved piece is now recorded in the index (so counted there, not as pending)."""
        with self._lock:
            self._pending[tier] = self._pending.get(tier, 0) - size

    # -- placement ----------------------------------------------------------------------------

    def reserve(self, size: int) -> int | None:
        """The tier a new file of ``size`` bytes goes to (making room if needed), or None: don't cache.

        The check and the charge happen under one lock, so concurrent fills cannot together
        overshoot a quota; the caller calls ``settled`` once the file is in the index.
        """
        for tier in self.tiers:
            if size > tier.quota:
                continue
            for attempt in range(2):
                self.usage()
                room = disk_room(tier.path)
                with self._lock:
                    used = self._usage.get(tier.index, 0)
                    limit = tier.high * tier.quota if attempt == 0 else tier.quota
                    if used + size <= limit and size <= room:  # fills racing for the last room: ENOSPC, served uncached
                        self._usage[tier.index] = used + size
                        self._pending[tier.index] = self._pending.get(tier.index, 0) + size
                        return tier.index
                if attempt == 0:  # down to the low watermark, lower still when the disk lacks room
                    short = size - room
                    self.evict(tier.index, min(tier.low * tier.quota, max(0, used - short)) if short > 0 else None)
        return None

    # -- eviction -----------------------------------------------------------------------------

    def evict(self, tier_index: int, target: float | None = None) -> int:
        """Bring a tier to its low watermark (or ``target`` bytes); returns bytes freed. One evictor at a time."""
        tier = self.tiers[tier_index]
        goal = tier.low * tier.quota if target is None else target
        self._evict_lock_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._evict_lock_path, "a") as lock:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return 0  # another process is evicting right now
            used = self.usage(refresh=True).get(tier_index, 0)
            freed = 0
            for row in self.index.entries(tier_index):  # least recently read first
                if used - freed <= goal:
                    break
                held = row.size if row.complete else min(row.size, sum(row.present) * row.block_size)
                if self._take(row):
                    freed += held
        self.usage(refresh=True)
        return freed

    def _take(self, row: CacheRow) -> bool:
        """Move ``row``'s file a tier down, or drop it from the last tier; False if a reader holds it."""
        source = self.location(row)
        try:
            fd = os.open(source, os.O_RDONLY)
        except FileNotFoundError:
            self.index.forget([row.path])
            return True
        try:
            if not try_exclusive(fd):
                return False
            lower = self._room_below(row)
            if lower is not None:
                target = self.file_path(lower, row.path, row.complete)
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_name(f".{target.name}.moving")
                shutil.copyfile(source, partial)
                os.replace(partial, target)
                self.index.move(row.path, row.tier, lower)
            else:
                self.index.forget([row.path])
            os.unlink(source)
            return True
        finally:
            os.close(fd)

    def _room_below(self, row: CacheRow) -> int | None:
        """The next tier down if it has room under its high watermark for this file."""
        if row.tier + 1 >= len(self.tiers):
            return None
        lower = self.tiers[row.tier + 1]
        used = self.usage().get(lower.index, 0)
        if used + row.size > lower.high * lower.quota or row.size > disk_room(lower.path):
            return None
        with self._lock:
            self._usage[lower.index] = self._usage.get(lower.index, 0) + row.size
        return lower.index

    def clear(self) -> None:
        """Remove every cached file (what ``dataset clean`` does); files readers hold stay until closed."""
        self.index.forget_all()
        for tier in self.tiers:
            for sub in ("files", "partial"):
                shutil.rmtree(tier.path / sub, ignore_errors=True)
        self.usage(refresh=True)

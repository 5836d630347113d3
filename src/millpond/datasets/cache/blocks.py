"""Checksums and locks of cached pieces: what makes a piece trustworthy and keeps it in place."""

from __future__ import annotations

import fcntl
import os
import threading

import google_crc32c


def crc32c(data: bytes | memoryview) -> int:
    """CRC32C (hardware-accelerated; several GB/s), the checksum of every cached block."""
    return google_crc32c.value(data if isinstance(data, bytes) else bytes(data))  # it takes bytes only


class VerifiedBlocks:
    """Blocks already checked in this process, keyed so that any change to the file re-checks them.

    A block is verified against its CRC the first time this process reads it; the key holds
    the file's inode and change time, which every write moves, so a file rewritten (or
    corrupted) in place, or a new file in its place, is verified again at the next read —
    by a reader that stats the file it reads at each read, not once when it opened it.
    """

    def __init__(self) -> None:
        self._seen: set[tuple[int, int, int, int]] = set()
        self._lock = threading.Lock()

    @staticmethod
    def key(st: os.stat_result, block: int) -> tuple[int, int, int, int]:
        return (st.st_dev, st.st_ino, st.st_ctime_ns, block)

    def __contains__(self, key: tuple[int, int, int, int]) -> bool:
        return key in self._seen

    def add(self, key: tuple[int, int, int, int]) -> None:
        with self._lock:
            if len(self._seen) > 1_000_000:
                self._seen.clear()
            self._seen.add(key)


def same_version(before: os.stat_result, after: os.stat_result) -> bool:
    """Nothing wrote to (or replaced) the file between two stats of it."""
    return (before.st_dev, before.st_ino, before.st_ctime_ns, before.st_mtime_ns, before.st_size) == (
        after.st_dev, after.st_ino, after.st_ctime_ns, after.st_mtime_ns, after.st_size
    )


def pin(fd: int) -> os.stat_result | None:
    """Hold a shared lock on an open cache file: its stat, or None if it was evicted meanwhile."""
    fcntl.flock(fd, fcntl.LOCK_SH)
    st = os.fstat(fd)
    return st if st.st_nlink > 0 else None


def try_exclusive(fd: int) -> bool:
    """The evictor's lock: only a file no reader holds can be moved or removed."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False

"""CachedFile: a reader of one dataset file, served from the cache and filled from the UFS.

While open, it pins the cache file it reads (a shared flock), so the evictor leaves it
alone. Each block is checked against its CRC32C the first time this process reads it; a
corrupt block is dropped and fetched again, and the reader never sees the bad bytes.
Reading block N of a big file in order fetches the next blocks ahead of the reader.
"""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING

from millpond.datasets.cache.blocks import crc32c, pin
from millpond.datasets.cache.index import CacheRow, FileMeta, block_count

if TYPE_CHECKING:
    from millpond.datasets.cache.engine import DatasetCache

READ_AHEAD_BLOCKS = 8  # a file read in order: how many blocks to fetch ahead of the reader


class CachedFile(io.RawIOBase):
    """A read-only, seekable file of a dataset (see the module docstring)."""

    def __init__(self, cache: DatasetCache, meta: FileMeta) -> None:
        super().__init__()
        self.cache = cache
        self.meta = meta
        self.name = meta.path
        self._block_size = cache.config.block_size
        self._blocks = block_count(meta.size, self._block_size)
        self._row: CacheRow | None = None
        self._fd: int | None = None
        self._st: os.stat_result | None = None
        self._hits = 0  # bytes served from the cache, counted into the dataset's hit ratio at close
        self._pos = 0
        self._last_block = -1
        self._attach()
        if self._fd is None and self._blocks == 1:
            cache.reading_folder(meta)

    # -- the cache file ---------------------------------------------------------------------------

    def _attach(self, fresh: bool = False) -> None:
        """Find and pin the local copy of this file, if the cache has one of the right version."""
        for attempt in range(3):
            row = self.cache.known_row(self.meta.path, fresh=attempt > 0 or fresh)
            if row is None or row.version != self.meta.version:
                self._release()
                self._row = None
                return
            opened = self._open_local(row)
            if opened is None:
                continue
            fd, st = opened
            if self._fd is not None and self._st is not None and self._st.st_ino == st.st_ino:
                os.close(fd)  # the same file we already hold: keep that pin
            else:
                self._release()
                self._fd, self._st = fd, st
            self._row = row
            return
        self._release()
        self._row = None

    def _open_local(self, row: CacheRow) -> tuple[int, os.stat_result] | None:
        tiers = self.cache.tiers
        for complete in (row.complete, not row.complete):  # it may have just moved from partial/ to files/
            try:
                fd = os.open(tiers.local_name(row.tier, row.path, complete), os.O_RDONLY)
            except FileNotFoundError:
                continue
            st = pin(fd)
            if st is not None:
                return fd, st
            os.close(fd)  # evicted between open and lock
        return None

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = self._st = None

    # -- reading ----------------------------------------------------------------------------------

    def pread(self, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``offset`` (fewer at the end of the file)."""
        end = min(self.meta.size, offset + size)
        if offset >= end:
            return b""
        fast = self._read_cached(offset, end)
        if fast is not None:
            return fast
        chunks = []
        while offset < end:
            block = offset // self._block_size
            start = block * self._block_size
            count = min(end, start + self._block_size) - offset
            chunks.append(self._slice(block, offset - start, count))
            offset += count
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _read_cached(self, offset: int, end: int) -> bytes | None:
        """One pread for a range wholly in a complete cached file (CRCs checked on the bytes read); None otherwise."""
        row, fd = self._row, self._fd
        if row is None or fd is None or not row.complete:
            return None
        first, last = offset // self._block_size, (end - 1) // self._block_size
        if not all(row.present[first:last + 1]):
            return None
        data = os.pread(fd, end - offset, offset)
        if len(data) != end - offset:
            return None
        st = self._st  # as pinned: a file rewritten under an open reader is checked again at the next open
        assert st is not None
        verified = self.cache.verified
        view = memoryview(data)
        for block in range(first, last + 1):
            key = verified.key(st, block)
            if key in verified:
                continue
            start = block * self._block_size
            stop = min(self.meta.size, start + self._block_size)
            if start >= offset and stop <= end:
                piece = data if start == offset and stop == end else view[start - offset:stop - offset]
                good = crc32c(piece) == row.crcs[block]
                if good:
                    verified.add(key)
            else:
                good = self._verified(row, block)
            if not good:
                self._drop(row, block)
                return None
        self._hits += len(data)
        return data

    def _drop(self, row: CacheRow, block: int) -> None:
        """Forget a corrupt block, so it is fetched again."""
        self.cache.index.drop_blocks(row.path, row.version, [block])
        self.cache.known_row(row.path, fresh=True)
        self.cache._count("corrupt_blocks", 1)
        row.present[block] = 0

    def _slice(self, block: int, within: int, count: int) -> bytes:
        if self._row is None or not self._row.has(block):
            self._attach(fresh=True)  # another reader or the read-ahead may have filled it meanwhile
        row = self._row
        if row is not None and self._fd is not None and row.has(block) and self._verified(row, block):
            data = os.pread(self._fd, count, block * self._block_size + within)
            self._hits += len(data)
            self._read_ahead(block)
            return data
        data = self.cache.fetch(self.meta, block)
        self.cache._count("cache_miss_bytes", count)
        self._attach(fresh=True)
        self._read_ahead(block)
        return data[within:within + count]

    def _verified(self, row: CacheRow, block: int) -> bool:
        """Check a block's CRC once per change of the file; a bad block is dropped for a re-fetch."""
        assert self._fd is not None
        key = self.cache.verified.key(os.fstat(self._fd), block)
        if key in self.cache.verified:
            return True
        start = block * self._block_size
        length = min(self.meta.size, start + self._block_size) - start
        if crc32c(os.pread(self._fd, length, start)) == row.crcs[block]:
            self.cache.verified.add(key)
            return True
        self._drop(row, block)
        return False

    def _read_ahead(self, block: int) -> None:
        sequential = block == self._last_block + 1
        self._last_block = block
        if not sequential or self._blocks == 1:
            return
        row = self._row
        for following in range(block + 1, min(self._blocks, block + 1 + READ_AHEAD_BLOCKS)):
            if row is None or not row.has(following):
                self.cache.prefetch(self.meta, following)

    # -- io.RawIOBase -----------------------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.pread(self._pos, len(buffer))
        count = len(data)
        memoryview(buffer).cast("B")[:count] = data
        self._pos += count
        return count

    def read(self, size: int = -1) -> bytes:  # type: ignore[override]
        if size is None or size < 0:
            size = self.meta.size - self._pos
        data = self.pread(self._pos, size)
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        return self.read()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.meta.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    @property
    def size(self) -> int:
        return self.meta.size

    def close(self) -> None:
        if not self.closed:
            self._release()
            self.report_hits()
        super().close()

    def report_hits(self) -> None:
        """Add the bytes served from the cache to the dataset's counters (at close, or by a long-lived reader)."""
        if self._hits:
            self.cache._count("cache_hit_bytes", self._hits)
            self._hits = 0


"""CachedFile: a reader of one dataset file, served from the cache and filled from the UFS.

While open, it pins the cache file it reads (a shared flock), so the evictor leaves it
alone. A reader may live as long as a FUSE mount, while other processes repair, replace or
remove the cache files it holds, so every read of cached bytes is followed by an fstat of
the file it came from (about a microsecond, where a FUSE read of 1 MiB takes hundreds): a
file no longer linked (replaced by a rename, or removed by ``dataset clean``) is let go and
the path opened again, and a block is checked against its CRC32C once per version of the
file — its inode and change time — so bytes written in place since the last check are
checked before they are served (damage that leaves the file's times alone, a disk's bit
rot, is found by the next process to read the file). A corrupt block is dropped and fetched
again and written back into the cache file; a cache file whose length is not the file's
(bytes appended keep every block's CRC right) has its last block fetched again, which sets
the length: the reader never sees the bad bytes, and the file it leaves behind holds the good
ones (``verify`` checks it all before a path is handed out). Reading block N of a big file in order fetches
the next blocks ahead of the reader.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, Protocol

from millpond.datasets.cache.blocks import crc32c, pin, same_version
from millpond.datasets.cache.index import CacheRow, FileMeta, block_count

if TYPE_CHECKING:
    from millpond.datasets.cache.blocks import VerifiedBlocks
    from millpond.datasets.cache.index import CacheIndex
    from millpond.datasets.cache.tiers import TierSet
    from millpond.datasets.config import DatasetConfig

READ_AHEAD_BLOCKS = 8  # a file read in order: how many blocks to fetch ahead of the reader


class _Pinned:
    """An open cache file, share-locked, and its stat when opened.

    Its descriptor is closed with the last reference, not by whoever lets it go: FUSE serves
    one reader from many threads, and a thread may still be reading a file another thread has
    just given up (closing it then could hand its number to an unrelated file meanwhile opened).
    """

    __slots__ = ("fd", "st")

    def __init__(self, fd: int, st: os.stat_result) -> None:
        self.fd = fd
        self.st = st

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:  # bound now: it may run at exit
        _close(self.fd)


class _Local(NamedTuple):
    """The cache file a reader holds and the index row it was opened for, swapped as one."""

    row: CacheRow
    file: _Pinned


class BlockSource(Protocol):
    """What a reader needs of its dataset's cache (``DatasetCache`` is the one implementation).

    Written here, below the engine that opens readers, so the reader depends on these few calls
    and not on the engine's module: the engine imports the reader, never the reverse.
    """

    config: DatasetConfig
    index: CacheIndex
    tiers: TierSet
    verified: VerifiedBlocks

    def known_row(self, path: str, fresh: bool = False) -> CacheRow | None: ...

    def reading_folder(self, meta: FileMeta) -> None: ...

    def fetch(self, meta: FileMeta, block: int, batch: bool = False) -> bytes: ...

    def prefetch(self, meta: FileMeta, block: int) -> None: ...

    def count(self, name: str, value: int) -> None:
        """Add ``value`` to the dataset's counter ``name`` (hit and miss bytes, corrupt blocks)."""
        ...


class CachedFile(io.RawIOBase):
    """A read-only, seekable file of a dataset (see the module docstring)."""

    def __init__(self, cache: BlockSource, meta: FileMeta) -> None:
        super().__init__()
        self.cache = cache
        self.meta = meta
        self.name = meta.path
        self._block_size = cache.config.block_size
        self._blocks = block_count(meta.size, self._block_size)
        self._local: _Local | None = None
        self._hits = 0  # bytes served from the cache, counted into the dataset's hit ratio at close
        self._hit_reads = 0  # reads served from the cache (/metrics' hit count), counted with them
        self._pos = 0
        self._last_block = -1
        self._attach()
        local = self._local
        if local is not None and local.file.st.st_size != meta.size and local.row.complete and local.row.present[-1]:
            self._repair_length(local.row)  # a length changed behind the cache's back (an empty file read no byte)
        if self._local is None and self._blocks == 1:
            cache.reading_folder(meta)

    # -- the cache file ---------------------------------------------------------------------------

    def _attach(self, fresh: bool = False) -> None:
        """Find and pin the local copy of this file, if the cache has one of the right version."""
        for attempt in range(3):
            row = self.cache.known_row(self.meta.path, fresh=attempt > 0 or fresh)
            if row is None or row.version != self.meta.version:
                break
            opened = self._open_local(row)
            if opened is None:
                continue
            held = self._local
            if held is not None and (held.file.st.st_dev, held.file.st.st_ino) == (opened.st.st_dev, opened.st.st_ino):
                opened = held.file  # the same file we already hold: keep that pin (the new one closes unused)
            self._local = _Local(row, opened)
            return
        self._local = None

    def _open_local(self, row: CacheRow) -> _Pinned | None:
        tiers = self.cache.tiers
        for complete in (row.complete, not row.complete):  # it may have just moved from partial/ to files/
            try:
                fd = os.open(tiers.local_name(row.tier, row.path, complete), os.O_RDONLY)
            except FileNotFoundError:
                continue
            st = pin(fd)
            if st is not None:
                return _Pinned(fd, st)
            os.close(fd)  # evicted between open and lock
        return None

    def _release(self) -> None:
        self._local = None  # closed once no read still uses it (see _Pinned)

    # -- reading ----------------------------------------------------------------------------------

    def pread(self, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``offset`` (fewer at the end of the file)."""
        end = min(self.meta.size, offset + size)
        if offset >= end:
            return b""
        local = self._local
        if local is not None and local.row.complete:  # a range wholly cached: one pread
            data = self._read_local(offset // self._block_size, (end - 1) // self._block_size, offset, end)
            if data is not None:
                self._hits += len(data)
                self._hit_reads += 1
                return data
        chunks = []
        while offset < end:
            block = offset // self._block_size
            start = block * self._block_size
            count = min(end, start + self._block_size) - offset
            chunks.append(self._slice(block, offset - start, count))
            offset += count
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _read_local(self, first: int, last: int, offset: int, end: int) -> bytes | None:
        """Bytes ``[offset, end)`` from the cache file, blocks ``first..last`` verified; None: fetch them.

        The fstat comes after the read, so a write before the read shows in the change time
        the check is keyed by; a file no longer linked is let go and the path opened again.
        """
        verified = self.cache.verified
        for _ in range(3):
            local = self._local
            if local is None or not all(local.row.present[first:last + 1]):
                return None
            fd = local.file.fd
            seen = local.file.st  # a stat taken before this read (at open, or after an earlier read)
            data = os.pread(fd, end - offset, offset)
            st = local.file.st = os.fstat(fd)
            if st.st_nlink == 0:  # replaced (a rename over it) or removed (``dataset clean``) by another process
                self._attach(fresh=True)
                continue
            if st.st_size != self.meta.size and local.row.complete and local.row.present[-1]:
                self._repair_length(local.row)  # grown or cut behind the cache's back: set right, then read again
                continue
            if len(data) != end - offset:
                return self._verify(local, first, last, offset, end, st)  # shorter than listed: checked, dropped
            if verified.key(st, first) in verified if first == last else all(  # the usual read: one block
                verified.key(st, b) in verified for b in range(first, last + 1)
            ):
                return data
            whole = offset == first * self._block_size and end == min(self.meta.size, (last + 1) * self._block_size)
            if whole and same_version(seen, st):  # whole blocks, read while the file stood still: check these
                return data if self._checked(local.row, first, last, data, st) else None
            del data  # part of a block, or the file changed meanwhile: read the blocks whole, between two stats
            return self._verify(local, first, last, offset, end, st)
        return None

    def _verify(
        self, local: _Local, first: int, last: int, offset: int, end: int, before: os.stat_result
    ) -> bytes | None:
        """Check blocks ``first..last`` on one read of them whole, and serve from the bytes checked."""
        start, stop = first * self._block_size, min(self.meta.size, (last + 1) * self._block_size)
        whole = os.pread(local.file.fd, stop - start, start)
        after = os.fstat(local.file.fd)
        if not self._checked(local.row, first, last, whole, after if same_version(before, after) else None):
            return None
        return whole if (offset, end) == (start, stop) else whole[offset - start:end - start]

    def _checked(self, row: CacheRow, first: int, last: int, whole: bytes, st: os.stat_result | None) -> bool:
        """Blocks ``first..last``, read whole, match their CRCs; a corrupt one is dropped (False: fetch it).

        ``st``: the version of the file they were read from, where nothing changed it while they
        were read; its blocks then count as verified (else they are checked again next time).
        """
        size = self._block_size
        start = first * size
        view = memoryview(whole)
        bad = [
            block for block in range(first, last + 1)
            if crc32c(whole if first == last else view[block * size - start:block * size + size - start])
            != row.crcs[block]
        ]
        for block in bad:
            self._drop(row, block)
        if not bad and st is not None:
            verified = self.cache.verified
            for block in range(first, last + 1):
                verified.add(verified.key(st, block))
        return not bad

    def _drop(self, row: CacheRow, block: int) -> None:
        """Forget a corrupt block, so it is fetched again."""
        self.cache.index.drop_blocks(row.path, row.version, [block])
        self.cache.known_row(row.path, fresh=True)
        self.cache.count("corrupt_blocks", 1)
        row.present[block] = 0

    def _repair_length(self, row: CacheRow) -> None:
        """A complete cache file whose length is not the file's (bytes appended, or cut): its last block is
        fetched again, which sets the file's length as it writes the block back (``DatasetCache._store``)."""
        self._drop(row, self._blocks - 1)
        self.cache.fetch(self.meta, self._blocks - 1)
        self._attach(fresh=True)

    def verify(self) -> bool:
        """Check every byte of the cache file before its path is handed out (``dataset path``, fsspec's
        ``local_path``): each block against its CRC32C and the length against the listing, a corrupt block
        or a wrong length repaired in place from the UFS. True when it now holds exactly the file's bytes.

        Reads a few blocks at a time (memory stays bounded whatever the file's size); what it reads is
        no cache hit of a user's, so the dataset's hit counters are left as they were.
        """
        step = self._block_size * READ_AHEAD_BLOCKS
        for offset in range(0, self.meta.size, step):
            self.pread(offset, step)
        self._hits = self._hit_reads = 0
        for _ in range(2):
            self._attach(fresh=True)
            local = self._local
            if local is None or not (local.row.complete and all(local.row.present)):
                return False
            if os.fstat(local.file.fd).st_size == self.meta.size:
                return True
            self._repair_length(local.row)  # an empty file grown (no block was read to notice it)
        return False

    def _slice(self, block: int, within: int, count: int) -> bytes:
        local = self._local
        if local is None or not local.row.has(block):
            self._attach(fresh=True)  # another reader or the read-ahead may have filled it meanwhile
        offset = block * self._block_size + within
        data = self._read_local(block, block, offset, offset + count)
        if data is not None:
            self._hits += len(data)
            self._hit_reads += 1
            self._read_ahead(block)
            return data
        data = self.cache.fetch(self.meta, block)
        self.cache.count("cache_miss_bytes", count)
        self.cache.count("cache_miss_reads", 1)
        self._attach(fresh=True)
        self._read_ahead(block)
        return data[within:within + count]

    def _read_ahead(self, block: int) -> None:
        sequential = block == self._last_block + 1
        self._last_block = block
        if not sequential or self._blocks == 1:
            return
        local = self._local
        row = local.row if local is not None else None
        for following in range(block + 1, min(self._blocks, block + 1 + READ_AHEAD_BLOCKS)):
            if row is None or not row.has(following):
                self.cache.prefetch(self.meta, following)

    # -- io.RawIOBase -----------------------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]  # filled by slice: no Buffer
        data = self.pread(self._pos, len(buffer))
        count = len(data)
        memoryview(buffer).cast("B")[:count] = data
        self._pos += count
        return count

    def read(self, size: int = -1) -> bytes:
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
            self.cache.count("cache_hit_bytes", self._hits)
            self._hits = 0
        if self._hit_reads:
            self.cache.count("cache_hit_reads", self._hit_reads)
            self._hit_reads = 0


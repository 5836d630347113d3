"""DatasetCache: serve a dataset's files from the local tiers, fetching from the UFS on a miss.

One object per dataset per process, shared by every access path (fsspec, FUSE, DataLoad).
It keeps the UFS listing in memory (refreshed when its TTL passes or another process syncs),
fetches misses on a pool of threads (the same piece is never fetched twice at once), reads
ahead for sequential readers — the next blocks of a file, the next files of a folder — and
for a folder read in a shuffled order, as a training loop's sampler reads it, the rest of the
folder's small files; and batches its bookkeeping (LRU times, hit counters) into one index
write a second. A reader never waits behind read-ahead: it fetches a piece queued for
read-ahead itself, at once.
"""

from __future__ import annotations

import atexit
import bisect
import contextlib
import errno
import json
import os
import posixpath
import threading
import time
import uuid
import weakref
from array import array
from collections.abc import Callable, Iterable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from millpond.datasets.cache.blocks import VerifiedBlocks, crc32c
from millpond.datasets.cache.index import CacheIndex, CacheRow, FileMeta, block_count
from millpond.datasets.cache.namespace import Namespace
from millpond.datasets.cache.node_report import NodeReport
from millpond.datasets.cache.reader import CachedFile
from millpond.datasets.cache.tiers import TierSet
from millpond.datasets.config import DatasetConfig, load_config
from millpond.datasets.ufs import Ufs, UfsError, open_ufs
from millpond.settings import load_settings

FETCH_THREADS = 64  # concurrent GETs: over a 10 ms link, small files need many in flight
READ_AHEAD_FILES = 48  # a folder walk: how many next files to fetch ahead of the reader
FLUSH_INTERVAL_S = 1.0
# A folder whose files are opened cold out of order (a shuffled epoch) this many times is read ahead
# whole: its small files not cached yet, if they fit in half the room the tiers have left.
SCATTERED_OPENS = 4
SWEEP_AGAIN_S = 60.0  # a folder read ahead whole is not swept again sooner (its files are being fetched)
FRESHNESS_CHECK_S = 0.5
SYNC_RETRY_S = 30.0  # after a failed listing, how long the last one is served before trying again

_NO_ROOM = (errno.ENOSPC, errno.EDQUOT)  # a tier's disk (or the user's disk quota) is full: serve uncached

ProgressFn = Callable[[int, int, int], None]  # (bytes done, files done, bytes in all)


@dataclass
class LoadResult:
    """What a DataLoad did."""

    files: int
    bytes: int
    fetched_files: int
    fetched_bytes: int
    seconds: float
    cached_files: int = -1  # what the cache holds of them at the end (-1: not counted): less when they did not fit
    cached_bytes: int = -1


class DatasetCache:
    """The cache of one dataset (see the module docstring)."""

    def __init__(self, config: DatasetConfig, volumes_dir: Path) -> None:
        self.config = config
        self.volumes_dir = volumes_dir
        self.index = CacheIndex(config.state_dir)
        # On a cluster node the cache first claims one of the runtime's replicas; a node beyond
        # the bound serves its readers straight from the UFS (tiers of no room), caching nothing.
        self.node_report = NodeReport.claim(config)
        self.holds_cache = self.node_report is not None or config.node is None
        tiers = config.tiers if self.holds_cache else tuple(replace(t, quota=0) for t in config.tiers)
        self.tiers = TierSet(tiers, self.index, config.state_dir, self._flush_rows)
        self._ufs: dict[int, Ufs] = {}
        self._lock = threading.RLock()
        self._sync_lock = threading.Lock()
        self._namespace: Namespace | None = None
        self._generation: str | None = None
        self._checked_at = 0.0
        self._next_sync_try = 0.0
        self._inflight: dict[tuple[str, int], Future[bytes]] = {}
        self._pool = ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix=f"millpond-fetch-{config.name}")
        self._accessed: dict[str, float] = {}
        self._counters: dict[str, int] = {}
        self._pending_rows: list[CacheRow] = []
        self.verified = VerifiedBlocks()
        self._rows: dict[str, CacheRow] = {}  # complete files' rows, so a warm open needs no SQL
        self._last_opened: dict[str, int] = {}  # folder → position of the last file opened in it
        self._scattered: dict[str, int] = {}  # folder → cold opens out of order since it was last swept
        self._swept: dict[str, float] = {}  # folder → when its small files were last all read ahead
        self._closed = False
        # Where the tiers are, for whoever cleans up after the dataset is deleted (its manifests are gone then).
        self.index.set_meta({"tier_paths": json.dumps([str(tier.path) for tier in config.tiers])})
        self._flusher = threading.Thread(target=self._flush_loop, name="millpond-cache-flush", daemon=True)
        self._flusher.start()
        atexit.register(_close_ref, weakref.ref(self))

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.flush()

    def _flush_loop(self) -> None:
        while not self._closed:
            time.sleep(FLUSH_INTERVAL_S)
            try:
                self.flush()
            except Exception:  # noqa: BLE001 - bookkeeping must never kill a reader; retried next tick
                pass

    def flush(self) -> None:
        """Write batched LRU times, counters and rows of files cached by a load."""
        self._flush_rows()
        with self._lock:
            accessed, self._accessed = self._accessed, {}
            counters, self._counters = self._counters, {}
        if accessed:
            self.index.touch(accessed)
        if counters:
            self.index.add_counters(counters)
        if self.node_report is not None:
            self.node_report.send(self.index, self.config.capacity)

    def _flush_rows(self) -> None:
        with self._lock:
            rows, self._pending_rows = self._pending_rows, []
        if rows:
            self.index.put_complete(rows)
            for row in rows:
                self.tiers.settled(row.tier, row.size)

    def count(self, name: str, value: int) -> None:
        """Add ``value`` to the counter ``name``, written to the index with the next flush."""
        with self._lock:
            self._counters[name] = self._counters.get(name, 0) + value

    def touched(self, path: str) -> None:
        self._accessed[path] = time.time()

    def known_row(self, path: str, fresh: bool = False) -> CacheRow | None:
        """The cache row of ``path``, from memory when it is a complete file seen before.

        A remembered row can only be stale by its file having been evicted or moved (the
        reader then fails to open it and asks again with ``fresh``) or by a new version
        (the reader compares versions); same version means same bytes and same CRCs.
        """
        if not fresh:
            row = self._rows.get(path)
            if row is not None:
                return row
        else:
            self._rows.pop(path, None)
        row = self.index.entry(path)
        if row is not None and row.complete and all(row.present):
            if len(self._rows) > 200_000:
                self._rows.clear()
            self._rows[path] = row
        return row

    # -- UFS and metadata -------------------------------------------------------------------------

    def ufs(self, mount: int) -> Ufs:
        found = self._ufs.get(mount)
        if found is None:
            spec = self.config.mounts[mount]
            found = self._ufs[mount] = open_ufs(spec.uri, spec.options, self.volumes_dir, self.config.namespace)
        return found

    def sync(self) -> int:
        """List every mount now (``dataset sync``); drops cached copies of files changed or gone.

        Returns files listed."""
        with self._sync_lock:
            listed: list[FileMeta] = []
            for position, mount in enumerate(self.config.mounts):
                for entry in self.ufs(position).list():
                    path = f"{mount.path}/{entry.key}" if mount.path else entry.key
                    listed.append(FileMeta(path, position, entry.key, entry.size, entry.mtime, entry.version))
            generation = str(int(self.index.meta("generation") or 0) + 1)
            stale = self.index.replace_files(
                listed,
                {
                    "synced_at": repr(time.time()), "fingerprint": self.config.fingerprint(),
                    "generation": generation, "sync_error": "",
                    # a listing that succeeded is also ufs_check's answer: the mounts answer
                    "checked_at": repr(time.time()), "checked_fingerprint": self.config.fingerprint(),
                    "check_error": "",
                },
            )
            self._drop(stale)
            self._namespace = None
            return len(listed)

    def _drop(self, paths: Iterable[str]) -> None:
        paths = list(paths)
        for path in paths:
            self._rows.pop(path, None)
            for tier in range(len(self.config.tiers)):
                for complete in (True, False):
                    try:
                        os.unlink(self.tiers.file_path(tier, path, complete))
                    except OSError:
                        pass
        self.index.forget(paths)

    def namespace(self) -> Namespace:
        """The current file tree: re-read when another process synced, re-listed when the TTL passed."""
        now = time.monotonic()
        current = self._namespace
        if current is not None and now - self._checked_at < FRESHNESS_CHECK_S:
            return current
        self._checked_at = now
        synced_at = self.index.meta("synced_at")
        stale = (
            synced_at is None
            or self.index.meta("fingerprint") != self.config.fingerprint()
            or time.time() - float(synced_at) > self.config.metadata_ttl_s
        )
        if stale and time.monotonic() >= self._next_sync_try:
            try:
                self.sync()
            except UfsError as exc:
                # Serve what was listed before, and do not hammer a UFS that is down: try again later.
                self._next_sync_try = time.monotonic() + min(self.config.metadata_ttl_s, SYNC_RETRY_S)
                self.index.set_meta({"sync_error": str(exc)})
                if synced_at is None or (current is None and not self.index.files()):
                    raise
        generation = self.index.meta("generation")
        if self._namespace is None or generation != self._generation:
            with self._lock:
                self._namespace = Namespace(self.index.files(), [m.path for m in self.config.mounts if m.path])
                self._generation = generation
        return self._namespace

    def stat(self, path: str) -> FileMeta | None:
        return self.namespace().files.get(normalize(path))

    def is_folder(self, path: str) -> bool:
        return self.namespace().is_folder(normalize(path))

    def listdir(self, path: str) -> list[str] | None:
        return self.namespace().listdir(normalize(path))

    def mount_of(self, path: str) -> tuple[int, str]:
        """The mount a dataset path falls in and the key under that mount's root."""
        path = normalize(path)
        best = None
        for position, mount in enumerate(self.config.mounts):
            if not mount.path or path == mount.path or path.startswith(mount.path + "/"):
                if best is None or len(mount.path) > len(self.config.mounts[best].path):
                    best = position
        if best is None:
            raise FileNotFoundError(errno.ENOENT, "not under any mount of the dataset", path)
        root = self.config.mounts[best].path
        return best, path[len(root):].lstrip("/") if root else path

    # -- reading ----------------------------------------------------------------------------------

    def open(self, path: str) -> CachedFile:
        """A pinned reader of ``path`` (FileNotFoundError if the dataset has no such file)."""
        path = normalize(path)
        meta = self.namespace().files.get(path)
        if meta is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        self.touched(path)
        return CachedFile(self, meta)

    def read_file(self, path: str) -> bytes:
        with self.open(path) as reader:
            return reader.read()

    def local_path(self, path: str) -> Path | None:
        """Where a completely cached file can be read as a plain file, or None if it is not cached."""
        path = normalize(path)
        meta = self.stat(path)
        row = self.index.entry(path)
        if meta is None or row is None or not row.complete or not all(row.present) or row.version != meta.version:
            return None
        local = self.tiers.location(row)
        return local if local.exists() else None

    def verified_path(self, path: str) -> Path | None:
        """``local_path``, once every byte of the file there was checked and a corrupt one repaired
        (``CachedFile.verify``): what is handed to a user to read as a plain file. None when it is not
        completely cached, or a repair found no room to write it back."""
        if self.local_path(path) is None:
            return None
        with self.open(path) as reader:
            if not reader.verify():
                return None
        return self.local_path(path)

    def reading_folder(self, meta: FileMeta) -> None:
        """Called when a file is opened with nothing cached: read ahead if the folder is walked in order."""
        parent = posixpath.dirname(meta.path)
        namespace = self.namespace()
        names = namespace.listdir(parent) or []
        name = posixpath.basename(meta.path)
        try:
            position = names.index(name) if len(names) < 64 else _bisect_index(names, name)
        except ValueError:
            return
        last = self._last_opened.get(parent)
        self._last_opened[parent] = position
        if last is None:
            return
        if not 0 < position - last <= 2:
            if abs(position - last) > 2:  # neither forwards nor backwards in order: a shuffled reader
                self._scattered_open(parent)
            return
        for following in namespace.following(meta.path, READ_AHEAD_FILES):
            other = namespace.files[following]
            if other.size <= self.config.block_size and (following, 0) not in self._inflight:
                row = self.index.entry(following)
                if row is None or row.version != other.version:
                    self.prefetch(other, 0)

    def _scattered_open(self, folder: str) -> None:
        """Count a cold open out of order; at ``SCATTERED_OPENS`` read the whole folder ahead, in the background.

        A shuffled sampler opens every file of the folder this epoch, in an order nobody can
        guess: fetching them all, many at once, is what beats one GET per open. A reader that
        reaches a file still queued fetches it itself (see ``fetch``), so it never waits longer
        than without the sweep.
        """
        with self._lock:
            count = self._scattered[folder] = self._scattered.get(folder, 0) + 1
            if count < SCATTERED_OPENS or time.monotonic() - self._swept.get(folder, -SWEEP_AGAIN_S) < SWEEP_AGAIN_S:
                return
            self._scattered[folder] = 0
            self._swept[folder] = time.monotonic()
            if self._closed:
                return
        try:
            self._pool.submit(self._sweep, folder)
        except RuntimeError:  # the pool shut down
            pass

    def _sweep(self, folder: str) -> None:
        """Queue a fetch of each small file of ``folder`` not cached, if together they fit in half the free room."""
        namespace = self.namespace()
        block_size = self.config.block_size
        wanted = []
        for name in namespace.listdir(folder) or []:
            meta = namespace.files.get(f"{folder}/{name}" if folder else name)
            if meta is None or meta.size > block_size or (meta.path, 0) in self._inflight:
                continue
            row = self.index.entry(meta.path)
            if row is None or row.version != meta.version or not row.has(0):
                wanted.append(meta)
        usage = self.tiers.usage()
        room = sum(max(0.0, tier.high * tier.quota - usage.get(tier.index, 0)) for tier in self.config.tiers)
        if not wanted or sum(meta.size for meta in wanted) > room / 2:
            return  # nothing to do, or it would evict what is cached for files nobody asked for yet
        for meta in wanted:
            self.prefetch(meta, 0)

    def prefetch(self, meta: FileMeta, block: int) -> None:
        """Fetch a block in the background (no-op if it is already being fetched)."""
        key = (meta.path, block)
        with self._lock:
            if key in self._inflight or self._closed:
                return
        row = self.index.entry(meta.path)
        if row is not None and row.version == meta.version and row.has(block):
            return
        with self._lock:
            if key in self._inflight:
                return
            future: Future[bytes] = Future()
            self._inflight[key] = future
        try:
            self._pool.submit(self._run_fetch, meta, block, future, False)
        except RuntimeError:  # the pool shut down
            with self._lock:
                if self._inflight.get(key) is future:
                    del self._inflight[key]

    def fetch(self, meta: FileMeta, block: int, batch: bool = False) -> bytes:
        """A block's bytes from the UFS, stored in the cache; waits for a fetch already under way.

        A read-ahead of this block still queued (not started) is taken over: cancelled there and
        fetched here, now, so a reader never waits behind the read-ahead queue.
        """
        key = (meta.path, block)
        while True:
            with self._lock:
                future = self._inflight.get(key)
                if future is not None and future.cancel():  # queued, not running: ours now
                    future = None
                owner = future is None
                if owner:
                    future = Future()
                    future.set_running_or_notify_cancel()  # running from the start: nobody can take it over
                    self._inflight[key] = future
            assert future is not None
            if owner:
                self._run_fetch(meta, block, future, batch)
            try:
                return future.result()
            except CancelledError:  # a read-ahead we waited on was taken over by another reader: ask again
                continue

    def _run_fetch(self, meta: FileMeta, block: int, future: Future[bytes], batch: bool) -> None:
        if not future.running() and not future.set_running_or_notify_cancel():
            return  # a queued read-ahead a reader took over (see ``fetch``)
        try:
            data = self._fetch_and_store(meta, block, batch)
            future.set_result(data)
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
            future.set_exception(exc)
        finally:
            with self._lock:
                if self._inflight.get((meta.path, block)) is future:
                    del self._inflight[(meta.path, block)]

    def _fetch_and_store(self, meta: FileMeta, block: int, batch: bool) -> bytes:
        size = self.config.block_size
        start = block * size
        end = min(meta.size, start + size)
        try:
            if block_count(meta.size, size) == 1:
                data = self.ufs(meta.mount).read(meta.key, 0, None)
            else:
                data = self.ufs(meta.mount).read(meta.key, start, end)
        except UfsError:
            # Gone or changed in the UFS since it was listed: look again, so the next read sees the truth.
            self._refresh_file(meta)
            raise
        if len(data) != end - start:
            self._refresh_file(meta)
            raise UfsError(
                f"{meta.path}: the UFS returned {len(data)} bytes where {end - start} were listed (changed meanwhile?)"
            )
        self.count("ufs_fetched_bytes", len(data))
        self._store(meta, block, data, batch)
        return data

    def _refresh_file(self, meta: FileMeta) -> None:
        try:
            entry = self.ufs(meta.mount).stat(meta.key)
        except UfsError:
            return
        if entry is None:
            self.index.remove_file(meta.path)
        elif entry.version != meta.version:
            self.index.put_file(FileMeta(meta.path, meta.mount, meta.key, entry.size, entry.mtime, entry.version))
        self._drop([meta.path])
        self._checked_at = 0.0

    def _store(self, meta: FileMeta, block: int, data: bytes, batch: bool) -> None:
        size = self.config.block_size
        if block_count(meta.size, size) == 1:
            tier = self.tiers.reserve(meta.size)
            if tier is None:
                return  # no room anywhere (readers hold everything): served uncached
            target = self.tiers.file_path(tier, meta.path, complete=True)
            try:
                _write_atomically(target, data)
            except OSError as exc:
                self.tiers.settled(tier, meta.size)  # nothing of it is kept: the reservation is given back
                if exc.errno in _NO_ROOM:
                    return  # the tier's disk filled up meanwhile: served uncached
                raise
            whole = CacheRow(
                meta.path, meta.version, tier, meta.size, size, bytearray(b"\x01"), array("I", [crc32c(data)]), True,
                time.time(),
            )
            if batch:
                with self._lock:
                    self._pending_rows.append(whole)
            else:
                self.index.put_complete([whole])
                self.tiers.settled(tier, meta.size)
            return
        row = self.index.entry(meta.path)
        reserved = None
        if row is not None and row.version == meta.version:
            tier = row.tier
        else:
            reserved = self.tiers.reserve(meta.size)
            if reserved is None:
                return
            tier = reserved
        # A complete file being repaired (a corrupt block) is rewritten where it is.
        repairing = row is not None and row.version == meta.version and row.complete
        partial = self.tiers.file_path(tier, meta.path, complete=repairing)
        try:
            partial.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(partial, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if os.fstat(fd).st_size != meta.size:
                    os.ftruncate(fd, meta.size)
                if os.pwrite(fd, data, block * size) != len(data):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(partial))
            finally:
                os.close(fd)
        except OSError as exc:
            if reserved is not None:
                self.tiers.settled(reserved, meta.size)
            if exc.errno in _NO_ROOM:
                return  # the tier's disk is full: this block is served uncached, and stays absent from the file
            raise
        row = self.index.merge_blocks(meta.path, meta.version, tier, meta.size, size, {block: crc32c(data)})
        if reserved is not None:
            self.tiers.settled(reserved, meta.size)
        if row.complete and not repairing:
            final = self.tiers.file_path(tier, meta.path, complete=True)
            final.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.replace(partial, final)
            except FileNotFoundError:
                pass  # another process completed it first

    # -- DataLoad ---------------------------------------------------------------------------------

    def load(self, targets: Iterable[str] = ("",), progress: ProgressFn | None = None) -> LoadResult:
        """Fetch every file under ``targets`` into the cache (what a DataLoad does), blocks in parallel."""
        started = time.perf_counter()
        namespace = self.namespace()
        paths: list[str] = []
        for target in targets:
            found = namespace.under(normalize(target))
            if not found and not namespace.is_folder(normalize(target)):
                raise FileNotFoundError(errno.ENOENT, "no such file or folder in the dataset", target)
            paths.extend(found)
        paths = list(dict.fromkeys(paths))
        work: list[tuple[FileMeta, int]] = []
        done_bytes = 0
        done_files = 0
        total_bytes = 0
        for path in paths:
            meta = namespace.files[path]
            total_bytes += meta.size
            row = self.index.entry(path)
            count = block_count(meta.size, self.config.block_size)
            missing = [b for b in range(count) if row is None or row.version != meta.version or not row.has(b)]
            if not missing:
                done_bytes += meta.size
                done_files += 1
            work.extend((meta, b) for b in missing)
        fetched_files = {meta.path for meta, _ in work}
        remaining = {path: 0 for path in fetched_files}
        for meta, _ in work:
            remaining[meta.path] += 1
        lock = threading.Lock()
        fetched_bytes = 0
        if progress:
            progress(done_bytes, done_files, total_bytes)

        failed = threading.Event()

        def one(item: tuple[FileMeta, int]) -> None:
            nonlocal done_bytes, done_files, fetched_bytes
            if failed.is_set():
                return  # a block failed: the load ends (a worker that took this one before the cancel skips it)
            meta, block = item
            try:
                data = self.fetch(meta, block, batch=True)
            except BaseException:
                failed.set()
                raise
            with lock:
                done_bytes += len(data)
                fetched_bytes += len(data)
                remaining[meta.path] -= 1
                if remaining[meta.path] == 0:
                    done_files += 1
                if progress:
                    progress(done_bytes, done_files, total_bytes)

        # Large files first, so their blocks overlap with the many small GETs.
        work.sort(key=lambda item: -item[0].size)
        errors: list[BaseException] = []
        with ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="millpond-load") as pool:
            futures = [pool.submit(one, item) for item in work]
            for future in futures:
                exc = future.exception()
                if exc is not None:
                    errors.append(exc)
                    for queued in futures:  # the first failure ends the load: a dead UFS is not asked per block
                        queued.cancel()
                    break
        self.flush()
        if errors:
            raise errors[0]
        for path in fetched_files:
            self.touched(path)
        cached = [namespace.files[path].size for path in paths if self.local_path(path) is not None]
        return LoadResult(len(paths), total_bytes, len(fetched_files), fetched_bytes, time.perf_counter() - started,
                          len(cached), sum(cached))

    # -- writing (ReadWrite datasets: straight through to the UFS) --------------------------------

    def write_file(self, path: str, source: Path) -> FileMeta:
        """Upload ``source`` as ``path`` to the UFS, then cache it: cleaning the cache never loses it."""
        path = normalize(path)
        mount, key = self.mount_of(path)
        if self.config.mounts[mount].read_only:
            raise PermissionError(errno.EROFS, "the dataset is read-only (accessModes)", path)
        if not key:
            raise IsADirectoryError(errno.EISDIR, "a mount's root is a folder", path)
        entry = self.ufs(mount).write(key, source)
        meta = FileMeta(path, mount, key, entry.size, entry.mtime, entry.version)
        self._drop([path])
        self.index.put_file(meta)
        self._checked_at = 0.0
        if meta.size <= self.config.block_size:
            self._store(meta, 0, source.read_bytes(), batch=False)
        return meta

    def remove(self, path: str) -> None:
        path = normalize(path)
        mount, key = self.mount_of(path)
        if self.config.mounts[mount].read_only:
            raise PermissionError(errno.EROFS, "the dataset is read-only (accessModes)", path)
        self.ufs(mount).remove(key)
        self._drop([path])
        self.index.remove_file(path)
        self._checked_at = 0.0

    # -- maintenance ------------------------------------------------------------------------------

    def clean(self) -> None:
        """Drop everything cached (the UFS keeps the data)."""
        self.flush()
        self._rows.clear()
        self.tiers.clear()
        self.index.reset_counters()

    def stats(self) -> CacheStats:
        self.flush()
        return cache_stats(self.index, self.config)


@dataclass(frozen=True)
class CacheStats:
    """Numbers behind a Dataset's status."""

    ufs_total: int
    file_num: int
    cached: int
    capacity: int
    hit_bytes: int
    miss_bytes: int
    synced_at: float | None
    sync_error: str | None
    usage: dict[int, int]


def cache_stats(index: CacheIndex, config: DatasetConfig) -> CacheStats:
    """The numbers behind a Dataset's status, read from its index (no engine needed)."""
    files = index.files()
    usage = index.usage()
    counters = index.counters()
    synced = index.meta("synced_at")
    return CacheStats(
        ufs_total=sum(f.size for f in files.values()), file_num=len(files), cached=sum(usage.values()),
        capacity=config.capacity, hit_bytes=counters.get("cache_hit_bytes", 0),
        miss_bytes=counters.get("cache_miss_bytes", 0),
        synced_at=float(synced) if synced else None, sync_error=index.meta("sync_error") or None, usage=usage,
    )


def normalize(path: str) -> str:
    """A dataset path without leading or trailing slashes; a ``..`` that escapes the root is refused."""
    parts: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not parts:
                raise PermissionError(errno.EACCES, "path escapes the dataset root", path)
            parts.pop()
        else:
            parts.append(segment)
    return "/".join(parts)


def _write_atomically(target: Path, data: bytes) -> None:
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileNotFoundError:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:  # a write may stop short (a filesystem filling up): the rest, or its error
            view = view[os.write(fd, view):]
        os.close(fd)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        temporary.unlink(missing_ok=True)
        raise


def _bisect_index(names: list[str], name: str) -> int:
    position = bisect.bisect_left(names, name)
    if position < len(names) and names[position] == name:
        return position
    raise ValueError(name)


def _close_ref(ref: weakref.ref[DatasetCache]) -> None:
    cache = ref()
    if cache is not None:
        try:
            cache.close()
        except Exception:  # noqa: BLE001 - at interpreter exit, nothing to report to
            pass


_OPEN: dict[tuple[str, str, str], DatasetCache] = {}
_OPEN_LOCK = threading.Lock()


def open_cache(name: str, namespace: str = "default") -> DatasetCache:
    """The process-wide DatasetCache of a dataset (one per dataset, reused by every reader)."""
    settings = load_settings()
    config = load_config(name, namespace, settings)
    key = (str(settings.home), namespace, name)
    with _OPEN_LOCK:
        found = _OPEN.get(key)
        if found is not None and found.config == config and not found._closed:
            return found
        if found is not None:
            found.close()
        cache = _OPEN[key] = DatasetCache(config, settings.volumes_dir)
        return cache

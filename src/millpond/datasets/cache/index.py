"""The cache index: one SQLite file per dataset that survives restarts and is shared by processes.

It holds two things: the UFS metadata last listed (``files``: what exists, its size and
version) and what the cache holds (``cache``: which tier, which blocks are present, a CRC32C
per block, when it was last read). WAL mode lets readers in many processes look things up
while one process writes; every thread has its own connection.

The stdlib ``sqlite3`` is used rather than SQLAlchemy: a lookup sits on the path of every
``open()`` of a cached file, where microseconds count.
"""

from __future__ import annotations

import queue
import sqlite3
import time
from array import array
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from millpond.store.sqlite_wal import configure

SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, mount INTEGER NOT NULL, key TEXT NOT NULL,
    size INTEGER NOT NULL, mtime REAL NOT NULL, version TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS cache (
    path TEXT PRIMARY KEY, version TEXT NOT NULL, tier INTEGER NOT NULL, size INTEGER NOT NULL,
    block_size INTEGER NOT NULL, present BLOB NOT NULL, crcs BLOB NOT NULL,
    complete INTEGER NOT NULL, last_access REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS cache_lru ON cache (tier, last_access);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


@dataclass(frozen=True)
class FileMeta:
    """A UFS file as last listed, under its dataset path."""

    path: str
    mount: int
    key: str
    size: int
    mtime: float
    version: str


@dataclass
class CacheRow:
    """What the cache holds of one file: tier, present blocks and their CRC32Cs."""

    path: str
    version: str
    tier: int
    size: int
    block_size: int
    present: bytearray
    crcs: array
    complete: bool  # the file sits under files/ (else partial/); a block may still be dropped for repair
    last_access: float

    @property
    def blocks(self) -> int:
        return block_count(self.size, self.block_size)

    def has(self, block: int) -> bool:
        return bool(self.present[block])


def block_count(size: int, block_size: int) -> int:
    """Blocks in a file of ``size`` bytes (an empty file still has one, empty, block)."""
    return max(1, -(-size // block_size))


def _row(values: tuple) -> CacheRow:
    crcs = array("I")
    crcs.frombytes(values[6])
    return CacheRow(
        values[0], values[1], values[2], values[3], values[4], bytearray(values[5]), crcs, bool(values[7]), values[8]
    )


_CACHE_COLUMNS = "path, version, tier, size, block_size, present, crcs, complete, last_access"


class CacheIndex:
    """The index of one dataset's cache (``index.db`` in its state folder)."""

    def __init__(self, state_dir: Path) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.path = state_dir / "index.db"
        self._idle: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        with self._read() as db:
            db.executescript(SCHEMA)  # IF NOT EXISTS: safe when processes race to create it

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
        configure(db, 60)
        return db

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A pooled connection: FUSE serves from short-lived threads, and a connect costs ~1 ms."""
        try:
            db = self._idle.get_nowait()
        except queue.Empty:
            db = self._connect()
        try:
            yield db
        finally:
            self._idle.put(db)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: writers queue instead of failing on a lock upgrade."""
        with self._read() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return

    # -- meta -------------------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        with self._read() as db:
            found = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return found[0] if found else None

    def set_meta(self, values: dict[str, str]) -> None:
        with self._write() as db:
            db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", list(values.items()))

    # -- UFS metadata ---------------------------------------------------------------------------

    def files(self) -> dict[str, FileMeta]:
        with self._read() as db:
            rows = db.execute("SELECT path, mount, key, size, mtime, version FROM files").fetchall()
        return {row[0]: FileMeta(*row) for row in rows}

    def replace_files(self, listed: Iterable[FileMeta], meta: dict[str, str]) -> list[str]:
        """Store a fresh listing; returns the paths whose cached copies are now stale (changed or gone)."""
        fresh = {entry.path: entry for entry in listed}
        with self._write() as db:
            old = {row[0]: row[1] for row in db.execute("SELECT path, version FROM files")}
            stale = [path for path, version in old.items() if path not in fresh or fresh[path].version != version]
            db.execute("DELETE FROM files")
            db.executemany(
                "INSERT INTO files (path, mount, key, size, mtime, version) VALUES (?, ?, ?, ?, ?, ?)",
                [(e.path, e.mount, e.key, e.size, e.mtime, e.version) for e in fresh.values()],
            )
            cached = {row[0]: row[1] for row in db.execute("SELECT path, version FROM cache")}
            stale = sorted({*stale, *(p for p, v in cached.items() if p not in fresh or fresh[p].version != v)})
            db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", list(meta.items()))
        return stale

    def put_file(self, entry: FileMeta) -> None:
        with self._write() as db:
            db.execute(
                "INSERT OR REPLACE INTO files (path, mount, key, size, mtime, version) VALUES (?, ?, ?, ?, ?, ?)",
                (entry.path, entry.mount, entry.key, entry.size, entry.mtime, entry.version),
            )
            db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")

    def remove_file(self, path: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM files WHERE path = ?", (path,))
            db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")

    # -- cache entries ------------------------------------------------------------------------

    def entry(self, path: str) -> CacheRow | None:
        with self._read() as db:
            found = db.execute(f"SELECT {_CACHE_COLUMNS} FROM cache WHERE path = ?", (path,)).fetchone()
        return _row(found) if found else None

    def entries(self, tier: int | None = None) -> list[CacheRow]:
        with self._read() as db:
            if tier is None:
                rows = db.execute(f"SELECT {_CACHE_COLUMNS} FROM cache").fetchall()
            else:
                rows = db.execute(
                    f"SELECT {_CACHE_COLUMNS} FROM cache WHERE tier = ? ORDER BY last_access", (tier,)
                ).fetchall()
        return [_row(row) for row in rows]

    def put_complete(self, rows: Iterable[CacheRow]) -> None:
        """Record whole files just cached (many in one transaction: a DataLoad commits in batches)."""
        with self._write() as db:
            db.executemany(
                f"INSERT OR REPLACE INTO cache ({_CACHE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?)",
                [
                    (r.path, r.version, r.tier, r.size, r.block_size, bytes(r.present), r.crcs.tobytes(), r.last_access)
                    for r in rows
                ],
            )

    def merge_blocks(
        self, path: str, version: str, tier: int, size: int, block_size: int, blocks: dict[int, int]
    ) -> CacheRow:
        """Add blocks (index → CRC32C) of a partly cached file; other processes' blocks are kept."""
        count = block_count(size, block_size)
        with self._write() as db:
            found = db.execute(f"SELECT {_CACHE_COLUMNS} FROM cache WHERE path = ?", (path,)).fetchone()
            row = _row(found) if found else None
            if row is None or row.version != version or row.tier != tier or row.block_size != block_size:
                row = CacheRow(
                    path, version, tier, size, block_size, bytearray(count), array("I", [0] * count), False, time.time()
                )
            for block, crc in blocks.items():
                row.present[block] = 1
                row.crcs[block] = crc
            row.complete = row.complete or all(row.present)
            db.execute(
                f"INSERT OR REPLACE INTO cache ({_CACHE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    row.path, row.version, row.tier, row.size, row.block_size, bytes(row.present), row.crcs.tobytes(),
                    int(row.complete), time.time(),
                ),
            )
        return row

    def drop_blocks(self, path: str, version: str, blocks: Iterable[int]) -> None:
        """Forget blocks found corrupt, so the next read fetches them again."""
        with self._write() as db:
            found = db.execute(f"SELECT {_CACHE_COLUMNS} FROM cache WHERE path = ?", (path,)).fetchone()
            if not found:
                return
            row = _row(found)
            if row.version != version:
                return
            for block in blocks:
                row.present[block] = 0
            db.execute("UPDATE cache SET present = ? WHERE path = ?", (bytes(row.present), path))

    def move(self, path: str, from_tier: int, to_tier: int) -> None:
        with self._write() as db:
            db.execute("UPDATE cache SET tier = ? WHERE path = ? AND tier = ?", (to_tier, path, from_tier))

    def forget(self, paths: Iterable[str]) -> None:
        with self._write() as db:
            db.executemany("DELETE FROM cache WHERE path = ?", [(p,) for p in paths])

    def forget_all(self) -> None:
        with self._write() as db:
            db.execute("DELETE FROM cache")

    def usage(self) -> dict[int, int]:
        """Bytes held per tier (a partly cached file counts whole: its space is reserved)."""
        usage: dict[int, int] = {}
        with self._read() as db:
            rows = db.execute("SELECT tier, SUM(size) FROM cache GROUP BY tier").fetchall()
        for tier, held in rows:
            usage[tier] = held
        return usage

    def touch(self, accessed: dict[str, float]) -> None:
        """Record reads for LRU (batched by the reader: one transaction for many opens)."""
        with self._write() as db:
            db.executemany(
                "UPDATE cache SET last_access = max(last_access, ?) WHERE path = ?",
                [(t, p) for p, t in accessed.items()],
            )

    # -- counters -----------------------------------------------------------------------------

    def add_counters(self, deltas: dict[str, int]) -> None:
        with self._write() as db:
            db.executemany(
                "INSERT INTO counters (name, value) VALUES (?, ?)"
                " ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                list(deltas.items()),
            )

    def counters(self) -> dict[str, int]:
        with self._read() as db:
            return dict(db.execute("SELECT name, value FROM counters").fetchall())

    def reset_counters(self) -> None:
        with self._write() as db:
            db.execute("DELETE FROM counters")

"""Every SQLite file millpond opens becomes WAL even while another process writes it.

Turning a file to WAL writes its header; a connection asking to do so while another holds the
write lock gets SQLITE_BUSY at once, whatever its busy_timeout (SQLite will not wait holding a
read lock). Two ``millpond run`` on a fresh home met that in CI ("the metadata database … failed:
database is locked"). Each test holds the write lock of a file that is not yet WAL from a second
connection, as the racing process did, and lets go a moment later: the opener must wait for it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from millpond.store.sqlite_wal import use_wal

_HELD_S = 0.4


@contextmanager
def _write_lock_held(path: Path, for_s: float | None) -> Iterator[None]:
    """Hold ``path``'s write lock (rollback journal, as a new file is) from another connection,
    letting go after ``for_s`` seconds (never, when None, until the block ends)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE IF NOT EXISTS first_writer (x)")
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO first_writer VALUES (1)")
    release = threading.Timer(for_s, lambda: other.execute("COMMIT")) if for_s is not None else None
    if release:
        release.start()
    try:
        yield
    finally:
        if release:
            release.join()
        else:
            other.execute("ROLLBACK")
        other.close()


def _journal_mode(path: Path) -> str:
    with sqlite3.connect(path) as db:
        return str(db.execute("PRAGMA journal_mode").fetchone()[0])


def test_sqlite_itself_answers_busy_at_once_without_waiting(tmp_path: Path) -> None:
    """What the remedy is for: the plain pragma fails though its busy_timeout is 30 s."""
    path = tmp_path / "plain.db"
    with _write_lock_held(path, for_s=None):
        db = sqlite3.connect(path, timeout=30)
        db.execute("PRAGMA busy_timeout=30000")
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            db.execute("PRAGMA journal_mode=WAL")
        db.close()


def test_use_wal_waits_for_the_writer_then_switches(tmp_path: Path) -> None:
    path = tmp_path / "waits.db"
    with _write_lock_held(path, for_s=_HELD_S):
        db = sqlite3.connect(path, timeout=30, isolation_level=None)
        use_wal(db, timeout_s=30)
    assert _journal_mode(path) == "wal"
    assert db.execute("SELECT count(*) FROM first_writer").fetchone() == (1,)  # the writer's row committed
    db.close()


def test_use_wal_gives_up_at_its_timeout_with_sqlites_error(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    with _write_lock_held(path, for_s=None):
        db = sqlite3.connect(path, timeout=0.1)
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            use_wal(db, timeout_s=0.3)
        db.close()
    assert _journal_mode(path) == "delete"


def test_an_error_other_than_busy_is_not_retried(tmp_path: Path) -> None:
    path = tmp_path / "not-a-database.db"
    path.write_bytes(b"this is not SQLite" * 100)
    db = sqlite3.connect(path)
    with pytest.raises(sqlite3.DatabaseError, match="not a database"):
        use_wal(db, timeout_s=30)
    db.close()


def _metadata_database(home: Path) -> tuple[Path, Callable[[], object]]:
    from millpond.store.journal import open_journal

    path = home / "millpond.db"
    return path, lambda: open_journal(f"sqlite:///{path}")


def _run_journal(home: Path) -> tuple[Path, Callable[[], object]]:
    from millpond.store.journal import SqliteJournal

    path = home / "journal.db"
    return path, lambda: SqliteJournal(path)


def _resource_ledger(home: Path) -> tuple[Path, Callable[[], object]]:
    from millpond.scheduling import Ledger

    ledger = Ledger()
    return ledger.path, ledger.grants


def _cache_index(home: Path) -> tuple[Path, Callable[[], object]]:
    from millpond.datasets.cache.index import CacheIndex

    state = home / "datasets" / "demo"
    return state / "index.db", lambda: CacheIndex(state)


@pytest.mark.parametrize("opener", [_metadata_database, _run_journal, _resource_ledger, _cache_index],
                         ids=["metadata database", "run journal", "resource ledger", "dataset cache index"])
def test_each_sqlite_file_opens_while_another_process_creates_it(
    home: Path, opener: Callable[[Path], tuple[Path, Callable[[], object]]],
) -> None:
    from millpond.store.db import forget_engines

    path, open_it = opener(home)
    try:
        with _write_lock_held(path, for_s=_HELD_S):
            open_it()
        assert _journal_mode(path) == "wal"
    finally:
        forget_engines()

"""Put a SQLite connection's file in WAL mode, safely when several processes open a new file at once.

Every SQLite file millpond keeps (the metadata database and its run journal, a dataset's cache
index, the resource ledger) is switched to WAL on each connect (``configure``), so that readers
never wait for a writer. On a file that is not yet WAL, the switch writes its header: the
connection takes a read lock, then asks to write. If another process holds the write lock at
that moment, SQLite answers SQLITE_BUSY at once and does not call the busy handler, since
waiting while holding the read lock could deadlock (https://sqlite.org/c3ref/busy_handler.html).
``busy_timeout`` therefore does not cover it: two ``millpond run`` started together on a fresh
home failed about once in a hundred with "database is locked". The remedy SQLite documents is to
let go and try again, which this does until the timeout the caller already gives every other
wait. Once the file is WAL, which lasts, the pragma changes nothing and needs no write lock.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

_FIRST_PAUSE_S = 0.002
_LONGEST_PAUSE_S = 0.05


def configure(db: Any, timeout_s: float) -> None:
    """What every SQLite connection of millpond's runs with: wait up to ``timeout_s`` for another
    writer, WAL (readers never wait for a writer), and ``synchronous=NORMAL`` (a power cut may lose
    the last commits, never corrupts the file). ``db``: a stdlib sqlite3 connection or cursor."""
    db.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
    use_wal(db, timeout_s)
    db.execute("PRAGMA synchronous=NORMAL")


def use_wal(db: Any, timeout_s: float) -> None:
    """Run ``PRAGMA journal_mode=WAL`` on ``db`` (a stdlib sqlite3 connection or cursor), trying
    again while the file is busy, for up to ``timeout_s``; any other error, or a busy file past
    that time, is raised as SQLite gave it."""
    deadline = time.monotonic() + timeout_s
    pause = _FIRST_PAUSE_S
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL").fetchall()
            return
        except sqlite3.OperationalError as exc:
            busy = (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == sqlite3.SQLITE_BUSY  # or an extended BUSY code
            if not busy or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, _LONGEST_PAUSE_S)

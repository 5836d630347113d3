"""Open the metadata database: SQLite in WAL mode by default, migrated to the newest schema.

Several millpond processes may share one home, so migrations run under a file lock and
SQLite waits (busy_timeout) instead of failing when another writer holds the lock.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock

if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
HEAD_REVISION = "0009"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _current_revision(engine: "Engine") -> str | None:
    from sqlalchemy import text

    with engine.connect() as conn:
        try:
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        except Exception:  # no alembic_version table yet: a new database
            return None


def _migrate(engine: "Engine") -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "head")


@functools.cache
def get_engine(url: str) -> "Engine":
    """One engine per URL and process; the schema is brought to head on first use."""
    from sqlalchemy import create_engine, event

    if url.startswith("sqlite:///"):
        db_path = Path(url.removeprefix("sqlite:///"))
        db_path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        lock = FileLock(str(db_path) + ".migrate.lock")
    else:
        engine = create_engine(url, pool_pre_ping=True)
        lock = None
    if _current_revision(engine) != HEAD_REVISION:
        if lock is None:
            _migrate(engine)
        else:
            with lock:
                if _current_revision(engine) != HEAD_REVISION:
                    _migrate(engine)
    return engine


def session_factory(url: str) -> "sessionmaker[Session]":
    from sqlalchemy.orm import sessionmaker

    return sessionmaker(bind=get_engine(url), expire_on_commit=False)

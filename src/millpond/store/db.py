"""Open the metadata database: SQLite in WAL mode by default, PostgreSQL when
``MILLPOND_DATABASE_URL`` names one; either is migrated to the newest schema on first use.

Several millpond processes may share one database, so migrations run under a lock — a file
lock beside a SQLite file, a transaction-scoped advisory lock on PostgreSQL (processes on
other machines share the database, not a file system) — and the revision is read again
once the lock is held. SQLite waits (busy_timeout) instead of failing when another writer
holds its lock; PostgreSQL's row locks need no such setting.

A URL is user input and carries a password: every message here names it through
:func:`redacted`, and a URL that cannot be used is one error line (``UserError`` when it is
malformed or names a driver that is not installed, ``UnavailableError`` when the server does
not answer), never a traceback.
"""

from __future__ import annotations

import re
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock

from millpond.errors import MillpondError, UnavailableError, UserError
from millpond.settings import load_settings
from millpond.store.sqlite_wal import configure

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine
    from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
HEAD_REVISION = "0016"
_MIGRATION_LOCK_KEY = 0x6D696C6C706F6E64  # "millpond": the advisory lock every migrating process takes
_PASSWORD = re.compile(r"(?P<head>://[^/@:]*):[^@/]*@")
_ENGINES: dict[str, "Engine"] = {}
_ENGINES_LOCK = threading.Lock()
_BUSY_TIMEOUT_S = 30  # how long a SQLite connection waits for another writer


def redacted(url: str) -> str:
    """``url`` with its password replaced by ``***`` (what any message may show of it)."""
    return _PASSWORD.sub(r"\g<head>:***@", url)


def driver_url(url: str) -> str:
    """The URL SQLAlchemy is given: ``postgresql://`` and ``postgres://`` mean psycopg 3 (the postgres extra)."""
    for scheme in ("postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+psycopg://" + url.removeprefix(scheme)
    return url


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    configure(cursor, _BUSY_TIMEOUT_S)
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _revision(conn: "Connection") -> str | None:
    from sqlalchemy import inspect, text  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

    if not inspect(conn).has_table("alembic_version"):
        return None  # a new database
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def _current_revision(engine: "Engine") -> str | None:
    with engine.connect() as conn:
        return _revision(conn)


def _migrate(engine: "Engine") -> None:
    from alembic import command  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)
    from alembic.config import Config  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)
    from sqlalchemy import text  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Held until this transaction ends: a second engine starting beside this one waits here,
            # then finds the schema at head. DDL is transactional on PostgreSQL, so a killed
            # migration leaves the database as it was.
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
            if _revision(conn) == HEAD_REVISION:
                return
        else:
            # SQLite rebuilds a table to change its constraints (a batch migration): the old table is dropped
            # while other tables refer to it, which foreign keys must not check meanwhile (SQLite's documented
            # procedure). Set before the first write, so outside any transaction; the connection is closed below.
            conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
    engine.dispose()  # no pooled connection keeps foreign keys off


def _create_engine(url: str) -> "Engine":
    from sqlalchemy import create_engine, event  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

    if url.startswith("sqlite:///"):
        db_path = Path(url.removeprefix("sqlite:///"))
        db_path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": _BUSY_TIMEOUT_S})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    shown = redacted(url)
    try:
        if url.startswith("postgresql"):
            # connect_timeout: an unreachable host is one error line in seconds, not a hang. timezone=UTC:
            # times come back in UTC whatever the server's TimeZone, as millpond shows them (and SQLite has them).
            options = {"connect_timeout": 10, "options": "-c timezone=UTC"}
            return create_engine(driver_url(url), pool_pre_ping=True, connect_args=options)
        return create_engine(url, pool_pre_ping=True)
    except ModuleNotFoundError as exc:
        raise UserError(
            f"the database URL {shown} needs the Python module {exc.name!r}: pip install 'millpond[postgres]'"
            if url.startswith("postgres") else f"the database URL {shown} needs the Python module {exc.name!r}"
        ) from None
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise UserError(
            f"the database URL {shown} (MILLPOND_DATABASE_URL) is not one millpond can use ({_first_line(exc)}); "
            "give sqlite:///PATH or postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
        ) from None


def _first_line(exc: BaseException) -> str:
    """The first line of an error's message, any URL in it without its password."""
    lines = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return redacted(lines[0]) if lines else type(exc).__name__


def _unreachable(url: str, exc: BaseException) -> UnavailableError:
    """The error for a database that does not answer, naming it without its password."""
    return UnavailableError(f"the database {redacted(url)} (MILLPOND_DATABASE_URL) cannot be used: {_first_line(exc)}")


def database_failure(exc: BaseException) -> MillpondError | None:
    """The one-line error for a metadata database that failed under a command or a request (the
    server went away, refused a connection, a lock timed out: UnavailableError), or refused a value
    (PostgreSQL, unlike SQLite, holds a VARCHAR to its length and text to no NUL: UserError);
    None for any other exception.

    SQLAlchemy's own message carries the statement and its parameters; this names the database
    (password hidden) and the driver's first line only. SQLAlchemy is not imported for the check.
    """
    errors = sys.modules.get("sqlalchemy.exc")
    if errors is None:
        return None
    if isinstance(exc, errors.DataError):
        return UserError(f"the metadata database cannot store a value given: {_first_line(exc)}")
    if not isinstance(exc, (errors.OperationalError, errors.InterfaceError)):
        return None

    url = redacted(load_settings().database_url)
    return UnavailableError(f"the metadata database {url} failed: {_first_line(exc)}")


def get_engine(url: str) -> "Engine":
    """One engine per URL and process; the schema is brought to head on first use."""
    with _ENGINES_LOCK:
        engine = _ENGINES.get(url)
        if engine is not None:
            return engine
        engine = _create_engine(url)
        from sqlalchemy.exc import DBAPIError  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        try:
            if url.startswith("sqlite:///"):
                if _current_revision(engine) != HEAD_REVISION:
                    with FileLock(url.removeprefix("sqlite:///") + ".migrate.lock"):
                        if _current_revision(engine) != HEAD_REVISION:
                            _migrate(engine)
            elif _current_revision(engine) != HEAD_REVISION:
                _migrate(engine)
        except DBAPIError as exc:
            engine.dispose()
            if not url.startswith("sqlite:///"):
                raise _unreachable(url, exc) from None
            raise
        _ENGINES[url] = engine
        return engine


def prepare_orm() -> None:
    """Configure the ORM's mappers now (some 30 ms the first query of a process pays otherwise): called by the
    warm parent of detached supervisors (``runners.zygote``) before it forks, so its children query at once.
    Pure Python: no connection, no thread."""
    from sqlalchemy.orm import configure_mappers  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

    import millpond.store.models  # noqa: F401, PLC0415 - the mappers to configure

    configure_mappers()


def forget_engines() -> None:
    """Close every engine's pooled connections and forget the engines (tests drop their databases)."""
    with _ENGINES_LOCK:
        engines = list(_ENGINES.values())
        _ENGINES.clear()
    for engine in engines:
        engine.dispose()


def session_factory(url: str) -> "sessionmaker[Session]":
    from sqlalchemy.orm import sessionmaker  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

    return sessionmaker(bind=get_engine(url), expire_on_commit=False)

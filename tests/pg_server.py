"""A real PostgreSQL server for the tests: Debian's binaries, one server a session, a fresh database a test.

``initdb`` writes a cluster into a temporary folder and ``postgres`` serves it on a free local
port (TCP on 127.0.0.1, its Unix socket in the same folder), with a password, so the tests see
what a user's ``MILLPOND_DATABASE_URL`` carries. PostgreSQL refuses to run as root: as root (CI)
the server runs as the ``postgres`` user Debian's package creates (``nobody`` when it is
missing), through ``setpriv``, on a folder chowned to it. The server is stopped by its pid.

Missing binaries fail the test naming the install line; ``MILLPOND_TEST_NO_PG=1`` skips instead,
for a machine that deliberately runs without PostgreSQL.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

INSTALL_LINE = "apt-get install -y postgresql (or: bash scripts/setup.sh test, as root)"
PASSWORD = "pg-test-Secr3t-pw"  # tests assert this never shows in what millpond prints
USER = "millpond"


def server_binaries() -> Path | None:
    """The folder holding ``initdb`` and ``postgres``: Debian's newest version, else the PATH's."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("postgres")
    return Path(on_path).parent if on_path and shutil.which("initdb") else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _as_server_user() -> tuple[list[str], int | None, int | None]:
    """The command prefix that drops root (and the uid/gid to chown to), or nothing when not root."""
    if os.geteuid() != 0:
        return [], None, None
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        prefix = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups", "--"]
        return prefix, entry.pw_uid, entry.pw_gid
    raise RuntimeError("running as root with neither a postgres nor a nobody user to run PostgreSQL as")


@dataclass
class PgServer:
    """A running server: ``url(database)`` is what MILLPOND_DATABASE_URL would hold."""

    port: int
    folder: Path
    process: subprocess.Popen[bytes]

    def url(self, database: str = "postgres", password: str = PASSWORD) -> str:
        return f"postgresql://{USER}:{password}@127.0.0.1:{self.port}/{database}"

    def admin(self, sql: str) -> None:
        """Run one statement outside a transaction (CREATE/DROP DATABASE need that)."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def new_database(self) -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        self.admin(f"CREATE DATABASE {name} TEMPLATE template0")
        return name

    def drop_database(self, name: str) -> None:
        self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # "fast" shutdown: ends sessions, then exits
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def start_server() -> PgServer:
    binaries = server_binaries()
    if binaries is None:
        if os.environ.get("MILLPOND_TEST_NO_PG") == "1":
            pytest.skip("MILLPOND_TEST_NO_PG=1: the PostgreSQL runs of these tests are skipped")
        pytest.fail(f"PostgreSQL server binaries (initdb, postgres) not found; install them with: {INSTALL_LINE}")
    prefix, uid, gid = _as_server_user()
    folder = Path(tempfile.mkdtemp(prefix="millpond-pg-"))
    data, pwfile = folder / "data", folder / "pwfile"
    pwfile.write_text(PASSWORD + "\n")
    if uid is not None and gid is not None:
        for path in (folder, pwfile):
            os.chown(path, uid, gid)
    setup = subprocess.run(
        [*prefix, str(binaries / "initdb"), "-D", str(data), "-U", USER, f"--pwfile={pwfile}",
         "--auth=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"],
        capture_output=True, text=True, timeout=120,
    )
    if setup.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {setup.stderr.strip() or setup.stdout.strip()}")
    port = _free_port()
    log = open(folder / "server.log", "wb")
    process = subprocess.Popen(
        [*prefix, str(binaries / "postgres"), "-D", str(data), "-k", str(folder), "-p", str(port),
         "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300",
         # not UTC, and not a whole hour from it: a time millpond reads back in the server's zone shows
         "-c", "timezone=Asia/Kolkata",
         # a test server: durability is not what is under test, and fsync costs seconds on a shared disk
         "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    log.close()
    server = PgServer(port=port, folder=folder, process=process)
    deadline = time.monotonic() + 60
    while True:
        try:
            server.admin("SELECT 1")
            return server
        except Exception as exc:
            if process.poll() is not None or time.monotonic() > deadline:
                output = (folder / "server.log").read_text(errors="replace")[-2000:]
                server.stop()
                raise RuntimeError(f"PostgreSQL did not start ({exc}): {output}") from exc
            time.sleep(0.1)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    server = start_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh, empty database on the session's server; dropped (its connections ended) after the test."""
    from millpond.store.db import forget_engines

    name = pg_server.new_database()
    try:
        yield pg_server.url(name)
    finally:
        forget_engines()
        pg_server.drop_database(name)

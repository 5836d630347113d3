"""MILLPOND_DATABASE_URL: PostgreSQL shared by several processes, and a URL that cannot be used.

A bad URL is one ``error:`` line naming it without its password — exit 2 when it is malformed
or names a driver that is not here, exit 1 when the server does not take it — and the
password shows nowhere: not in errors, ``millpond config view``, the API or the database.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from millpond.store.db import get_engine, redacted
from tests.conftest import PIPELINES, spawn_cli
from tests.pg_server import PASSWORD, PgServer, start_server
from tests.server_support import Served

pytestmark = pytest.mark.postgresql


@pytest.fixture
def on_pg(home, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """This test's home keeps its metadata in a fresh PostgreSQL database."""
    monkeypatch.setenv("MILLPOND_DATABASE_URL", pg_url)
    return pg_url


def database_text(url: str) -> str:
    """Every row of every table, as text: what reading the raw database would show."""
    engine = get_engine(url)
    with engine.connect() as conn:
        return "\n".join(
            repr(row) for table in inspect(conn).get_table_names()
            for row in conn.execute(text(f'SELECT * FROM "{table}"'))
        )


@pytest.mark.parametrize(
    ("url", "code", "says"),
    [
        ("postgresql://millpond:PW@127.0.0.1:notaport/db", 2, "invalid literal for int()"),
        ("mysql+nothere://millpond:PW@127.0.0.1/db", 2, "Can't load plugin"),
        ("no url at all", 2, "give sqlite:///PATH or postgresql://"),
        ("postgresql://millpond:PW@127.0.0.1:1/db", 1, "cannot be used: connection failed"),
    ],
)
def test_an_unusable_url_is_one_line_without_its_password(cli, url: str, code: int, says: str) -> None:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MILLPOND_DATABASE_URL", url.replace("PW", PASSWORD))
        result = cli("runs", "list")
    assert result.code == code, result.err
    assert result.err.startswith("error: ") and result.err.count("\n") == 1, result.err
    assert says in result.err and redacted(url.replace("PW", PASSWORD)) in result.err
    assert PASSWORD not in result.err + result.out and "Traceback" not in result.err


@pytest.mark.parametrize(
    ("url", "code"),
    [("postgresql://millpond:PW@127.0.0.1:notaport/db", 2), ("postgresql://millpond:PW@127.0.0.1:1/db", 1)],
)
def test_arena_with_an_unusable_url_is_one_line_without_its_password(home: Path, url: str, code: int) -> None:
    """``arena`` is a console script of its own: it must fail as ``millpond`` does, not with a traceback."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "MILLPOND_HOME": str(home), "MILLPOND_DATABASE_URL": url.replace("PW", PASSWORD)}
    result = subprocess.run(
        [sys.executable, "-c", "from millpond.cli.arena import main; main()", "list"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == code, result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert PASSWORD not in result.stderr + result.stdout and "Traceback" not in result.stderr


def test_a_wrong_password_or_database_is_one_line(cli, pg_server: PgServer, monkeypatch) -> None:
    monkeypatch.setenv("MILLPOND_DATABASE_URL", pg_server.url("postgres", password="not-" + PASSWORD))
    wrong = cli("runs", "list")
    assert (wrong.code, wrong.err.count("\n")) == (1, 1), wrong.err
    assert 'password authentication failed for user "millpond"' in wrong.err
    assert PASSWORD not in wrong.err and "postgresql://millpond:***@127.0.0.1" in wrong.err
    monkeypatch.setenv("MILLPOND_DATABASE_URL", pg_server.url("no_such_database"))
    missing = cli("runs", "list")
    assert (missing.code, missing.err.count("\n")) == (1, 1), missing.err
    assert 'database "no_such_database" does not exist' in missing.err and PASSWORD not in missing.err


def test_config_view_and_the_api_never_show_the_password(cli, on_pg: str) -> None:
    viewed = cli("config", "view")
    assert viewed.code == 0 and f"database: {redacted(on_pg)}\n" in viewed.out and PASSWORD not in viewed.out
    ran = cli("run", PIPELINES / "typed_params.py", "--pipeline", "returns_int", "-o", "json")
    assert ran.code == 0, ran.err
    served = Served()
    try:
        for path in ("/apis/v2beta1/runs", "/apis/v2beta1/experiments", "/apis/v2beta1/healthz"):
            with urllib.request.urlopen(served.url + path, timeout=30) as response:
                body = response.read().decode()
            assert PASSWORD not in body
        with urllib.request.urlopen(f"{served.url}/apis/v2beta1/runs", timeout=30) as response:
            assert ran.json()["run_id"] in response.read().decode()  # the server reads the shared database
    finally:
        served.stop()


def test_secrets_a_pipeline_reads_never_reach_the_database(cli, on_pg: str) -> None:
    """Secrets live in the home (0600 files); a run that uses one leaves no value in the shared database."""
    value = "s3cr3t-value-in-no-row"
    assert cli("secret", "create", "db-creds", "--from-literal", "username=u",
               "--from-literal", f"password={value}").code == 0
    assert cli("configmap", "create", "app-settings", "--from-literal", "level=debug").code == 0
    result = cli("run", PIPELINES / "platform_secrets.py", "--pipeline", "platform_secrets", "-o", "json")
    assert result.code == 0, result.err
    stored = database_text(on_pg)
    assert result.json()["run_id"] in stored  # the run is there ...
    assert value not in stored  # ... its secret is not


def test_engines_in_two_processes_migrate_an_empty_database_once_and_share_it(cli, home, on_pg: str) -> None:
    """Two processes open one empty PostgreSQL database at once: one migrates (under an advisory lock),
    the other waits and finds the schema at head; both runs land in the one database."""
    runs = [spawn_cli(home, "run", PIPELINES / "typed_params.py", "--pipeline", "returns_int", "-p", f"i={i}",
                      "-o", "json") for i in range(2)]
    results = [run.communicate(timeout=300) for run in runs]
    for run, (_out, err) in zip(runs, results, strict=True):
        assert run.returncode == 0, err
    ids = {json.loads(out)["run_id"] for out, _ in results}
    listed = cli("runs", "list", "-o", "json").json()
    assert {run["run_id"] for run in listed} == ids
    # times read back in UTC, though the test server's TimeZone is Asia/Kolkata (+05:30)
    assert all(run["created_at"].endswith("+00:00") for run in listed), listed


def test_a_database_that_goes_away_mid_run_is_one_line(home: Path, tmp_path: Path, monkeypatch) -> None:
    """Its own server, stopped while a run's task sleeps: the engine says so in one line, exit 1."""
    own = start_server()
    try:
        monkeypatch.setenv("MILLPOND_DATABASE_URL", own.url(own.new_database()))
        run = spawn_cli(home, "run", PIPELINES / "cancellable.py", "--pipeline", "cancellable",
                        "-p", f"folder={tmp_path}", "-p", "seconds=4")
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob("*.pids")) and run.poll() is None:  # its tasks have started
            assert time.monotonic() < deadline, "no task started"
            time.sleep(0.1)
        own.stop()
        _out, err = run.communicate(timeout=120)
    finally:
        own.stop()
    lines = [line for line in err.splitlines() if "FutureWarning" not in line and "@dsl.component" not in line]
    assert run.returncode == 1, err
    assert lines[-1].startswith("error: the metadata database postgresql://millpond:***@127.0.0.1:"), err
    assert "Traceback" not in err and PASSWORD not in err


def _listed(served: Served, path: str, *predicates: dict) -> tuple[int, dict]:
    query = urllib.parse.quote(json.dumps({"predicates": list(predicates)}))
    try:
        with urllib.request.urlopen(f"{served.url}{path}?filter={query}", timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_list_filters_compare_like_with_like_on_both_databases(cli, database: str) -> None:
    """A time field takes RFC 3339 or epoch seconds, a text field any scalar as text; what cannot match is a 400
    (PostgreSQL refuses to compare a time with text, SQLite compared anything and answered nothing)."""
    ran = cli("run", PIPELINES / "typed_params.py", "--pipeline", "returns_int", "-o", "json")
    assert ran.code == 0, ran.err
    run_id = ran.json()["run_id"]
    served = Served()
    try:
        for later in ({"timestamp_value": "2001-01-01T00:00:00Z"}, {"int_value": 978307200}):
            status, body = _listed(served, "/apis/v2beta1/runs", {"key": "created_at", "operation": "GREATER_THAN",
                                                                  **later})
            assert (status, [r["run_id"] for r in body.get("runs", [])]) == (200, [run_id]), body
        early = {"key": "created_at", "operation": "LESS_THAN", "timestamp_value": "2001-01-01T00:00:00"}
        status, body = _listed(served, "/apis/v2beta1/runs", early)
        assert (status, body.get("runs") or []) == (200, []), body
        status, body = _listed(served, "/apis/v2beta1/experiments", {"key": "name", "operation": "IN",
                                                                     "int_values": {"values": [1, 2]}})
        assert (status, body.get("experiments") or []) == (200, []), body
        for refused, said in (
            ({"key": "created_at", "operation": "IS_SUBSTRING", "string_value": "20"}, "is a time"),
            ({"key": "created_at", "operation": "EQUALS", "string_value": "yesterday"}, "is a time"),
            ({"key": "name", "operation": "EQUALS", "string_value": "a\x00b"}, "NUL character"),
        ):
            for path in ("/apis/v2beta1/runs", "/apis/v2beta1/experiments", "/apis/v2beta1/pipelines",
                         "/apis/v2beta1/recurringruns"):
                status, body = _listed(served, path, refused)
                assert status == 400 and said in json.dumps(body), (path, refused, body)
    finally:
        served.stop()


def test_a_run_whose_engine_is_on_another_machine_is_left_to_that_machine(cli, on_pg: str) -> None:
    """The database is shared; pids are not. A RUNNING run whose engine mark names another machine is
    neither taken over by a server starting here, nor terminated, resumed or signalled from here."""
    import subprocess

    from millpond.runners.processes import machine, start_ticks
    from millpond.store.runs import RunStore

    ran = cli("run", PIPELINES / "typed_params.py", "--pipeline", "returns_int", "-o", "json")
    assert ran.code == 0, ran.err
    store = RunStore(on_pg)
    assert store.get_run(ran.json()["run_id"]).engine_start.endswith(f"@{machine()}")  # the engine's own mark
    bystander = subprocess.Popen(["sleep", "120"])  # a live local pid, as the remote engine's pid might be here
    try:
        run = store.create_run(name="remote", experiment="Default", pipeline_name="p", pipeline_spec={},
                               platform_spec=None, parameters={}, pipeline_root="s3://shared/root")
        store.update_run(run.id, state="RUNNING", engine_pid=bystander.pid,
                         engine_start=f"{start_ticks(bystander.pid)}@0therMachine")
        for action in ("terminate", "resume", "delete"):
            refused = cli("runs", action, run.id)
            assert refused.code == 2 and refused.err.splitlines()[-1].startswith("error: "), (action, refused.err)
            assert "Traceback" not in refused.err
        assert "RUNNING on another machine (engine process" in cli("runs", "terminate", run.id).err
        served = Served()  # resumes orphaned runs at start: this one is not an orphan of this machine
        try:
            time.sleep(3)
        finally:
            served.stop()
        again = store.get_run(run.id)
        assert (again.state, again.engine_pid) == ("RUNNING", bystander.pid)
        assert bystander.poll() is None, "a process of this machine was signalled for another machine's engine"
    finally:
        bystander.kill()
        bystander.wait()


def test_the_writer_connection_outlives_a_dropped_database_connection(on_pg: str, pg_server: PgServer) -> None:
    """A long-lived store (the server's) keeps one connection for the engine's writes; when PostgreSQL
    drops it (a restart, an idle timeout) the next write goes through on a new one."""
    from millpond.store.runs import RunStore

    store = RunStore(on_pg)
    run = store.create_run(name="r", experiment="Default", pipeline_name="p", pipeline_spec={}, platform_spec=None,
                           parameters={}, pipeline_root="/tmp/x")
    store.update_run(run.id, state="RUNNING")
    database = on_pg.rsplit("/", 1)[1]
    pg_server.admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'")
    store.update_run(run.id, state="SUCCEEDED")
    task = store.start_task(run_id=run.id, path="a", name="a", kind="container", component="c", parent_id=None)
    assert store.get_run(run.id).state == "SUCCEEDED" and [t.id for t in store.list_tasks(run.id)] == [task]

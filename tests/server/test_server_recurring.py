"""Recurring runs of ``millpond server``, driven by the real ``kfp.Client``, and the scheduler's rules."""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import datetime as dt
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

kfp = pytest.importorskip("kfp")
from kfp import compiler, dsl

from millpond.store.db import HEAD_REVISION
from tests.server.test_server_api import _request
from tests.server_support import Served, module_home, serving

API = "/apis/v2beta1"


@dsl.component
def add(a: int, b: int) -> int:
    return a + b


@dsl.component
def nap(seconds: float) -> str:
    import time

    time.sleep(seconds)
    return "woke"


@dsl.pipeline(name="adder")
def adder(x: int = 1, y: int = 2) -> int:
    return add(a=x, b=y).output


@dsl.pipeline(name="sleeper")
def sleeper(seconds: float = 60.0) -> str:
    return nap(seconds=seconds).output


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "recurring")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[Served]:
    yield from serving()


@pytest.fixture(scope="module")
def client(server: Served) -> Any:
    return kfp.Client(host=server.url)


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("packages")
    paths = {}
    for name, pipeline in (("adder", adder), ("sleeper", sleeper)):
        paths[name] = str(folder / f"{name}.yaml")
        compiler.Compiler().compile(pipeline, paths[name])
    return paths


def _runs_of(client: Any, experiment_id: str) -> list[Any]:
    return client.list_runs(experiment_id=experiment_id, page_size=100).runs or []


def _wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def test_crud_with_kfp_client(client: Any, packages: dict[str, str], home: Path) -> None:
    experiment = client.create_experiment("recurring-crud")
    job = client.create_recurring_run(
        experiment.experiment_id, "hourly", description="every hour", cron_expression="0 0 * * * *",
        max_concurrency=3, no_catchup=True, params={"x": 5}, pipeline_package_path=packages["adder"],
    )
    assert job.recurring_run_id and job.display_name == "hourly"
    assert job.status == "ENABLED" and job.mode == "ENABLE"
    assert job.trigger.cron_schedule.cron == "0 0 * * * *" and job.no_catchup is True
    assert not (home / "recurring").exists(), "recurring runs are rows of the database, not files"
    with sqlite3.connect(home / "millpond.db") as db:
        assert db.execute("SELECT name, cron, max_concurrency, enabled FROM recurring_runs WHERE id = ?",
                          (job.recurring_run_id,)).fetchall() == [("hourly", "0 0 * * * *", 3, 1)]

    got = client.get_recurring_run(job.recurring_run_id)
    assert got.max_concurrency == "3" and got.runtime_config.parameters == {"x": 5}
    assert got.experiment_id == experiment.experiment_id and got.description == "every hour"

    daily = client.create_recurring_run(
        experiment.experiment_id, "daily", interval_second=86400, pipeline_package_path=packages["adder"],
        enabled=False,
    )
    assert daily.status == "DISABLED" and daily.trigger.periodic_schedule.interval_second == "86400"
    listed = client.list_recurring_runs(experiment_id=experiment.experiment_id, sort_by="display_name")
    assert [r.display_name for r in listed.recurring_runs] == ["daily", "hourly"] and listed.total_size == 2
    first = client.list_recurring_runs(experiment_id=experiment.experiment_id, page_size=1, sort_by="display_name desc")
    assert [r.display_name for r in first.recurring_runs] == ["hourly"] and first.next_page_token
    second = client.list_recurring_runs(experiment_id=experiment.experiment_id, page_size=1,
                                        sort_by="display_name desc", page_token=first.next_page_token)
    assert [r.display_name for r in second.recurring_runs] == ["daily"] and not second.next_page_token
    named = client.list_recurring_runs(filter=json.dumps(
        {"predicates": [{"key": "display_name", "operation": "EQUALS", "string_value": "daily"}]}))
    assert [r.recurring_run_id for r in named.recurring_runs] == [daily.recurring_run_id]

    client.disable_recurring_run(job.recurring_run_id)
    assert client.get_recurring_run(job.recurring_run_id).status == "DISABLED"
    client.enable_recurring_run(job.recurring_run_id)
    assert client.get_recurring_run(job.recurring_run_id).status == "ENABLED"

    client.delete_recurring_run(job.recurring_run_id)
    client.delete_recurring_run(daily.recurring_run_id)
    with pytest.raises(Exception) as missing:
        client.get_recurring_run(job.recurring_run_id)
    assert getattr(missing.value, "status", None) == 404
    assert not client.list_recurring_runs(experiment_id=experiment.experiment_id).recurring_runs


def test_periodic_schedule_starts_runs_until_disabled(client: Any, packages: dict[str, str]) -> None:
    experiment = client.create_experiment("recurring-periodic")
    job = client.create_recurring_run(
        experiment.experiment_id, "every-2s", interval_second=2, max_concurrency=2, params={"x": 3, "y": 4},
        pipeline_package_path=packages["adder"],
    )
    runs = _wait_for(
        lambda: len(_runs_of(client, experiment.experiment_id)) >= 2 and _runs_of(client, experiment.experiment_id),
        15, "two scheduled runs",
    )
    client.disable_recurring_run(job.recurring_run_id)
    time.sleep(0.6)  # a tick in progress may still start one
    settled = len(_runs_of(client, experiment.experiment_id))
    for run in runs:
        assert run.display_name.startswith("every-2s-")
        done = client.wait_for_run_completion(run.run_id, timeout=60)
        assert done.state == "SUCCEEDED", done
        assert done.runtime_config.parameters == {"x": 3, "y": 4}
        assert done.recurring_run_id == job.recurring_run_id
    time.sleep(3)
    assert len(_runs_of(client, experiment.experiment_id)) == settled, "a disabled recurring run started a run"
    client.delete_recurring_run(job.recurring_run_id)


def test_cron_schedule_with_seconds(client: Any, packages: dict[str, str]) -> None:
    experiment = client.create_experiment("recurring-cron")
    job = client.create_recurring_run(
        experiment.experiment_id, "cron-2s", cron_expression="*/2 * * * * *", pipeline_package_path=packages["adder"],
        max_concurrency=5,
    )
    _wait_for(lambda: _runs_of(client, experiment.experiment_id), 15, "a run from the cron schedule")
    client.delete_recurring_run(job.recurring_run_id)


def test_an_every_descriptor_starts_runs_within_seconds(client: Any, packages: dict[str, str]) -> None:
    """robfig's ``@every`` (Kubeflow takes it; millpond answered 400)."""
    experiment = client.create_experiment("recurring-every")
    job = client.create_recurring_run(
        experiment.experiment_id, "every-2s", cron_expression="@every 2s", pipeline_package_path=packages["adder"],
        max_concurrency=5,
    )
    assert client.get_recurring_run(job.recurring_run_id).trigger.cron_schedule.cron == "@every 2s"
    _wait_for(lambda: len(_runs_of(client, experiment.experiment_id)) >= 2, 60, "two runs of '@every 2s'")
    client.delete_recurring_run(job.recurring_run_id)


def test_five_fields_are_read_seconds_first(client: Any, packages: dict[str, str]) -> None:
    """Kubeflow reads ``*/2 * * * *`` as second minute hour day-of-month month: every 2 seconds.
    millpond read it minute first, every 2 minutes: at most one run in any minute."""
    experiment = client.create_experiment("recurring-five-fields")
    job = client.create_recurring_run(
        experiment.experiment_id, "five-fields", cron_expression="*/2 * * * *", pipeline_package_path=packages["adder"],
        max_concurrency=10,
    )
    # 55 s hold at most one even minute: millpond's old reading could not start three runs in them.
    _wait_for(lambda: len(_runs_of(client, experiment.experiment_id)) >= 3, 55, "three runs of '*/2 * * * *'")
    client.delete_recurring_run(job.recurring_run_id)


def test_a_cron_kubeflow_refuses_answers_400_and_is_not_stored(server: Served, packages: dict[str, str]) -> None:
    url = f"{server.url}{API}/recurringruns"
    spec = yaml.safe_load(Path(packages["adder"]).read_text())
    before = _request(f"{url}?page_size=100")[1].get("total_size", 0)
    for cron, said in (("0 0 0 * * 7", "7 is above 6"), ("0 0 0 30 2 *", "never fires"),
                       ("0 0 * * * * *", "expected 5 to 6 fields"), ("@every banana", "not a Go duration")):
        body = {"display_name": "refused", "pipeline_spec": spec, "trigger": {"cron_schedule": {"cron": cron}}}
        status, answer = _request(url, "POST", body)
        assert status == 400 and said in answer["message"], (cron, status, answer)
    assert _request(f"{url}?page_size=100")[1].get("total_size", 0) == before


def test_max_concurrency_holds_runs_back(client: Any, packages: dict[str, str]) -> None:
    experiment = client.create_experiment("recurring-concurrency")
    job = client.create_recurring_run(
        experiment.experiment_id, "busy", interval_second=1, max_concurrency=1, no_catchup=True,
        params={"seconds": 4.0}, pipeline_package_path=packages["sleeper"],
    )
    first = _wait_for(lambda: _runs_of(client, experiment.experiment_id), 10, "the first run")
    time.sleep(2.5)  # the first run still sleeps: no second run may start
    assert len(_runs_of(client, experiment.experiment_id)) == 1
    assert client.wait_for_run_completion(first[0].run_id, timeout=60).state == "SUCCEEDED"
    _wait_for(lambda: len(_runs_of(client, experiment.experiment_id)) >= 2, 10, "the next run once the first ended")
    client.delete_recurring_run(job.recurring_run_id)
    for run in _runs_of(client, experiment.experiment_id):
        client.terminate_run(run.run_id)


def test_bad_bodies_answer_400(server: Served) -> None:
    spec = {"pipelineInfo": {"name": "x"}}
    url = f"{server.url}{API}/recurringruns"
    periodic = {"periodic_schedule": {"interval_second": "60"}}
    cases = [
        {"display_name": "a", "pipeline_spec": spec, "trigger": {"cron_schedule": {"cron": "not a cron"}}},
        {"display_name": "a", "pipeline_spec": spec, "trigger": {**periodic, "cron_schedule": {"cron": "0 * * * * *"}}},
        {"display_name": "a", "pipeline_spec": spec},
        {"display_name": "a", "pipeline_spec": spec, "trigger": {"periodic_schedule": {"interval_second": 0}}},
        {"display_name": "a", "pipeline_spec": spec, "trigger": periodic, "max_concurrency": "0"},
        {"display_name": "a", "pipeline_spec": spec, "trigger": periodic, "surprise": 1},
        {"display_name": "a", "trigger": periodic},
        {"display_name": "a", "pipeline_spec": spec, "trigger": periodic},  # not a valid pipeline
    ]
    for body in cases:
        status, answer = _request(url, "POST", body)
        assert status == 400, (body, status, answer)
        assert answer["message"]
    assert _request(f"{url}/nope")[0] == 404
    assert _request(f"{url}/nope:enable", "POST", {})[0] == 404
    assert _request(f"{url}?sort_by=color")[0] == 400


def test_recurring_run_of_an_uploaded_pipeline_version(client: Any, packages: dict[str, str]) -> None:
    pipeline = client.upload_pipeline(packages["adder"], pipeline_name="recurring-adder")
    version = client.list_pipeline_versions(pipeline.pipeline_id).pipeline_versions[0]
    experiment = client.create_experiment("recurring-version")
    job = client.create_recurring_run(
        experiment.experiment_id, "from-version", interval_second=1, params={"x": 10},
        pipeline_id=pipeline.pipeline_id, version_id=version.pipeline_version_id,
    )
    runs = _wait_for(lambda: _runs_of(client, experiment.experiment_id), 15, "a run of the pipeline version")
    client.delete_recurring_run(job.recurring_run_id)
    done = client.wait_for_run_completion(runs[-1].run_id, timeout=60)
    assert done.state == "SUCCEEDED" and done.recurring_run_id == job.recurring_run_id
    assert done.pipeline_version_reference.pipeline_version_id == version.pipeline_version_id


# ----------------------------------------------------------------------- issue 11, defect 9


def _by_recurring_run(recurring_run_id: str) -> str:
    return json.dumps({"predicates": [{"key": "recurring_run_id", "operation": "EQUALS",
                                       "string_value": recurring_run_id}]})


def test_runs_filtered_by_recurring_run_id(client: Any, packages: dict[str, str]) -> None:
    experiment = client.create_experiment("recurring-filter")
    jobs = [client.create_recurring_run(experiment.experiment_id, name, interval_second=1, max_concurrency=5,
                                        pipeline_package_path=packages["adder"]) for name in ("left", "right")]
    for job in jobs:
        _wait_for(lambda job=job: client.list_runs(filter=_by_recurring_run(job.recurring_run_id)).runs, 15,
                  f"a run of {job.display_name}")
        client.disable_recurring_run(job.recurring_run_id)
    everything = _runs_of(client, experiment.experiment_id)
    for job in jobs:
        listed = client.list_runs(filter=_by_recurring_run(job.recurring_run_id), page_size=100)
        mine = [run for run in everything if run.display_name.startswith(f"{job.display_name}-")]
        assert sorted(run.run_id for run in listed.runs) == sorted(run.run_id for run in mine)
        assert listed.total_size == len(mine)
        assert {run.recurring_run_id for run in listed.runs} == {job.recurring_run_id}
    for run in everything:
        client.wait_for_run_completion(run.run_id, timeout=60)


def test_archiving_an_experiment_disables_its_recurring_runs(client: Any, packages: dict[str, str]) -> None:
    archived, kept = client.create_experiment("recurring-archived"), client.create_experiment("recurring-kept")
    yearly = {"cron_expression": "0 0 0 1 1 *", "pipeline_package_path": packages["adder"]}
    doomed = client.create_recurring_run(archived.experiment_id, "doomed", **yearly)
    other = client.create_recurring_run(kept.experiment_id, "other", **yearly)
    client.archive_experiment(archived.experiment_id)
    assert client.get_recurring_run(doomed.recurring_run_id).status == "DISABLED"
    assert client.get_recurring_run(other.recurring_run_id).status == "ENABLED"
    client.delete_recurring_run(doomed.recurring_run_id)
    client.delete_recurring_run(other.recurring_run_id)


def test_a_deleted_pipeline_version_is_recorded_and_the_scheduler_goes_on(
    client: Any, server: Served, packages: dict[str, str],
) -> None:
    pipeline = client.upload_pipeline(packages["adder"], pipeline_name="recurring-vanishing")
    version = client.list_pipeline_versions(pipeline.pipeline_id).pipeline_versions[0]
    experiment = client.create_experiment("recurring-vanishing")
    job = client.create_recurring_run(experiment.experiment_id, "vanishing", interval_second=1, max_concurrency=10,
                                      pipeline_id=pipeline.pipeline_id, version_id=version.pipeline_version_id)
    first = _wait_for(lambda: _runs_of(client, experiment.experiment_id), 15, "a run of the version")
    client.disable_recurring_run(job.recurring_run_id)
    for run in _runs_of(client, experiment.experiment_id):
        client.wait_for_run_completion(run.run_id, timeout=60)
    assert first[0].recurring_run_id == job.recurring_run_id
    client.delete_pipeline_version(pipeline.pipeline_id, version.pipeline_version_id)
    client.enable_recurring_run(job.recurring_run_id)
    failed = _wait_for(lambda: (client.get_recurring_run(job.recurring_run_id).error or None), 30, "the reason")
    assert "not started" in failed.message and version.pipeline_version_id in failed.message, failed
    assert server.app.state.recurring.scheduler.is_alive()
    # the others still run: a fresh recurring run beside the broken one starts its runs
    beside = client.create_recurring_run(experiment.experiment_id, "beside", interval_second=1,
                                         pipeline_package_path=packages["adder"])
    runs = _wait_for(lambda: client.list_runs(filter=_by_recurring_run(beside.recurring_run_id)).runs, 15,
                     "a run beside the broken recurring run")
    client.delete_recurring_run(beside.recurring_run_id)
    client.delete_recurring_run(job.recurring_run_id)
    client.wait_for_run_completion(runs[0].run_id, timeout=60)


def _old_layout_file(home: Path, recurring_id: str, spec: dict[str, Any], experiment_id: str,
                     run_ids: list[str]) -> Path:
    """A recurring run as the server wrote it before the table: one JSON file under $MILLPOND_HOME/recurring/."""
    record = {
        "recurring_run_id": recurring_id, "display_name": "from-the-file", "description": "old",
        "experiment_id": experiment_id, "trigger": {"periodic_schedule": {"interval_second": 1}},
        "max_concurrency": 2, "no_catchup": True, "mode": "ENABLE", "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z", "service_account": "", "namespace": "",
        "runtime_config": {"parameters": {"x": 7}}, "run_ids": run_ids, "pipeline_spec": spec,
        "last_scheduled_at": "2026-01-01T00:00:10Z",
    }
    folder = home / "recurring"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{recurring_id}.json").write_text(json.dumps(record, indent=1, sort_keys=True))
    (folder / "broken.json").write_text("{not json")
    return folder / f"{recurring_id}.json"


def test_a_recurring_run_of_the_old_json_layout_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, packages: dict[str, str],
) -> None:
    import yaml

    home = tmp_path / "home"
    monkeypatch.setenv("MILLPOND_HOME", str(home))
    first = Served()
    try:
        client = kfp.Client(host=first.url)
        experiment = client.create_experiment("from-old-home")
        earlier = client.create_run_from_pipeline_package(packages["adder"], arguments={"x": 1},
                                                          experiment_name="from-old-home")
        client.wait_for_run_completion(earlier.run_id, timeout=60)
    finally:
        first.stop()
    spec = yaml.safe_load(Path(packages["adder"]).read_text())
    old = _old_layout_file(home, "0ld-recurring-run", spec, experiment.experiment_id, [earlier.run_id])

    second = Served()
    try:
        client = kfp.Client(host=second.url)
        imported = client.get_recurring_run("0ld-recurring-run")
        assert (imported.display_name, imported.status, imported.max_concurrency) == ("from-the-file", "ENABLED", "2")
        assert imported.runtime_config.parameters == {"x": 7} and imported.no_catchup is True
        assert not old.exists() and old.with_name(old.name + ".imported").is_file()
        assert (home / "recurring" / "broken.json.unreadable").is_file()
        assert client.get_run(earlier.run_id).recurring_run_id == "0ld-recurring-run"
        runs = _wait_for(lambda: len(client.list_runs(filter=_by_recurring_run("0ld-recurring-run")).runs or []) >= 2
                         and client.list_runs(filter=_by_recurring_run("0ld-recurring-run")).runs, 15,
                         "a run of the imported recurring run")
        client.disable_recurring_run("0ld-recurring-run")
        assert earlier.run_id in {run.run_id for run in runs}
        for run in runs:
            done = client.wait_for_run_completion(run.run_id, timeout=60)
            assert done.state == "SUCCEEDED"
    finally:
        second.stop()
    third = Served()  # a restart imports nothing twice
    try:
        listed = kfp.Client(host=third.url).list_recurring_runs(page_size=100).recurring_runs or []
        assert [r.recurring_run_id for r in listed] == ["0ld-recurring-run"]
    finally:
        third.stop()


def test_two_servers_on_one_home_start_each_scheduled_run_once(tmp_path: Path, packages: dict[str, str]) -> None:
    from tests.server.test_server_restart import ServerProcess

    home = tmp_path / "home"
    servers = [ServerProcess(home), ServerProcess(home)]
    try:
        client = kfp.Client(host=servers[0].url)
        experiment = client.create_experiment("two-servers")
        started = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=8)  # eight times due at once, with catch-up
        status, job = _request(f"{servers[1].url}{API}/recurringruns", "POST", {
            "display_name": "shared", "experiment_id": experiment.experiment_id, "max_concurrency": "10",
            "pipeline_spec": json.loads(json.dumps(__import__("yaml").safe_load(Path(packages["adder"]).read_text()))),
            "trigger": {"periodic_schedule": {"interval_second": "1", "start_time": started.isoformat()}},
        })
        assert status == 200, job
        _wait_for(lambda: len(_runs_of(client, experiment.experiment_id)) >= 10, 30, "ten scheduled runs")
        client.disable_recurring_run(job["recurring_run_id"])
        time.sleep(1.5)  # ticks in progress end
        runs = _runs_of(client, experiment.experiment_id)
        names = sorted(run.display_name for run in runs)
        assert len(names) == len(set(names)), f"a scheduled run started twice: {names}"
        for run in runs:
            assert client.wait_for_run_completion(run.run_id, timeout=120).state == "SUCCEEDED"
    finally:
        for server in servers:
            server.kill()


def test_a_home_at_revision_0005_is_upgraded_and_its_files_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, packages: dict[str, str],
) -> None:
    """A home last used by a millpond at 0005: runs in its database, a recurring run in a file that started one."""
    import yaml
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine

    from millpond.store.db import MIGRATIONS_DIR

    home = tmp_path / "home"
    home.mkdir()
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    engine = create_engine(f"sqlite:///{home / 'millpond.db'}")
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0005")
        conn.exec_driver_sql("INSERT INTO experiments (id, name, description, created_at) VALUES ('e', 'old', '', "
                             "'2026-01-01 00:00:00.000000')")
        conn.exec_driver_sql("INSERT INTO runs (id, name, experiment_id, pipeline_name, pipeline_spec, parameters, "
                             "pipeline_root, state, outputs, created_at) VALUES ('r', 'r', 'e', 'adder', '{}', '{}', "
                             "'/x', 'SUCCEEDED', '{}', '2026-01-01 00:00:05.000000')")
    engine.dispose()
    spec = yaml.safe_load(Path(packages["adder"]).read_text())
    _old_layout_file(home, "from-0005", spec, "e", ["r"])
    record = json.loads((home / "recurring" / "from-0005.json").read_text())
    record.update(
        mode="DISABLE", trigger={"cron_schedule": {"cron": "0 0 * * * *", "start_time": "2026-01-01T00:00:00Z"}}
    )
    (home / "recurring" / "from-0005.json").write_text(json.dumps(record))

    monkeypatch.setenv("MILLPOND_HOME", str(home))
    served = Served()
    try:
        client = kfp.Client(host=served.url)
        job = client.get_recurring_run("from-0005")
        assert (job.status, job.trigger.cron_schedule.cron, job.experiment_id) == ("DISABLED", "0 0 * * * *", "e")
        assert job.trigger.cron_schedule.start_time.year == 2026
        assert [run.run_id for run in client.list_runs(filter=_by_recurring_run("from-0005")).runs] == ["r"]
        assert client.get_run("r").recurring_run_id == "from-0005"
    finally:
        served.stop()
    with sqlite3.connect(home / "millpond.db") as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD_REVISION,)]
        assert db.execute("SELECT id, recurring_run_id FROM runs").fetchall() == [("r", "from-0005")]

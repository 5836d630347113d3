"""Recurring runs of ``millpond server``, driven by the real ``kfp.Client``, and the scheduler's rules."""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import datetime as dt
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

kfp = pytest.importorskip("kfp")
from kfp import compiler, dsl

from tests.server_support import Served, module_home, serving
from tests.test_server_api import _request

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
    assert (home / "recurring" / f"{job.recurring_run_id}.json").is_file()

    got = client.get_recurring_run(job.recurring_run_id)
    assert got.max_concurrency == "3" and got.runtime_config.parameters == {"x": 5}
    assert got.experiment_id == experiment.experiment_id and got.description == "every hour"

    daily = client.create_recurring_run(
        experiment.experiment_id, "daily", interval_second=86400, pipeline_package_path=packages["adder"], enabled=False,
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
    runs = _wait_for(lambda: len(_runs_of(client, experiment.experiment_id)) >= 2 and _runs_of(client, experiment.experiment_id),
                     15, "two scheduled runs")
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


# ------------------------------------------------------------------- the scheduler's rules, by the clock


class _Recorder:
    """A scheduler whose runs are recorded instead of started."""

    def __init__(self, tmp_path: Path, in_flight: int = 0) -> None:
        from millpond.server.recurring import RecurringStore, Scheduler

        self.started: list[dt.datetime] = []
        self.in_flight = in_flight
        self.store = RecurringStore(tmp_path / "recurring")
        recorder = self

        class Fake(Scheduler):
            def _in_flight(self, record: dict[str, Any]) -> int:
                return recorder.in_flight

            def _start_run(self, record: dict[str, Any], moment: dt.datetime) -> None:
                recorder.started.append(moment)

        self.scheduler = Fake(None, self.store)  # type: ignore[arg-type]


T0 = dt.datetime(2030, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def _record(trigger: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"recurring_run_id": "r1", "display_name": "r", "mode": "ENABLE", "trigger": trigger,
            "created_at": T0.isoformat(), "max_concurrency": 1, "no_catchup": False, "run_ids": [], **fields}


def test_catchup_runs_each_missed_time(tmp_path: Path) -> None:
    recorder = _Recorder(tmp_path)
    recorder.store.save(_record({"cron_schedule": {"cron": "*/10 * * * * *"}}))
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=35))
    assert recorder.started == [T0 + dt.timedelta(seconds=s) for s in (10, 20, 30)]
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=39))
    assert len(recorder.started) == 3
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=40))
    assert recorder.started[-1] == T0 + dt.timedelta(seconds=40)


def test_no_catchup_runs_only_the_latest(tmp_path: Path) -> None:
    recorder = _Recorder(tmp_path)
    recorder.store.save(_record({"periodic_schedule": {"interval_second": 10}}, no_catchup=True))
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=35))
    assert recorder.started == [T0 + dt.timedelta(seconds=30)]


def test_full_concurrency_keeps_the_time_due(tmp_path: Path) -> None:
    recorder = _Recorder(tmp_path, in_flight=1)
    recorder.store.save(_record({"periodic_schedule": {"interval_second": 10}}))
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=25))
    assert recorder.started == []
    recorder.in_flight = 0
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=26))
    assert recorder.started == [T0 + dt.timedelta(seconds=10), T0 + dt.timedelta(seconds=20)]


def test_start_and_end_times_bound_the_schedule(tmp_path: Path) -> None:
    recorder = _Recorder(tmp_path)
    start, end = T0 + dt.timedelta(seconds=100), T0 + dt.timedelta(seconds=125)
    recorder.store.save(_record({"cron_schedule": {"cron": "*/10 * * * * *", "start_time": start.isoformat(),
                                                   "end_time": end.isoformat()}}))
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=90))
    assert recorder.started == []
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=200))
    assert recorder.started == [start, start + dt.timedelta(seconds=10), start + dt.timedelta(seconds=20)]


def test_disabled_recurring_runs_start_nothing(tmp_path: Path) -> None:
    recorder = _Recorder(tmp_path)
    recorder.store.save(_record({"periodic_schedule": {"interval_second": 1}}, mode="DISABLE"))
    recorder.scheduler.tick(T0 + dt.timedelta(seconds=30))
    assert recorder.started == []


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

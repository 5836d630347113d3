"""``GET /metrics`` of ``millpond server``, parsed by prometheus-client's own parser after real work: a pipeline
run, a training job holding a (test-only) GPU, CPU and memory, and a dataset read twice (a miss, then a hit).
Also the request guard on /metrics (token, Host), and the task-duration histogram's SQL on SQLite and PostgreSQL."""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import datetime as dt
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import fsspec
import pytest

kfp = pytest.importorskip("kfp")
from kfp import dsl
from prometheus_client.parser import text_string_to_metric_families

from tests.datasets_support import manifest
from tests.server_support import serving
from tests.training_support import arena, wait_status


@dsl.component
def add(a: int, b: int) -> int:
    return a + b


@dsl.pipeline(name="metrics-demo")
def adding() -> int:
    first = add(a=1, b=2)
    return add(a=first.output, b=3).output


def _scrape(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url + "/metrics", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.headers["content-type"].startswith("text/plain; version=")
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample by (name, sorted labels), through prometheus-client's parser (it fails on bad text)."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_metrics_after_a_run_a_job_and_dataset_reads(home: Path, tmp_path: Path, cli: Any, capsys: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "2")  # the ledger's test-only GPUs: no device is touched
    source = tmp_path / "ufs"
    source.mkdir()
    (source / "a.bin").write_bytes(b"x" * 50_000)
    levels = [{"mediumtype": "SSD", "path": str(tmp_path / "cache"), "quota": "64Mi"}]
    (tmp_path / "ds.yaml").write_text(manifest("numbers", f"local://{source}", secret=False, levels=levels))
    assert cli("apply", "-f", tmp_path / "ds.yaml").code == 0
    for _ in range(2):  # the first read fills the cache (a miss), the second is served from it (a hit)
        with fsspec.open("millpond://numbers/a.bin", "rb") as f:
            assert len(f.read()) == 50_000

    for served in serving():
        client = kfp.Client(host=served.url)
        result = client.create_run_from_pipeline_func(adding, experiment_name="metrics")
        assert client.wait_for_run_completion(result.run_id, timeout=90, sleep_duration=0.2).state == "SUCCEEDED"
        job = arena(capsys, "submit", "pytorch", "--name", "busy", "--gpus", "1", "--cpu", "1", "--memory", "64Mi",
                    "python -c 'b = bytearray(40 << 20); import time; [sum(range(10**5)) for _ in iter(int, 1)]'")
        assert job.code == 0, job.err
        try:
            wait_status(capsys, "busy", ("RUNNING",), timeout=90)
            deadline = time.monotonic() + 30
            while True:  # the instance's python is up and holds its 40 MiB
                status, text = _scrape(served.url)
                assert status == 200, text
                samples = _samples(text)
                memory = samples.get(("millpond_job_memory_used_bytes", (("job", "busy"), ("namespace", "default"))))
                if memory and memory > 40 << 20:
                    break
                assert time.monotonic() < deadline, memory
                time.sleep(0.3)
        finally:
            assert arena(capsys, "delete", "busy").code == 0

    job_labels = (("job", "busy"), ("namespace", "default"))
    assert samples[("millpond_runs", (("state", "SUCCEEDED"),))] == 1
    assert samples[("millpond_runs", (("state", "FAILED"),))] == 0  # known states are there, at zero
    assert samples[("millpond_tasks", (("state", "SUCCEEDED"),))] >= 2
    count = samples[("millpond_task_duration_seconds_count", (("state", "SUCCEEDED"),))]
    assert count == samples[("millpond_task_duration_seconds_bucket", (("le", "+Inf"), ("state", "SUCCEEDED")))] >= 2
    assert 0 < samples[("millpond_task_duration_seconds_sum", (("state", "SUCCEEDED"),))] < 90 * count
    assert samples[("millpond_training_jobs", (("status", "RUNNING"),))] == 1
    assert samples[("millpond_node_capacity", (("resource", "gpu"),))] == 2
    assert samples[("millpond_node_allocated", (("resource", "gpu"),))] == 1
    assert samples[("millpond_node_allocated", (("resource", "cpu"),))] >= 1
    assert samples[("millpond_node_allocated", (("resource", "memory"),))] >= 64 << 20
    assert samples[("millpond_node_capacity", (("resource", "memory"),))] >= 64 << 20
    assert samples[("millpond_node_memory_used_bytes", ())] > 40 << 20  # the job's 40 MiB at least
    assert samples[("millpond_job_gpus_allocated", job_labels)] == 1
    assert samples[("millpond_job_cpu_allocated_cores", job_labels)] == 1
    assert samples[("millpond_job_memory_allocated_bytes", job_labels)] == 64 << 20
    assert samples[("millpond_job_cpu_seconds_total", job_labels)] > 0
    dataset = (("dataset", "numbers"), ("namespace", "default"))
    assert samples[("millpond_dataset_cache_hit_bytes_total", dataset)] == 50_000
    assert samples[("millpond_dataset_cache_miss_bytes_total", dataset)] == 50_000
    assert samples[("millpond_dataset_cache_hits_total", dataset)] >= 1
    assert samples[("millpond_dataset_cache_misses_total", dataset)] >= 1
    assert samples[("millpond_dataset_cached_bytes", dataset)] == 50_000
    assert samples[("millpond_dataset_cache_capacity_bytes", dataset)] == 64 << 20


def test_metrics_obey_the_token_and_the_host_check(home: Path) -> None:
    for served in serving(token="sesame"):
        assert _scrape(served.url)[0] == 401
        assert _scrape(served.url, {"Authorization": "Bearer wrong"})[0] == 401
        status, text = _scrape(served.url, {"Authorization": "Bearer sesame"})
        assert status == 200 and _samples(text)[("millpond_runs", (("state", "RUNNING"),))] == 0
        # DNS rebinding: a page of another name resolving to 127.0.0.1 gets nothing, token or not
        assert _scrape(served.url, {"Authorization": "Bearer sesame", "Host": "evil.example"})[0] == 400


@pytest.mark.usefixtures("database")
def test_task_duration_histogram_in_sql(home: Path) -> None:
    """The buckets are computed by the database (SQLite's julianday, PostgreSQL's epoch): same answer on both."""
    from millpond.settings import load_settings
    from millpond.store.db import session_factory
    from millpond.store.metrics import MetricsQueries
    from millpond.store.models import Experiment, Run, Task
    from millpond.store.runs import RunStore

    url = load_settings().database_url
    RunStore(url)  # creates the schema
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    with session_factory(url).begin() as session:
        session.add(Experiment(id="e", name="e"))
        session.add(Run(id="r", name="r", experiment_id="e", pipeline_name="p", pipeline_spec={}, pipeline_root="/x"))
        session.flush()
        for number, (seconds, state) in enumerate([(0.05, "SUCCEEDED"), (2.0, "SUCCEEDED"), (45.0, "SUCCEEDED"),
                                                   (7200.0, "FAILED"), (None, "RUNNING")]):
            session.add(Task(id=f"t{number}", run_id="r", path=f"t{number}", name="t", kind="container",
                             component="c", state=state, started_at=start,
                             finished_at=None if seconds is None else start + dt.timedelta(seconds=seconds)))
    found = {h.state: h for h in MetricsQueries(url).task_durations()}
    assert set(found) == {"SUCCEEDED", "FAILED"}  # a running task has no duration yet
    ok = dict(found["SUCCEEDED"].buckets)
    assert (ok[0.1], ok[1.0], ok[2.5], ok[30.0], ok[60.0], ok[10800.0]) == (1, 1, 2, 2, 3, 3)
    assert found["SUCCEEDED"].count == 3 and found["SUCCEEDED"].total_seconds == pytest.approx(47.05, abs=0.01)
    failed = dict(found["FAILED"].buckets)
    assert failed[3600.0] == 0 and failed[10800.0] == 1
    assert MetricsQueries(url).task_states() == {"SUCCEEDED": 3, "FAILED": 1, "RUNNING": 1}

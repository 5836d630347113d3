"""examples/census_minio: seed 004's census pipeline through ``millpond server`` against SeaweedFS.

The first run finds no table in the bucket, so it downloads it (from the example's CSV) and
saves it; the second finds it and reads it back — the download branch is not run.
"""

# no "from __future__ import annotations": the example's components are read by kfp

import csv
import importlib.util
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

kfp = pytest.importorskip("kfp")
pytest.importorskip("s3fs")

from millpond.store.secrets import ConfigStore
from tests.server_support import Served, module_home, serving

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "census_minio"


def _load_example() -> Any:
    spec = importlib.util.spec_from_file_location("census_pipeline_example", EXAMPLE / "census_pipeline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "census")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[Served]:
    yield from serving()


def _states(run: Any) -> dict[str, str]:
    return {task.display_name: task.state for task in run.run_details.task_details or []}


def test_second_run_reads_back_what_the_first_saved(server: Served, home: Path, s3_server: Any) -> None:
    example = _load_example()
    bucket = s3_server.create_bucket()
    ConfigStore(home).create("secret", example.SECRET, {
        "AWS_ENDPOINT_URL": s3_server.endpoint_url, "AWS_ACCESS_KEY_ID": s3_server.access_key,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret_key,
    })
    client = kfp.Client(host=server.url)

    first = client.wait_for_run_completion(example.submit(server.url, bucket, experiment="census"), timeout=180)
    states = _states(first)
    assert first.state == "SUCCEEDED", (states, first.error)
    assert states["table-data-exists"] == "SUCCEEDED"
    assert states["download-table-data"] == "SUCCEEDED" and states["save-table-data"] == "SUCCEEDED"
    assert states["condition-2"] == "SUCCEEDED" and states["condition-3"] == "SKIPPED"  # the download branch
    assert states.get("get-table-data", "SKIPPED") == "SKIPPED"  # a skipped branch's tasks are not created

    saved = s3_server.filesystem().cat_file(f"{bucket}/B01001-2020.csv").decode()
    rows = list(csv.reader(io.StringIO(saved)))
    assert rows[0] == ["GEO_ID", "NAME", "B01001_001E", "B01001_002E", "B01001_026E", "state", "county"]
    assert len(rows) == 51  # the 50 counties of the stand-in CSV, B19013 (another table) left out

    second = client.wait_for_run_completion(example.submit(server.url, bucket, experiment="census"), timeout=180)
    states = _states(second)
    assert second.state == "SUCCEEDED", (states, second.error)
    assert states["table-data-exists"] == "SUCCEEDED" and states["get-table-data"] == "SUCCEEDED"
    assert states["condition-2"] == "SKIPPED" and states["condition-3"] == "SUCCEEDED"  # the read-back branch
    assert states.get("download-table-data", "SKIPPED") == "SKIPPED"
    assert states.get("save-table-data", "SKIPPED") == "SKIPPED"
    experiment = client.get_experiment(experiment_name="census")
    assert client.list_runs(experiment_id=experiment.experiment_id).total_size == 2

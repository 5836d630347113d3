"""examples/model_registry_pipeline.py: a KFP component registers its run's Model artifact in the registry of a
running ``millpond server``, and the version leads back to the run (its id, task, output and artifact URI)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.server_support import Served
from tests.serving.test_serving_cli import _invoke

pytest.importorskip("model_registry")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def millpond(home: Path, capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    from millpond.cli.main import main

    return lambda *args: _invoke(main, capsys, *args)


def test_a_pipeline_registers_its_model_with_its_lineage(registry, server: Served, millpond) -> None:
    ran = millpond("run", ROOT / "examples" / "model_registry_pipeline.py", "-p", f"registry_url={server.url}",
                   "-p", "name=digits-kfp", "-p", "version=7", "-p", "rows=400", "-o", "json")
    assert ran.code == 0, ran.err
    run = json.loads(ran.out)
    assert run["state"] == "SUCCEEDED", run
    assert run["outputs"]["Output"] == "model-registry://digits-kfp/7"
    model_uri = next(t for t in run["tasks"] if t["name"] == "train")["outputs"]["model"]

    version = registry.get_model_version("digits-kfp", "7")
    assert version is not None and version.author == "pipelines"
    assert version.custom_properties == {"kfp.run_id": run["run_id"], "kfp.task": "train", "kfp.output": "model",
                                         "kfp.artifact_uri": model_uri}
    artifact = registry.get_model_artifact("digits-kfp", "7")
    assert artifact is not None and artifact.uri == model_uri
    assert (artifact.model_source_kind, artifact.model_source_class, artifact.model_source_id) == (
        "kfp", "pipelinerun", run["run_id"])


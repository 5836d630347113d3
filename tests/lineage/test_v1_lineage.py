"""A kfp 1.x pipeline (an Argo workflow of the kfp-v1 corpus, run through ``argo.to_ir``) records its lineage too:
the training step's input is the very artifact the preprocessing step wrote."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from millpond.settings import load_settings
from millpond.store.lineage_store import LineageStore
from tests.lineage.support import links, ok
from tests.server_support import Served, serving

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "kfp-v1"


@pytest.fixture
def server(home: Path) -> Iterator[Served]:
    yield from serving()


def test_a_v1_pipeline_records_which_step_read_what_another_wrote(cli: Callable[..., Any], server: Served) -> None:
    if not (CORPUS / "two_step.yaml").is_file():
        pytest.skip("the kfp-v1 corpus is not here")
    ran = cli("run", CORPUS / "two_step.yaml", "-o", "json")
    assert ran.code == 0, ran.err
    result = json.loads(ran.out)
    assert result["state"] == "SUCCEEDED", result
    steps = {t["name"]: t for t in result["tasks"] if t["kind"] == "container"}
    preprocess = next(t for name, t in steps.items() if "preprocess" in name)
    train = next(t for name, t in steps.items() if "train" in name)

    written = {link["key"]: link for link in links(server, "OUTPUT", task_ids=[preprocess["id"]])}
    dataset = next(link for key, link in written.items() if "dataset" in key)
    read = [link for link in links(server, task_ids=[train["id"]]) if link["type"] != "OUTPUT"]
    from_preprocess = [link for link in read if link["artifact_id"] == dataset["artifact_id"]]
    assert [(link["type"], link["producer"]["task_name"]) for link in from_preprocess] == [
        ("TASK_OUTPUT_INPUT", from_preprocess[0]["producer"]["task_name"])]
    assert "preprocess" in from_preprocess[0]["producer"]["task_name"]
    artifact = ok(server, f"/artifacts/{dataset['artifact_id']}")
    assert artifact["uri"] == preprocess["outputs"][dataset["key"]]
    [model] = [link for link in links(server, "OUTPUT", task_ids=[train["id"]]) if "model" in link["key"]]
    assert ok(server, f"/artifacts/{model['artifact_id']}")["uri"] == train["outputs"][model["key"]]

    execution = LineageStore(load_settings().database_url).find_execution(train["id"])
    assert (execution.type, execution.state, execution.run_id) == (
        "system.ContainerExecution", "COMPLETE", result["run_id"])

"""From inside a training job's instance, a DataProcess script and a model replica of namespace A (multi-user
mode, each started by millpond as it starts them): every attempt on namespace B's things fails, as from a
pipeline task; each still works in its own folder."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import pytest

from millpond.errors import UnavailableError
from millpond.serving.deploy import ready_url
from millpond.store.resources import ResourceStore
from tests.isolation.conftest import (
    NEEDS_ISOLATION,
    PROBE,
    NamespaceB,
    assert_isolated,
    local_dataset_yaml,
    report_of,
)
from tests.training_support import arena

pytestmark = NEEDS_ISOLATION


def test_a_training_job_instance_of_namespace_a_reaches_nothing_of_namespace_b(capsys,
                                                                               namespace_b: NamespaceB) -> None:
    command = f"{sys.executable} {PROBE} {shlex.quote(namespace_b.targets())} && echo own > own.txt && cat own.txt"
    submitted = arena(capsys, "submit", "pytorch", "--name", "probe", "-n", "team-a", command)
    assert submitted.code == 0, submitted.err
    info = _finished(capsys, "probe", "team-a")
    logs = arena(capsys, "logs", "probe", "-n", "team-a").out
    assert info["status"] == "SUCCEEDED", (info, logs)
    assert logs.splitlines()[-1] == "own"  # it wrote and read its own folder
    assert_isolated(report_of(logs), namespace_b)


def test_a_job_binding_the_home_as_a_host_folder_is_refused(capsys, namespace_b: NamespaceB) -> None:
    submitted = arena(capsys, "submit", "pytorch", "--name", "grab", "-n", "team-a", "--data-dir",
                      f"{namespace_b.home / 'volumes'}:/grab", "ls", "/grab")
    assert submitted.code == 0, submitted.err  # refused where it would be mounted, as a pod's bad volume
    assert _finished(capsys, "grab", "team-a")["status"] == "FAILED"
    said = arena(capsys, "get", "grab", "-n", "team-a").out
    assert "millpond's own files" in said, said


def _finished(capsys, name: str, namespace: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        result = arena(capsys, "get", name, "-n", namespace, "-o", "json")
        assert result.code == 0, result.err
        info = json.loads(result.out)
        if info["status"] in ("SUCCEEDED", "FAILED"):
            return info
        assert time.monotonic() < deadline, info
        time.sleep(0.2)



def test_a_data_process_script_of_namespace_a_reaches_nothing_of_namespace_b(cli, tmp_path: Path,
                                                                            namespace_b: NamespaceB) -> None:
    dataset = local_dataset_yaml(tmp_path, "a-data", "team-a", {"input.txt": "a-dataset"})
    process = f"""---
apiVersion: data.fluid.io/v1alpha1
kind: DataProcess
metadata: {{name: a-probe, namespace: team-a}}
spec:
  dataset: {{name: a-data, namespace: team-a, mountPath: /data/a}}
  processor:
    script:
      image: python
      imageTag: "3.11"
      command: [bash]
      source: |
        set -e
        cat /data/a/input.txt
        {sys.executable} {PROBE} {shlex.quote(namespace_b.targets())}
"""
    (tmp_path / "ops.yaml").write_text(dataset + process)
    applied = cli("apply", "--wait", "-f", tmp_path / "ops.yaml")
    assert applied.code == 0, applied.err
    logs = [path.read_text() for path in (namespace_b.home / "operations").glob("team-a_DataProcess_a-probe.out")]
    assert len(logs) == 1, applied.out
    assert "a-dataset" in logs[0]  # it read its own namespace's dataset
    assert_isolated(report_of(logs[0]), namespace_b)


def test_a_model_replica_of_namespace_a_reaches_nothing_of_namespace_b(capsys, namespace_b: NamespaceB) -> None:
    targets = shlex.quote(namespace_b.targets())
    command = f"echo own > own.txt && cat own.txt && exec {sys.executable} {PROBE} {targets} --serve"
    assert arena(capsys, "serve", "custom", "--name", "probe", "-n", "team-a", command).code == 0
    try:
        url = ready_url(ResourceStore(), "probe", "team-a", 60)
        assert url
        logs = [path.read_text() for path in namespace_b.home.rglob("*.log")
                if "isolation-report" in path.read_text(errors="replace")]
        assert len(logs) == 1
        assert " own\n" in logs[0]  # it wrote and read its own work folder
        assert_isolated(report_of(logs[0]), namespace_b)
    finally:
        assert arena(capsys, "serve", "delete", "probe", "-n", "team-a").code == 0


def test_a_data_process_naming_namespace_b_s_dataset_is_refused(cli, tmp_path: Path, namespace_b: NamespaceB) -> None:
    """Fluid's rule (TargetDatasetNamespaceNotSame): a data operation works on its own namespace's dataset."""
    dataset = local_dataset_yaml(tmp_path, "b-data", "team-b", {"secret.txt": "b-dataset"})
    process = f"""---
apiVersion: data.fluid.io/v1alpha1
kind: DataProcess
metadata: {{name: grab, namespace: team-a}}
spec:
  dataset: {{name: b-data, namespace: team-b, mountPath: /data/b}}
  processor:
    script: {{image: debian, command: [bash], source: "cat /data/b/secret.txt > {tmp_path / 'stolen'}"}}
"""
    (tmp_path / "ops.yaml").write_text(dataset + process)
    cli("apply", "--wait", "-f", tmp_path / "ops.yaml")
    got = cli("get", "dataprocess", "grab", "-n", "team-a", "-o", "json")
    assert got.code == 0, got.err
    assert got.json()["status"]["phase"] == "Failed"
    assert "namespace is not same as its spec.dataset" in json.dumps(got.json()["status"])
    assert not (tmp_path / "stolen").exists()


def test_an_inference_service_of_namespace_a_cannot_serve_namespace_b_s_artifact(capsys,
                                                                                 namespace_b: NamespaceB) -> None:
    uri = f"file://{namespace_b.paths['artifact']}"
    assert arena(capsys, "serve", "sklearn", "--name", "grab", "-n", "team-a", "--model-uri", uri).code == 0
    try:
        with pytest.raises(UnavailableError, match="belongs to namespace 'team-b'"):
            ready_url(ResourceStore(), "grab", "team-a", 30)
    finally:
        assert arena(capsys, "serve", "delete", "grab", "-n", "team-a").code == 0

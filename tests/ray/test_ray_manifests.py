"""``millpond apply -f`` of a Kubeflow PyTorchJob with ``MILLPOND_RAY_ADDRESS`` set runs on the Ray
cluster, as ``arena submit pytorch`` does there: its instances are Ray tasks on the worker nodes
(tests/ray_cluster.py: a CPU-less head, workers b and c of one CPU each, so a 1-CPU master and a
1-CPU worker take one node each), and ``millpond get pytorchjobs`` shows the operator's conditions."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("ray")

from tests.ray_cluster import RayCluster
from tests.training_support import arena

pytestmark = pytest.mark.timeout(300)

PRINT_NODE = 'import os; print("rank", os.environ["RANK"], "node", os.environ["MILLPOND_RAY_NODE_ID"], flush=True)'


def _replica() -> dict[str, object]:
    return {"replicas": 1, "template": {"spec": {"containers": [{
        "name": "pytorch", "image": "python:3.11", "command": [sys.executable, "-c", PRINT_NODE],
        "resources": {"limits": {"cpu": "1", "memory": "128Mi"}}}]}}}


def test_a_pytorchjob_applied_with_the_ray_address_set_runs_on_two_ray_nodes(
    ray_cluster: RayCluster, cli, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.training.test_training_manifests import wait_state

    monkeypatch.setenv("MILLPOND_RAY_ADDRESS", ray_cluster.address)
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "onray"},
           "spec": {"pytorchReplicaSpecs": {"Master": _replica(), "Worker": _replica()}}}
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job), encoding="utf-8")
    applied = cli("apply", "-f", manifest)
    assert applied.code == 0 and applied.out.strip() == "pytorchjob.kubeflow.org/onray created", applied.err
    done = wait_state(cli, "pytorchjobs", "onray", ("Succeeded", "Failed"))
    logs = {i: arena(capsys, "logs", "onray", "-i", f"onray-{i}").out for i in ("master-0", "worker-0")}
    assert [c["type"] for c in done["status"]["conditions"]] == ["Created", "Running", "Succeeded"], (done, logs)
    seen = {}
    for log in logs.values():
        found = re.search(r"^rank (\d) node (\w+)$", log, re.M)
        assert found, log
        seen[found.group(1)] = found.group(2)
    workers = {ray_cluster.nodes["b"].node_id, ray_cluster.nodes["c"].node_id}
    assert set(seen) == {"0", "1"} and set(seen.values()) == workers, (seen, workers)  # one Ray node each
    table = cli("get", "pytorchjobs").out.split("\n")
    assert table[1].split()[:2] == ["onray", "Succeeded"], table
    events = arena(capsys, "get", "onray", "-e").out
    assert f"onray-master-0 on node {seen['0'][:12]}" in events, events


def test_with_the_address_set_a_tfjob_stays_on_this_machine_saying_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """A TFJob's (and MPIJob's) launcher assumes one machine: the variable leaves it local with one note,
    as arena leaves a tf job local, rather than refusing it; a PyTorchJob's spec joins the cluster."""
    from millpond.training.manifests import check_document

    monkeypatch.setenv("MILLPOND_RAY_ADDRESS", "127.0.0.1:6379")
    tf = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "tf"},
          "spec": {"tfReplicaSpecs": {"Worker": {**_replica(), "template": {"spec": {"containers": [
              {"name": "tensorflow", "image": "tf", "command": ["true"]}]}}}}}}
    local = check_document(tf, "job.yaml", 1, lambda *_: None)
    assert local.spec is not None and local.spec.ray_address == "" and not local.spec.instances_on_ray
    assert local.notes == ["runs on this machine, not on the Ray cluster at 127.0.0.1:6379 "
                           "(tfjob launchers assume one machine)"]
    torch = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt"},
             "spec": {"pytorchReplicaSpecs": {"Master": _replica()}}}
    remote = check_document(torch, "job.yaml", 1, lambda *_: None)
    assert remote.spec is not None and remote.spec.instances_on_ray and remote.spec.ray_placement == "PACK"
    assert remote.spec.ray_address == "127.0.0.1:6379" and remote.notes == []

"""The core kinds through the real ``kubectl`` against a real ``millpond server`` (its Kubernetes API serves
every kind of the registry): seed 001's ``kubectl get pv,pvc`` after its dataset, namespaces created and
deleted, a Secret created and read back as kubectl does, the node described, events listed."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from millpond.core.nodes import node_name
from tests.kube_support import Kubectl, kubectl_for
from tests.server_support import Served

pytest.importorskip("millpond.server.kube")

DATASET = """\
apiVersion: data.fluid.io/v1alpha1
kind: Dataset
metadata: {name: imagenet}
spec:
  mounts: [{mountPoint: "file:///tmp", name: tmp}]
---
apiVersion: data.fluid.io/v1alpha1
kind: AlluxioRuntime
metadata: {name: imagenet}
spec:
  replicas: 1
  tieredstore:
    levels: [{mediumtype: SSD, path: /tmp/millpond-core-kubectl-cache, quota: 1Gi}]
"""


@pytest.fixture
def kubectl(home: Path, tmp_path: Path) -> Iterator[Kubectl]:
    served = Served()
    try:
        yield kubectl_for(served, tmp_path / "kubectl")
    finally:
        served.stop()


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_seed_001_kubectl_get_pv_pvc_after_its_dataset(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "dataset.yaml"
    manifest.write_text(DATASET)
    kubectl.ok("create", "-f", str(manifest))
    out = kubectl.ok("get", "pv,pvc")
    assert "persistentvolume/default-imagenet" in out and "persistentvolumeclaim/imagenet" in out
    claim = kubectl.json("get", "pvc", "imagenet")
    assert claim["status"]["phase"] == "Bound" and claim["spec"]["volumeName"] == "default-imagenet"
    refused = kubectl.run("delete", "pvc", "imagenet")
    assert refused.returncode != 0 and "delete the dataset" in refused.stderr


CORE = """\
apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: v1
kind: Secret
metadata: {name: keys, namespace: team}
stringData: {token: s3cr3t}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: team}
data: {mode: fast}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: trainer, namespace: team}
"""


def test_namespaces_secrets_and_the_node_through_kubectl(kubectl: Kubectl, tmp_path: Path) -> None:
    # kubectl apply -f (JSON bodies); `kubectl create namespace|secret` send protobuf, which the API refuses
    manifest = tmp_path / "core.yaml"
    manifest.write_text(CORE)
    kubectl.ok("apply", "-f", str(manifest))
    assert "team" in kubectl.ok("get", "ns")
    secret = kubectl.json("get", "secret", "keys", "-n", "team")
    assert base64.b64decode(secret["data"]["token"]) == b"s3cr3t" and secret["type"] == "Opaque"
    table = kubectl.ok("get", "secrets", "-n", "team")
    assert "s3cr3t" not in table and _rows(table)[1][:3] == ["keys", "Opaque", "1"]
    assert kubectl.json("get", "cm", "settings", "-n", "team")["data"] == {"mode": "fast"}
    assert {row[0] for row in _rows(kubectl.ok("get", "sa", "-n", "team"))[1:]} == {"default", "trainer"}
    assert "unchanged" in kubectl.ok("apply", "-f", str(manifest))
    refused = kubectl.run("delete", "namespace", "default")
    assert refused.returncode != 0 and "forbidden" in refused.stderr.lower()
    kubectl.ok("delete", "namespace", "team")
    assert "team" not in kubectl.ok("get", "ns")
    assert kubectl.run("get", "secret", "keys", "-n", "team").returncode != 0
    nodes = _rows(kubectl.ok("get", "nodes"))
    assert nodes[0][:2] == ["NAME", "STATUS"] and nodes[1][:2] == [node_name(), "Ready"]
    assert "Ready" in kubectl.ok("describe", "node", node_name())

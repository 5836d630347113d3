"""A Notebook's resources as any pod's: GPUs granted by the machine's ledger (``CUDA_VISIBLE_DEVICES`` in its
kernels), a notebook that finds none free waits with the reason, and one past its namespace's ResourceQuota
waits naming the quota (``MILLPOND_FAKE_GPUS``: one fake GPU of 16 GiB)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millpond.notebooks import objects
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore
from tests.kube_support import Kubectl, kubectl_for
from tests.notebooks.support import execute, request
from tests.server_support import Served, module_home

pytestmark = pytest.mark.timeout(600)


def notebook(name: str, namespace: str, limits: dict[str, str]) -> str:
    return json.dumps({
        "apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": {"name": name, "namespace": namespace},
        "spec": {"template": {"spec": {"containers": [{"name": name, "image": "jupyter", "resources": {
            "limits": limits}}]}}}})


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    old = os.environ.get("MILLPOND_FAKE_GPUS")
    os.environ["MILLPOND_FAKE_GPUS"] = "1x16Gi"
    for _ in module_home(tmp_path_factory, "notebook-resources"):
        server = Served()
        yield kubectl_for(server, tmp_path_factory.mktemp("kubectl"))
        for resource in ResourceStore(load_settings()).list("Notebook", None):
            objects.delete(load_settings(), resource.namespace, resource.name)
        server.stop()
    if old is None:
        os.environ.pop("MILLPOND_FAKE_GPUS", None)
    else:
        os.environ["MILLPOND_FAKE_GPUS"] = old


def status_of(kubectl: Kubectl, name: str, namespace: str = "default") -> dict[str, Any]:
    return dict(kubectl.json("get", "notebook", name, "-n", namespace).get("status") or {})


def scheduled(status: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in status.get("conditions", []) if c["type"] == "PodScheduled"), {})


def test_a_gpu_goes_to_one_notebook_and_the_next_waits_saying_why(kubectl: Kubectl) -> None:
    kubectl.ok("apply", "-f", "-", stdin=notebook("first", "default", {"nvidia.com/gpu": "1"}))
    deadline = time.monotonic() + 180
    while status_of(kubectl, "first").get("readyReplicas") != 1:
        assert time.monotonic() < deadline, status_of(kubectl, "first")
        time.sleep(0.5)
    kubectl.ok("apply", "-f", "-", stdin=notebook("second", "default", {"nvidia.com/gpu": "1"}))
    while scheduled(status_of(kubectl, "second")).get("status") != "False":
        assert time.monotonic() < deadline, status_of(kubectl, "second")
        time.sleep(0.5)
    waiting = status_of(kubectl, "second")
    assert "needs 1 GPU, 0 free" in scheduled(waiting)["message"] and waiting["readyReplicas"] == 0

    served = kubectl.config.read_text().split("server: ", 1)[1].split()[0]
    base = f"{served}/notebook/default/first"
    answered, text = request(f"{base}/api/kernels", "POST", {"name": "python3"})
    assert answered == 201, text
    channels = base.replace("http://", "ws://") + f"/api/kernels/{json.loads(text)['id']}/channels"
    assert execute(channels, "import os; os.environ['CUDA_VISIBLE_DEVICES']") == "'0'"

    kubectl.ok("delete", "notebook", "first")  # its GPU freed: the waiting one starts
    while status_of(kubectl, "second").get("readyReplicas") != 1:
        assert time.monotonic() < deadline, status_of(kubectl, "second")
        time.sleep(0.5)
    kubectl.ok("delete", "notebook", "second")


def test_a_notebook_past_its_namespaces_quota_waits_naming_the_quota(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.ok("create", "namespace", "team")
    kubectl.ok("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute", "namespace": "team"},
        "spec": {"hard": {"limits.memory": "1Gi"}}}))
    kubectl.ok("apply", "-f", "-", stdin=notebook("big", "team", {"memory": "2Gi"}))
    deadline = time.monotonic() + 60
    while scheduled(status_of(kubectl, "big", "team")).get("status") != "False":
        assert time.monotonic() < deadline, status_of(kubectl, "big", "team")
        time.sleep(0.5)
    message = scheduled(status_of(kubectl, "big", "team"))["message"]
    assert "exceeded quota: compute" in message, message
    kubectl.ok("delete", "notebook", "big", "-n", "team")


def test_two_notebooks_share_one_gpu_by_memory_and_a_third_waits_saying_why(kubectl: Kubectl) -> None:
    for name in ("left", "right"):
        kubectl.ok("apply", "-f", "-", stdin=notebook(name, "default", {"aliyun.com/gpu-mem": "6"}))
    deadline = time.monotonic() + 180
    for name in ("left", "right"):
        while status_of(kubectl, name).get("readyReplicas") != 1:
            assert time.monotonic() < deadline, status_of(kubectl, name)
            time.sleep(0.5)
    kubectl.ok("apply", "-f", "-", stdin=notebook("third", "default", {"aliyun.com/gpu-mem": "6"}))
    while scheduled(status_of(kubectl, "third")).get("status") != "False":
        assert time.monotonic() < deadline, status_of(kubectl, "third")
        time.sleep(0.5)
    assert "needs a share of 6.0 GiB" in scheduled(status_of(kubectl, "third"))["message"]

    served = kubectl.config.read_text().split("server: ", 1)[1].split()[0]
    base = f"{served}/notebook/default/left"
    answered, text = request(f"{base}/api/kernels", "POST", {"name": "python3"})
    assert answered == 201, text
    channels = base.replace("http://", "ws://") + f"/api/kernels/{json.loads(text)['id']}/channels"
    shown = execute(channels, "import os; os.environ['CUDA_VISIBLE_DEVICES'], "
                              "os.environ['MILLPOND_GPU_MEMORY_FRACTION']")
    assert shown == "('0', '0.3750')", shown
    for name in ("left", "right", "third"):
        kubectl.ok("delete", "notebook", name)

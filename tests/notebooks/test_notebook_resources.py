"""A Notebook's resources as any pod's: GPUs granted by the machine's ledger (``CUDA_VISIBLE_DEVICES`` in its
kernels), a notebook that finds none free waits with the reason, one past its namespace's ResourceQuota
waits naming the quota, one labelled with a Kueue LocalQueue waits for its ClusterQueue's quota with Kueue's
reason; each waiting one starts once the one ahead is stopped (``MILLPOND_FAKE_GPUS``: one fake GPU of 16 GiB)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millpond.notebooks import objects
from millpond.notebooks.queueing import QueueLabels, queue_labels
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore
from tests.kube_support import Kubectl, kubectl_for
from tests.notebooks.support import execute, request
from tests.server_support import Served, module_home

pytestmark = pytest.mark.timeout(600)


def notebook(name: str, namespace: str, limits: dict[str, str], labels: dict[str, str] | None = None) -> str:
    metadata = {"name": name, "namespace": namespace, **({"labels": labels} if labels else {})}
    return json.dumps({
        "apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": metadata,
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


def wait_ready(kubectl: Kubectl, name: str, namespace: str = "default", timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while status_of(kubectl, name, namespace).get("readyReplicas") != 1:
        assert time.monotonic() < deadline, status_of(kubectl, name, namespace)
        time.sleep(0.5)


def wait_unscheduled(kubectl: Kubectl, name: str, namespace: str = "default", timeout: float = 120) -> dict[str, Any]:
    """The notebook's PodScheduled condition once it is False (it waits)."""
    deadline = time.monotonic() + timeout
    while scheduled(status_of(kubectl, name, namespace)).get("status") != "False":
        assert time.monotonic() < deadline, status_of(kubectl, name, namespace)
        time.sleep(0.5)
    return scheduled(status_of(kubectl, name, namespace))


def stop(kubectl: Kubectl, name: str, namespace: str = "default") -> None:
    kubectl.ok("annotate", "notebook", name, "-n", namespace, "kubeflow-resource-stopped=2026-01-01T00:00:00Z")


def kernel_answer(kubectl: Kubectl, name: str, code: str, namespace: str = "default") -> str:
    served = kubectl.config.read_text().split("server: ", 1)[1].split()[0]
    base = f"{served}/notebook/{namespace}/{name}"
    answered, text = request(f"{base}/api/kernels", "POST", {"name": "python3"})
    assert answered == 201, text
    return execute(base.replace("http://", "ws://") + f"/api/kernels/{json.loads(text)['id']}/channels", code)


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
    # within the quota one runs, the next waits naming it, and starts once the first is stopped
    kubectl.ok("apply", "-f", "-", stdin=notebook("one", "team", {"memory": "1Gi"}))
    wait_ready(kubectl, "one", "team")
    kubectl.ok("apply", "-f", "-", stdin=notebook("two", "team", {"memory": "1Gi"}))
    waiting = wait_unscheduled(kubectl, "two", "team")
    assert "exceeded quota: compute" in waiting["message"] and waiting["reason"] == "Unschedulable", waiting
    stop(kubectl, "one", "team")
    wait_ready(kubectl, "two", "team")
    for name in ("one", "two"):
        kubectl.ok("delete", "notebook", name, "-n", "team")


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
    assert kernel_answer(kubectl, "right", "import os; os.environ['CUDA_VISIBLE_DEVICES'], "
                                           "os.environ['MILLPOND_GPU_MEMORY_FRACTION']") == "('0', '0.3750')"
    assert status_of(kubectl, "third")["readyReplicas"] == 0
    stop(kubectl, "left")  # its share given back: the waiting one starts, on the same GPU
    wait_ready(kubectl, "third")
    assert kernel_answer(kubectl, "third", "import os; os.environ['CUDA_VISIBLE_DEVICES']") == "'0'"
    for name in ("left", "right", "third"):
        kubectl.ok("delete", "notebook", name)


def kueue_objects(cpu: str) -> str:
    """A ResourceFlavor, a ClusterQueue of ``cpu`` CPUs and the LocalQueue ``notebooks`` of ``default``."""
    return "\n---\n".join(json.dumps(one) for one in [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "nb-flavor"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "nb-cq"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{
             "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
             "flavors": [{"name": "nb-flavor", "resources": [
                 {"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "64Gi"},
                 {"name": "nvidia.com/gpu", "nominalQuota": 0}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "notebooks", "namespace": "default"}, "spec": {"clusterQueue": "nb-cq"}}])


def test_a_notebook_in_a_kueue_localqueue_is_admitted_like_any_workload_and_waits_with_kueues_reason(
        kubectl: Kubectl) -> None:
    kubectl.ok("apply", "-f", "-", stdin=kueue_objects("1"))
    queued = {"kueue.x-k8s.io/queue-name": "notebooks"}
    kubectl.ok("apply", "-f", "-", stdin=notebook("q1", "default", {"cpu": "1", "memory": "1Gi"}, queued))
    wait_ready(kubectl, "q1")
    assert kernel_answer(kubectl, "q1", "1+1") == "2"
    kubectl.ok("apply", "-f", "-", stdin=notebook("q2", "default", {"cpu": "1", "memory": "1Gi"}, queued))
    waiting = wait_unscheduled(kubectl, "q2")
    assert waiting["reason"] == "SchedulingGated", waiting  # Kueue's gate on the pod
    assert waiting["message"].startswith("Kueue: Pending: ") and "cpu" in waiting["message"], waiting
    assert status_of(kubectl, "q2")["readyReplicas"] == 0
    # a notebook in no queue is not held by the ClusterQueue's quota
    kubectl.ok("apply", "-f", "-", stdin=notebook("free", "default", {"cpu": "1"}))
    wait_ready(kubectl, "free")
    stop(kubectl, "q1")  # a stopped notebook holds no quota: the waiting one is admitted
    wait_ready(kubectl, "q2")
    assert kernel_answer(kubectl, "q2", "1+1") == "2"
    kubectl.ok("annotate", "notebook", "q1", "kubeflow-resource-stopped-")  # started again: now it waits
    assert wait_unscheduled(kubectl, "q1")["reason"] == "SchedulingGated"
    for name in ("q1", "q2", "free"):
        kubectl.ok("delete", "notebook", name)


def test_the_queue_is_read_from_the_metadata_else_from_the_pod_template() -> None:
    def manifest(labels: dict[str, str], template: dict[str, str]) -> dict[str, Any]:
        return {"metadata": {"name": "n", "labels": labels},
                "spec": {"template": {"metadata": {"labels": template}, "spec": {"containers": [{}]}}}}

    queue, priority = "kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/priority-class"
    assert queue_labels(manifest({}, {})) is None
    assert queue_labels(manifest({queue: "a", priority: "high"}, {queue: "b"})) == QueueLabels("a", "high")
    assert queue_labels(manifest({"other": "x"}, {queue: "b"})) == QueueLabels("b", "")
    assert queue_labels({"metadata": {"labels": None}, "spec": {"template": None}}) is None

"""A RayCluster applied here is a local Ray cluster: its head and workers run, a task runs on it, its
status reads as KubeRay's, and deleting it (or its head dying) ends every one of its processes."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from millpond.kuberay.node_view import ray_nodes
from millpond.settings import load_settings
from tests.kuberay.conftest import alive, get, run_driver, wait_for, write

CLUSTER = """\
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: {name}
spec:
  headGroupSpec:
    rayStartParams: {{num-cpus: "0"}}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.52.0
          env: [{{name: FROM_SPEC, value: "yes"}}]
          resources:
            limits: {{cpu: "1", memory: 1Gi}}
            requests: {{cpu: 100m, memory: 256Mi}}
  workerGroupSpecs:
  - groupName: small
    replicas: {workers}
    minReplicas: 0
    maxReplicas: 3
    rayStartParams: {{}}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.52.0
          resources:
            limits: {{cpu: "1", memory: 1Gi}}
            requests: {{cpu: 100m, memory: 256Mi}}
"""


def _ready(status: dict[str, Any]) -> bool:
    return status.get("state") == "ready"


def _failures(status: dict[str, Any]) -> list[str]:
    """The messages of its ReplicaFailure conditions (none: an empty list)."""
    return [c["message"] for c in status.get("conditions") or () if c["type"] == "ReplicaFailure"]


def test_a_cluster_runs_a_task_on_its_worker_and_delete_ends_every_process(
        kuberay_home: Path, cli: Callable[..., Any]) -> None:
    manifest = write(kuberay_home.parent, "cluster.yaml", CLUSTER.format(name="tasks", workers=1))
    applied = cli("apply", "-f", manifest)
    assert applied.code == 0, applied.err
    assert "raycluster.ray.io/tasks created" in applied.out
    status = wait_for(cli, "raycluster", "tasks", _ready)
    counts = (status["desiredWorkerReplicas"], status["readyWorkerReplicas"], status["availableWorkerReplicas"])
    assert counts == (1, 1, 1)
    assert (status["minWorkerReplicas"], status["maxWorkerReplicas"]) == (0, 3)
    assert (status["desiredCPU"], status["desiredMemory"], status["desiredGPU"]) == ("200m", "512Mi", "0")
    assert set(status["endpoints"]) == {"client", "dashboard", "gcs-server", "metrics"}
    assert status["head"]["podIP"] == "127.0.0.1"
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"HeadPodReady": "True",
                                                                       "RayClusterProvisioned": "True"}
    table = cli("get", "rayclusters")
    assert table.out.split("\n")[0].split() == ["NAME", "DESIRED", "WORKERS", "AVAILABLE", "WORKERS", "CPUS", "MEMORY",
                                                 "GPUS", "STATUS", "AGE"]
    assert table.out.split("\n")[1].split()[:7] == ["tasks", "1", "1", "200m", "512Mi", "0", "ready"]

    nodes = ray_nodes(load_settings(), "default", "tasks")
    assert sorted((node.group, node.head, node.phase, node.ready) for node in nodes) == [
        ("headgroup", True, "Running", True), ("small", False, "Running", True)]
    assert all(node.labels["ray.io/cluster"] == "tasks" and Path(node.log_path).is_file() for node in nodes)
    # the head declares no CPU (rayStartParams num-cpus 0): a task runs on the worker, the head's env has the spec's
    ran = run_driver(kuberay_home, status["endpoints"]["gcs-server"], (
        "import os\n"
        "@ray.remote(num_cpus=1)\n"
        "def where(): return ray.get_runtime_context().get_node_id()\n"
        "print('CPUS', ray.cluster_resources().get('CPU'), 'NODES', len([n for n in ray.nodes() if n['Alive']]))\n"
        "print('RAN', ray.get(where.remote()))\n"))
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "CPUS 1.0 NODES 2" in ran.stdout
    pids = [(node.pid, node.ticks) for node in nodes if node.pid is not None]
    assert len(pids) == 2 and alive(pids) == [pid for pid, _ in pids]
    assert b"FROM_SPEC=yes" in Path(f"/proc/{[n.pid for n in nodes if n.head][0]}/environ").read_bytes()

    pods = json.loads(cli("get", "pods", "-l", "ray.io/cluster=tasks", "-o", "json").out)["items"]
    assert sorted((pod["metadata"]["name"], pod["spec"]["containers"][0]["name"], pod["status"]["phase"])
                  for pod in pods) == sorted((node.name, "ray-head" if node.head else "ray-worker", "Running")
                                             for node in nodes)
    assert {pod["metadata"]["ownerReferences"][0]["kind"] for pod in pods} == {"RayCluster"}

    # a worker that dies is started again: ReplicaFailure names it until every worker is ready again (KubeRay
    # removes the condition at its first reconcile without an error)
    worker = next(node for node in nodes if not node.head)
    assert worker.pid is not None
    os.kill(worker.pid, signal.SIGKILL)
    failing = wait_for(cli, "raycluster", "tasks", lambda s: _failures(s) != [])
    assert failing["conditions"][-1]["status"] == "True" and f"(pid {worker.pid})" in _failures(failing)[0]
    wait_for(cli, "raycluster", "tasks", lambda s: _ready(s) and s["readyWorkerReplicas"] == 1 and not _failures(s))

    deleted = cli("delete", "raycluster", "tasks")
    assert deleted.code == 0, deleted.err
    assert alive(pids) == []
    assert cli("get", "raycluster", "tasks").code != 0
    assert ray_nodes(load_settings(), "default", "tasks") == []


def test_a_head_killed_fails_the_cluster_saying_so_and_its_workers_end(
        kuberay_home: Path, cli: Callable[..., Any]) -> None:
    manifest = write(kuberay_home.parent, "cluster.yaml", CLUSTER.format(name="fragile", workers=1))
    assert cli("apply", "-f", manifest).code == 0
    wait_for(cli, "raycluster", "fragile", _ready)
    nodes = ray_nodes(load_settings(), "default", "fragile")
    head = next(node for node in nodes if node.head)
    assert head.pid is not None
    os.kill(head.pid, signal.SIGKILL)
    status = wait_for(cli, "raycluster", "fragile", lambda s: s.get("state") == "failed")
    assert f"the head node {head.name} (pid {head.pid}) was killed by signal 9" in status["reason"]
    assert {c["type"]: c["status"] for c in status["conditions"]}["HeadPodReady"] == "False"
    assert alive([(node.pid, node.ticks) for node in nodes if node.pid is not None]) == []
    assert "failed" in cli("get", "rayclusters").out
    assert get(cli, "raycluster", "fragile")["status"]["availableWorkerReplicas"] == 0

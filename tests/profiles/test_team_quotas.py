"""Seed 003's two limits, as ``examples/seed003/team_quotas`` sets them up: a project's total GPUs (the Profile's
``resourceQuotaSpec``, a ResourceQuota on its namespace) and each user's allocation (a Kueue ClusterQueue of 1
GPU per user), on a multi-user server where each user submits PyTorchJobs through the Kubernetes API with
their own token. With four fake GPUs, the machine is never what holds a job back:

- alice's second job waits with Kueue's per-user reason (naming her, the authenticated user) while the
  project still has room;
- bob's job runs: the project is now at its total;
- carol's job, admitted by her own queue, waits with kube-apiserver's ``exceeded quota`` line;
- bob's job ending admits carol's.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond.kuberay.nodes import ray_binary
from millpond.store.training import JobStore
from millpond.store.workloads import WorkloadStore
from tests.profiles.support import MultiUserServer, user_token
from tests.queues_support import until

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "seed003" / "team_quotas"
NAMESPACE = "team-vision"
JOBS = f"/apis/kubeflow.org/v1/namespaces/{NAMESPACE}/pytorchjobs"


@pytest.fixture
def server(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MultiUserServer]:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "4")  # the ledger's test-only inventory: room for every job here
    served = MultiUserServer()
    yield served
    served.stop()


def _job(name: str, queue: str, gates: Path) -> dict[str, Any]:
    """The example's job, renamed, in ``queue``, running until its gate file appears."""
    job = copy.deepcopy(yaml.safe_load((EXAMPLE / "train-job.yaml").read_text()))
    job["metadata"].update(name=name, labels={"kueue.x-k8s.io/queue-name": queue})
    container = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    container["command"] = ["sh", "-c", f"while [ ! -e {gates}/{name} ]; do sleep 0.1; done"]
    return job


def _state(name: str) -> tuple[str, str]:
    job = JobStore().get(name, NAMESPACE)
    assert job is not None
    return job.status, job.message or ""


def test_a_users_allocation_and_the_projects_total_both_hold(server: MultiUserServer, cli, tmp_path: Path) -> None:
    tokens = {name: user_token(f"{name}@example.com") for name in ("alice", "bob", "carol")}
    applied = cli("apply", "-f", EXAMPLE / "profile.yaml", "-f", EXAMPLE / "user-queues.yaml")  # the administrator
    assert applied.code == 0, applied.err
    for contributor in ("bob", "carol"):  # the owner lets her team in (the dashboard's Manage contributors)
        body = {"user": {"kind": "User", "name": f"{contributor}@example.com"}, "referredNamespace": NAMESPACE,
                "roleRef": {"kind": "ClusterRole", "name": "edit"}}
        assert server.call("POST", "/kfam/v1/bindings", tokens["alice"], body)[0] == 200

    def submit(user: str, name: str) -> None:
        status, answer = server.call("POST", JOBS, tokens[user], _job(name, user, tmp_path))
        assert status == 201, answer

    submit("alice", "a1")
    until(lambda: _state("a1")[0] == "RUNNING", 90, "alice's first job running")
    submit("alice", "a2")
    state, message = until(lambda: "insufficient unused quota" in _state("a2")[1] and _state("a2"), 60,
                           "Kueue's per-user reason")
    assert state != "RUNNING" and "ClusterQueue team-vision-alice: nominal 1, 1 used" in message, message
    assert "job team-vision/a1 (alice@example.com)" in message  # the authenticated user, not a header's claim
    quota = yaml.safe_load(cli("get", "resourcequota", "kf-resource-quota", "-n", NAMESPACE, "-o", "yaml").out)
    assert quota["status"]["used"] == {"requests.nvidia.com/gpu": "1"}  # the project still has room

    submit("bob", "b1")
    until(lambda: _state("b1")[0] == "RUNNING", 90, "bob's job running")
    submit("carol", "c1")
    exceeded = ("exceeded quota: kf-resource-quota, requested: requests.nvidia.com/gpu=1, "
                "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2")
    state, message = until(lambda: exceeded in _state("c1")[1] and _state("c1"), 60, "the project's quota reason")
    assert state == "QUEUING", (state, message)
    users = {record.name: record.user for record in WorkloadStore().list(namespace=NAMESPACE)}
    assert users == {"a1": "alice@example.com", "a2": "alice@example.com", "b1": "bob@example.com",
                     "c1": "carol@example.com"}

    (tmp_path / "b1").touch()  # bob's job ends: its GPU goes back to the project, carol's job is admitted
    until(lambda: _state("b1")[0] == "SUCCEEDED", 60, "bob's job to end")
    until(lambda: _state("c1")[0] == "RUNNING", 60, "carol's job admitted by the freed quota")
    assert _state("a2")[0] != "RUNNING"  # alice's allocation still holds
    for name in ("a1", "a2", "c1"):
        (tmp_path / name).touch()
    for name in ("a1", "a2", "c1"):
        until(lambda name=name: _state(name)[0] == "SUCCEEDED", 90, f"{name} to end")


RAY_CLUSTER = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "queued", "namespace": NAMESPACE,
                            "labels": {"kueue.x-k8s.io/queue-name": "nowhere"}},
               "spec": {"headGroupSpec": {"template": {"spec": {"containers": [
                   {"name": "ray-head", "image": "rayproject/ray:2.52.0",
                    "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}]}}}}}


def test_a_rayclusters_workload_records_who_applied_it(server: MultiUserServer, cli) -> None:
    """KubeRay's workloads see the authenticated user too (its LocalQueue is missing: it waits, starting nothing)."""
    if ray_binary() is None:
        pytest.skip("ray is not installed (pip install 'millpond[ray]')")
    token = user_token("alice@example.com")
    assert cli("apply", "-f", EXAMPLE / "profile.yaml").code == 0
    status, answer = server.call("POST", f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayclusters", token, RAY_CLUSTER)
    assert status == 201, answer
    (workload,) = until(lambda: WorkloadStore().list(namespace=NAMESPACE), 60, "the RayCluster's workload")
    assert (workload.name, workload.user) == ("queued", "alice@example.com")
    assert cli("delete", "raycluster", "queued", "-n", NAMESPACE).code == 0

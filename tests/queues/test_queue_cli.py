"""``millpond queue create|list|get|delete``: the objects ``create`` writes are those a manifest would write
(applying that manifest afterwards changes nothing), ``list``/``get`` show quotas as quantities,
and bad flags are one ``error:`` line, exit 2, nothing stored."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from millpond.scheduling.queues.kinds import KINDS
from millpond.store.resources import ResourceStore

pytestmark = pytest.mark.usefixtures("database")  # SQLite, then PostgreSQL

MANIFEST = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
spec: {}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: alice}
spec:
  cohortName: project-a
  namespaceSelector: {}
  queueingStrategy: StrictFIFO
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: "8", borrowingLimit: "2"}
      - {name: memory, nominalQuota: 32Gi}
      - {name: nvidia.com/gpu, nominalQuota: "4"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: alice, namespace: project-a}
spec: {clusterQueue: alice}
"""
CREATE = ("queue", "create", "alice", "--cpu", "8", "--memory", "32Gi", "--gpus", "4", "--cohort", "project-a",
          "-n", "project-a", "--strategy", "StrictFIFO", "--preemption", "LowerPriority", "--reclaim", "Any",
          "--borrowing-limit", "cpu=2")


def test_create_writes_what_the_manifest_would(cli, tmp_path: Path) -> None:
    created = cli(*CREATE)
    assert created.code == 0, created.err
    assert created.out.splitlines() == ["resourceflavor.kueue.x-k8s.io/default-flavor created",
                                        "clusterqueue.kueue.x-k8s.io/alice created",
                                        "localqueue.kueue.x-k8s.io/alice created"]
    path = tmp_path / "queues.yaml"
    path.write_text(MANIFEST)
    applied = cli("apply", "-f", path)
    assert applied.code == 0 and applied.out.split("\n")[:3] == [
        "resourceflavor.kueue.x-k8s.io/default-flavor unchanged", "clusterqueue.kueue.x-k8s.io/alice unchanged",
        "localqueue.kueue.x-k8s.io/alice unchanged"], applied.out
    second = cli("queue", "create", "bob", "--cpu", "500m", "--cohort", "project-a", "-n", "project-a")
    assert second.out.splitlines()[0] == "clusterqueue.kueue.x-k8s.io/bob created"  # the flavor exists now


def test_list_and_get_show_quota(cli) -> None:
    assert cli(*CREATE).code == 0
    assert cli("queue", "create", "bob", "--cpu", "1500m", "--gpu-memory", "24", "-n", "project-b").code == 0
    listed = cli("queue", "list")
    rows = [line.split() for line in listed.out.splitlines()]
    assert rows[0] == ["NAME", "COHORT", "STRATEGY", "LOCAL", "QUEUES", "CPU", "MEMORY", "GPUS", "GPU", "MEMORY",
                       "ADMITTED", "PENDING"]
    assert rows[1:] == [["alice", "project-a", "StrictFIFO", "project-a/alice", "0/8", "0/32Gi", "0/4", "-", "0", "0"],
                        ["bob", "-", "BestEffortFIFO", "project-b/bob", "0/1500m", "-", "-", "0", "GiB/24", "GiB",
                         "0", "0"]]
    assert listed.err == ""
    shown = cli("queue", "get", "alice", "-o", "json").json()
    assert shown["quota"][0] == {"flavor": "default-flavor", "resource": "cpu", "nominalQuota": "8", "used": "0",
                                 "borrowingLimit": "2"}
    assert shown["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    table = cli("queue", "get", "alice").out
    assert "Local queues:    project-a/alice" in table and "default-flavor   memory" in table
    assert yaml.safe_load(cli("queue", "list", "-o", "yaml").out)["queues"][1]["name"] == "bob"


def test_delete_takes_the_local_queues_with_it(cli) -> None:
    assert cli(*CREATE).code == 0
    deleted = cli("queue", "delete", "alice")
    assert deleted.code == 0 and deleted.out.splitlines() == [
        'localqueue.kueue.x-k8s.io "alice" deleted (namespace project-a)',
        'clusterqueue.kueue.x-k8s.io "alice" deleted']
    assert ResourceStore().list("LocalQueue", None) == [] and ResourceStore().get("ResourceFlavor", "default-flavor")
    again = cli("queue", "delete", "alice")
    assert again.code == 2 and again.err.strip() == 'error: clusterqueues.kueue.x-k8s.io "alice" not found'


@pytest.mark.parametrize(("args", "says"), [
    ((), "give a quota: --cpu, --memory, --gpus and/or --gpu-memory"),
    (("--cpu", "-1"), "nominalQuota: Invalid value: '-1': must be greater than or equal to 0"),
    (("--cpu", "lots"), "nominalQuota"),
    (("--cpu", "1", "--borrowing-limit", "cpu=1"), "borrowingLimit: Invalid value: '1': must be nil when cohort"),
    (("--cpu", "1", "--borrowing-limit", "memory=1"), "--borrowing-limit: 'memory=1': use RESOURCE=AMOUNT"),
    (("--cpu", "1", "--cohort", "Bad Name"), "cohortName"),
    (("--cpu", "1", "-n", "../etc"), '--namespace/-n: Invalid value: "../etc": a lowercase RFC 1123 label'),
    (("--cpu", "1", "--strategy", "Random"), 'spec.queueingStrategy: "Random" is not one of'),
    (("--cpu", "1", "--preemption", "Any"), 'spec.preemption.withinClusterQueue: "Any" is not one of'),
])
def test_bad_create_is_one_line_exit_2_nothing_stored(cli, args: tuple[str, ...], says: str) -> None:
    result = cli("queue", "create", "carol", *args)
    assert result.code == 2, (result.out, result.err)
    lines = [line for line in result.err.strip().splitlines() if line.startswith("error")]
    assert len(lines) == 1 and says in lines[0], result.err
    assert "Traceback" not in result.err and result.out == ""
    assert all(ResourceStore().list(kind, None) == [] for kind in KINDS)


def test_create_refuses_a_queue_that_exists(cli) -> None:
    assert cli("queue", "create", "carol", "--cpu", "1").code == 0
    again = cli("queue", "create", "carol", "--cpu", "2")
    assert again.code == 2 and 'ClusterQueue "carol" already exists' in again.err
    assert ResourceStore().get("ClusterQueue", "carol").spec["resourceGroups"][0]["flavors"][0]["resources"][0][
        "nominalQuota"] == "1"


def test_list_and_get_show_usage_holders_and_why_each_pending_workload_waits(cli) -> None:
    """Real workloads through the admission cycle: two fit in alice's 8 CPUs, the third waits, position 0."""
    from millpond.scheduling.queues.cycle import run_cycle, submit
    from millpond.settings import load_settings

    assert cli(*CREATE).code == 0
    settings = load_settings()
    for name, cpus in (("train-a", 3000), ("train-b", 4000), ("train-c", 2000)):
        submit(settings, kind="job", name=name, namespace="project-a", user="alice", queue="alice",
               requests={"cpu": cpus, "memory": 2**30 * 1000})
        run_cycle(settings)
    listed = [line.split() for line in cli("queue", "list").out.splitlines()]
    assert listed[1] == ["alice", "project-a", "StrictFIFO", "project-a/alice", "7/8", "2Gi/32Gi", "0/4", "-", "2",
                         "1"]
    shown = cli("queue", "get", "alice", "-o", "json").json()
    assert [w["name"] for w in shown["admitted"]] == ["train-a", "train-b"]
    assert shown["admitted"][0]["flavors"]["cpu"] == "default-flavor"
    [waiting] = shown["pending"]
    assert (waiting["name"], waiting["position"]) == ("train-c", 0)
    assert "insufficient" in waiting["reason"] and "cpu" in waiting["reason"], waiting["reason"]
    table = cli("queue", "get", "alice").out
    assert "Pending workloads: 1" in table and "job project-a/train-c (alice)" in table
    assert "default-flavor   cpu              8         7" in table, table
    # kubectl's view of the same: Kueue's printer columns and status fields
    rows = [line.split() for line in cli("get", "clusterqueues").out.splitlines()]
    assert rows[0][:7] == ["NAME", "COHORT", "STRATEGY", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS"]
    assert rows[1][:5] == ["alice", "project-a", "StrictFIFO", "1", "2"]
    status = cli("get", "cq", "alice", "-o", "json").json()["status"]
    assert (status["pendingWorkloads"], status["admittedWorkloads"], status["reservingWorkloads"]) == (1, 2, 2)
    [usage] = status["flavorsUsage"]
    assert usage["name"] == "default-flavor"
    assert {"name": "cpu", "total": "7", "borrowed": "0"} in usage["resources"]
    local = cli("get", "lq", "alice", "-n", "project-a", "-o", "json").json()["status"]
    assert (local["pendingWorkloads"], local["admittedWorkloads"]) == (1, 2)
    assert cli("get", "lq", "-n", "project-a").out.splitlines()[1].split()[:4] == ["alice", "alice", "1", "2"]

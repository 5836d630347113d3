"""The arena CLI's contract: bad input is one ``error:`` line, exit 2, no job recorded; ``get -o json``
has the shape of Arena's TrainingJobInfo; cluster-only flags are accepted with one info line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from millpond.store.resources import ResourceStore
from millpond.store.training import JobStore
from tests.training_support import arena, wait_status

BAD = [
    (["submit", "pytorch", "--name", "j", "--data", "nosuch:/data", "true"], "no dataset nosuch"),
    (["submit", "pytorch", "--name", "j", "-e", "NOEQUALS", "true"], "--env 'NOEQUALS' must be KEY=VALUE"),
    (["submit", "pytorch", "--name", "j", "-e", "=x", "true"], "must be KEY=VALUE"),
    (["submit", "pytorch", "--name", "j", "--workers", "0", "true"], "--workers 0"),
    (["submit", "pytorch", "--name", "j"], "no command"),
    (["submit", "pytorch", "--name", "j", "  "], "no command"),
    (["submit", "caffe", "--name", "j", "true"], "caffe"),
    (["submit", "pytorch", "true"], "--name"),
    (["submit", "pytorch", "--name", "Bad_Name", "true"], "DNS-1123"),
    (["submit", "pytorch", "--name", "j", "--data", "nocolon", "true"], "NAME:/ABSOLUTE/PATH"),
    (["submit", "pytorch", "--name", "j", "--data-dir", "/nonexistent-dir:/x", "true"], "not a folder"),
    (["submit", "pytorch", "--name", "j", "--running-timeout", "soon", "true"], "--running-timeout"),
    (["submit", "pytorch", "--name", "j", "--clean-task-policy", "Sometimes", "true"], "--clean-task-policy"),
    (["submit", "pytorch", "--name", "j", "--cpu", "lots", "true"], "--cpu"),
    (["submit", "pytorch", "--name", "j", "--gpus", "-1", "true"], "--gpus"),
    (["submit", "pytorch", "--name", "j", "-e", "BAD NAME=1", "true"], "not a valid variable name"),
    (["submit", "pytorch", "--name", "j", "--data-dir", "/tmp:/", "true"], "nothing can be mounted at '/'"),
    (["submit", "pytorch", "--name", "j", "--data-dir", "/tmp:/x", "--data-dir", "/var:/x/", "true"],
     "/x is mounted twice"),
    (["submit", "pytorch", "--name", "j", "--data-dir", "tmp:/x", "true"], "/HOST/PATH:/ABSOLUTE/PATH"),
]


@pytest.mark.parametrize(("args", "says"), BAD, ids=[" ".join(a[2:] or a) for a, _ in BAD])
def test_bad_input_is_one_error_line_and_records_nothing(capsys, home: Path, args: list[str], says: str) -> None:
    result = arena(capsys, *args)
    assert result.code == 2, result
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.err
    assert "Traceback" not in result.err
    assert JobStore().list(None) == []


def test_a_duplicate_name_is_refused_and_the_first_job_kept(capsys, home: Path) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "once", "true").code == 0
    again = arena(capsys, "submit", "pytorch", "--name", "once", "--workers", "3", "true")
    assert again.code == 2 and again.err.strip() == "error: the job once already exists in namespace default"
    (job,) = JobStore().list(None)
    assert job.spec["replicas"][0]["replicas"] == 1 and len(job.spec["replicas"]) == 1
    wait_status(capsys, "once")


def test_get_json_has_arenas_training_job_info_shape(capsys, home: Path) -> None:
    # -p names a WorkloadPriorityClass, looked up at submit as Arena looks up its PriorityClass
    ResourceStore().apply([{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                            "metadata": {"name": "high"}, "value": 1000}])
    result = arena(capsys, "submit", "pytorchjob", "--name", "shape", "--workers", "2", "-p", "high",
                   "--toleration", "gpu", "--rdma", "true")
    assert result.code == 0
    assert result.err.splitlines()[0] == (
        "info: --toleration, --rdma only mean something on a Kubernetes cluster; ignored on this machine")
    info = wait_status(capsys, "shape")
    assert set(info) >= {"name", "namespace", "uuid", "status", "trainer", "duration", "priority", "requestGPUs",
                         "allocatedGPUs", "creationTimestamp", "instances"}
    assert (info["name"], info["namespace"], info["status"], info["trainer"], info["priority"]) == (
        "shape", "default", "SUCCEEDED", "pytorchjob", "high")
    assert (info["requestGPUs"], info["allocatedGPUs"]) == (0, 0)
    assert isinstance(info["creationTimestamp"], int) and info["duration"].endswith(("s", "m"))
    assert [i["name"] for i in info["instances"]] == ["shape-master-0", "shape-worker-0"]
    for instance in info["instances"]:
        assert set(instance) >= {"name", "status", "age", "node", "ip", "chief", "requestGPUs", "gpuMetrics"}
    assert [i["chief"] for i in info["instances"]] == [True, False]
    listed = arena(capsys, "list").out.splitlines()
    assert listed[0].split() == ["NAME", "STATUS", "TRAINER", "DURATION", "GPU(Requested)", "GPU(Allocated)", "NODE"]
    assert listed[1].split()[:3] == ["shape", "SUCCEEDED", "PYTORCHJOB"]
    assert json.loads(arena(capsys, "list", "-o", "json").out)[0]["uuid"] == info["uuid"]
    assert arena(capsys, "list", "-A").out.splitlines()[0].startswith("NAMESPACE")


def test_prune_deletes_only_finished_jobs_older_than_since(capsys, home: Path) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "old", "true").code == 0
    wait_status(capsys, "old")
    assert arena(capsys, "prune").code == 0  # Arena's default: older than 48h
    assert arena(capsys, "get", "old").code == 0
    assert arena(capsys, "prune", "--since", "0s").code == 0
    assert arena(capsys, "get", "old").code == 2

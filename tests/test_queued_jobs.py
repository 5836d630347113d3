"""Training jobs as Kueue workloads, from the user's side: ``arena submit --queue Q -p NAME`` (or Kueue's
labels, on the command line or in a manifest) records the queue, the priority class, the project and the
user; the workload's requests are the job's total over all its instances; ``-p`` naming no
WorkloadPriorityClass is refused at submit, as Arena refuses an unknown priority class."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond.scheduling.queues.model import CPU, GPU, MEMORY, PRIORITY_LABEL, QUEUE_LABEL, WorkloadKind
from millpond.store.resources import ResourceStore
from millpond.store.training import JobStore
from millpond.training.queueing import job_workload
from millpond.training.spec import spec_from_json
from tests.training_support import arena, record

pytestmark = pytest.mark.usefixtures("database")  # on SQLite and on PostgreSQL


@pytest.fixture
def two_gpus(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "2")  # the ledger's test-only GPU count (no device is touched)


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": name},
            "value": value, "description": f"{name} jobs"}


def apply_objects(*objects: dict[str, Any]) -> None:
    """Kueue objects as ``millpond apply -f`` stores them (cluster-scoped ones under ``default``)."""
    ResourceStore().apply(list(objects))


def test_queue_priority_project_and_user_are_recorded_and_the_workload_totals_every_instance(
        capsys, two_gpus) -> None:
    apply_objects(priority_class("high", 1000))
    result = arena(capsys, "submit", "pytorch", "--name", "big", "-n", "team-a", "--queue", "team-a-q", "-p", "high",
                   "--workers", "2", "--gpus", "1", "--cpu", "500m", "--memory", "1Gi", "true")
    assert result.code == 0, result.err
    job = record("big", "team-a")
    spec = spec_from_json(job.spec)
    assert (spec.queue, spec.priority, spec.user, job.namespace) == ("team-a-q", "high", getpass.getuser(), "team-a")
    shown = arena(capsys, "get", "big", "-n", "team-a").out
    assert "Queue:      team-a-q" in shown and f"User:       {getpass.getuser()}" in shown
    assert "Priority:   high" in shown
    workload = job_workload(job, spec)
    assert workload is not None and workload.kind is WorkloadKind.JOB and workload.pod_count == 2
    assert dict(workload.requests) == {CPU: 1000, MEMORY: 2 * 2**30 * 1000, GPU: 2000}  # milli-units, 2 instances
    assert (workload.namespace, workload.queue, workload.priority, workload.priority_class) == (
        "team-a", "team-a-q", 1000, "high")
    assert arena(capsys, "delete", "big", "-n", "team-a").code == 0


def test_kueues_labels_on_the_command_line_name_the_queue_as_the_flags_do(capsys, two_gpus) -> None:
    apply_objects(priority_class("low", 10))
    result = arena(capsys, "submit", "mpi", "--name", "labelled", "-l", f"{QUEUE_LABEL}=lq",
                   "-l", f"{PRIORITY_LABEL}=low", "--workers", "2", "true")
    assert result.code == 0, result.err
    spec = spec_from_json(record("labelled").spec)
    assert (spec.queue, spec.priority) == ("lq", "low")
    workload = job_workload(record("labelled"), spec)
    assert workload is not None and workload.pod_count == 3  # the launcher and 2 workers: admitted together
    clash = arena(capsys, "submit", "pytorch", "--name", "clash", "--queue", "a", "-l", f"{QUEUE_LABEL}=b", "true")
    assert clash.code == 2 and clash.err.strip() == (
        f"error: --queue a and --label {QUEUE_LABEL}=b name different ones; give one")
    arena(capsys, "delete", "labelled")


def test_a_job_without_a_queue_is_no_workload_and_its_spec_is_stored_as_before(capsys, two_gpus) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "plain", "true").code == 0
    job = record("plain")
    assert job_workload(job, spec_from_json(job.spec)) is None
    assert job.spec["queue"] == "" and job.spec["priority"] == ""
    arena(capsys, "delete", "plain")


@pytest.mark.parametrize(("args", "message"), [
    (("-p", "nosuch"), "error: --priority nosuch: no WorkloadPriorityClass nosuch "
                       "(millpond get workloadpriorityclasses; apply one with millpond apply -f)"),
    (("--queue", "Bad_Queue"), "error: --queue 'Bad_Queue' is not a valid queue name: lower case letters, digits, "
                               "'-' and '.'"),
    (("-p", "UPPER"), "error: --priority 'UPPER' is not a valid priority class name: lower case letters, digits, "
                      "'-', '.'"),
])
def test_bad_queueing_flags_are_refused_at_submit_in_one_line(capsys, two_gpus, args, message) -> None:
    """Arena looks ``-p`` up before it creates anything; nothing is stored, no supervisor starts."""
    result = arena(capsys, "submit", "pytorch", "--name", "refused", "--queue", "q", *args, "true")
    assert result.code == 2 and result.err.strip() == message and result.out == ""
    assert JobStore().list(None) == []


def test_a_manifest_names_its_queue_and_priority_class_with_kueues_labels(cli, tmp_path, two_gpus) -> None:
    """Kueue's webhook does not refuse a job whose priority class is missing: the manifest is accepted."""
    manifest = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                "metadata": {"name": "labelled", "namespace": "team-b",
                             "labels": {QUEUE_LABEL: "user-queue", PRIORITY_LABEL: "not-yet"}},
                "spec": {"runPolicy": {"schedulingPolicy": {"queue": "volcano-queue"}},
                         "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [
                             {"name": "pytorch", "image": "x", "command": ["true"],
                              "resources": {"requests": {"cpu": "250m"}}}]}}}}}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(manifest))
    result = cli("apply", "-f", path)
    assert result.code == 0, result.err
    spec = spec_from_json(record("labelled", "team-b").spec)
    assert (spec.queue, spec.priority, spec.user) == ("user-queue", "not-yet", getpass.getuser())
    cli("delete", "pytorchjob", "labelled", "-n", "team-b")
    volcano = {**manifest, "metadata": {"name": "volcano", "namespace": "team-b"}}
    path.write_text(yaml.safe_dump(volcano))
    assert cli("apply", "-f", path).code == 0
    assert spec_from_json(record("volcano", "team-b").spec).queue == ""  # Volcano's queue is not Kueue's
    cli("delete", "pytorchjob", "volcano", "-n", "team-b")

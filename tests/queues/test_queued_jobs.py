"""Training jobs as Kueue workloads, from the user's side: ``arena submit --queue Q -p NAME`` (or Kueue's
labels, on the command line or in a manifest) records the queue, the priority class, the project and the
user; the workload's requests are the job's total over all its instances; ``-p`` naming no
WorkloadPriorityClass is refused at submit, as Arena refuses an unknown priority class.

Then admission as users see it: a quota respected across ``arena submit`` processes (the third job
QUEUING with Kueue's reason and how many are ahead of it, running once one ends), preemption by a
higher priority that stops the victim and requeues it (it resumes from its checkpoint), StrictFIFO
against BestEffortFIFO, an unknown queue or priority class waited on with its reason."""

from __future__ import annotations

import getpass
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from millpond.scheduling.queues.model import CPU, GPU, GPU_MEMORY, MEMORY, PRIORITY_LABEL, QUEUE_LABEL, WorkloadKind
from millpond.store.training import JobStore
from millpond.store.workloads import WorkloadStore
from millpond.training.queueing import job_workload
from millpond.training.spec import spec_from_json
from tests.queues_support import apply_objects, priority_class, queues, until
from tests.training_support import arena, job_json, record, wait_status

ARENA_BIN = Path(sys.executable).parent / "arena"

pytestmark = pytest.mark.usefixtures("database")  # on SQLite and on PostgreSQL


@pytest.fixture
def two_gpus(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "2x16Gi")  # the ledger's test-only inventory (no device is touched)


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
    shared = arena(capsys, "submit", "pytorch", "--name", "shared", "--queue", "lq", "--workers", "2",
                   "--gpumemory", "3", "true")
    assert shared.code == 0, shared.err
    workload = job_workload(record("shared"), spec_from_json(record("shared").spec))
    assert workload is not None and dict(workload.requests) == {GPU_MEMORY: 6000}  # 2 × 3 GiB, gpushare's unit
    arena(capsys, "delete", "shared")
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


# --- admission ----------------------------------------------------------------------------------------
def gated(folder: Path, name: str) -> str:
    """A job command that says it started, then runs until its gate file appears."""
    return f'touch {folder}/{name}.started; while [ ! -e {folder}/{name}.gate ]; do sleep 0.1; done; echo done'


def status(name: str) -> tuple[str, str, str]:
    job = record(name)
    return job.status, job.reason or "", job.message or ""


@pytest.fixture
def three_gpus(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "3")  # the machine has room for 3: only the quota holds one back


def test_a_gpu_quota_holds_across_concurrent_submissions_and_the_third_waits_with_its_reason(
        capsys, three_gpus, tmp_path) -> None:
    apply_objects(*queues(("two-gpus", 2, {})))
    submits = [subprocess.Popen([str(ARENA_BIN), "submit", "pytorch", "--name", f"j{i}", "--queue", "two-gpus",
                                 "--gpus", "1", gated(tmp_path, f"j{i}")], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for i in range(3)]
    for process in submits:  # three processes at once, each starting its supervisor
        assert process.wait(60) == 0, process.stderr.read() if process.stderr else ""
    until(lambda: sorted(status(f"j{i}")[0] for i in range(3)) == ["QUEUING", "RUNNING", "RUNNING"], 60,
          "two jobs running, one queuing")
    (waiting,) = [f"j{i}" for i in range(3) if status(f"j{i}")[0] == "QUEUING"]
    state, reason, message = until(lambda: status(waiting)[1] == "Pending" and status(waiting), 30, "Kueue's reason")
    assert "nvidia.com/gpu" in message and "ahead of it in its ClusterQueue" in message, message
    shown = arena(capsys, "get", waiting, "-e").out
    assert "Reason:     Pending" in shown and "Pending" in shown.split("Events:")[1]
    conditions = job_json(capsys, waiting)  # Arena's shape; the message also in `arena list -o wide`
    assert conditions["status"] == "QUEUING"
    (row,) = [line for line in arena(capsys, "list", "-o", "wide").out.splitlines() if line.startswith(waiting)]
    assert "QUEUING" in row and "ahead of it in its ClusterQueue" in row, row
    running = [f"j{i}" for i in range(3) if f"j{i}" != waiting]
    assert not (tmp_path / f"{waiting}.started").exists()
    (tmp_path / f"{running[0]}.gate").touch()  # one ends: its quota goes to the waiting one
    assert wait_status(capsys, running[0])["status"] == "SUCCEEDED"
    until(lambda: (tmp_path / f"{waiting}.started").exists(), 30, "the third job to start")
    for name in (running[1], waiting):
        (tmp_path / f"{name}.gate").touch()
        assert wait_status(capsys, name)["status"] == "SUCCEEDED"


CHECKPOINTING = """
import os, signal, sys, time
path = "checkpoint.txt"
step = int(open(path).read()) if os.path.exists(path) else 0
print(f"resumed from step {step}" if step else "started from step 0", flush=True)
while step < int(sys.argv[1]):
    time.sleep(0.2)
    step += 1
    with open(path + ".tmp", "w") as out:
        out.write(str(step))
    os.replace(path + ".tmp", path)  # a checkpoint each step, never half-written
    print(f"step {step}", flush=True)
print("finished at step", step, flush=True)
"""


def test_a_higher_priority_preempts_the_job_which_is_requeued_and_resumes_from_its_checkpoint(
        capsys, cli, two_gpus, tmp_path) -> None:
    apply_objects(priority_class("low", 100), priority_class("high", 1000),
                  *queues(("one-gpu", 1, {"preemption": {"withinClusterQueue": "LowerPriority"}})))
    script = tmp_path / "train.py"
    script.write_text(CHECKPOINTING)
    work = tmp_path / "work"
    work.mkdir()
    assert arena(capsys, "submit", "pytorch", "--name", "low", "--queue", "one-gpu", "-p", "low", "--gpus", "1",
                 "--working-dir", work, f"{sys.executable} {script} 25").code == 0
    until(lambda: (work / "checkpoint.txt").exists() and int((work / "checkpoint.txt").read_text() or 0) >= 2,
          60, "the low job's second checkpoint")
    assert arena(capsys, "submit", "pytorch", "--name", "high", "--queue", "one-gpu", "-p", "high", "--gpus", "1",
                 "sleep 2; echo urgent").code == 0
    state, reason, message = until(lambda: status("low")[1] == "Preempted" and status("low"), 60, "the preemption")
    assert state == "QUEUING" and message.startswith("Preempted to accommodate a workload"), message
    conditions = yaml.safe_load(cli("get", "pytorchjob", "low", "-o", "yaml").out)["status"]["conditions"]
    assert [(c["type"], c["reason"]) for c in conditions][-1] == ("Evicted", "Preempted"), conditions
    cut = int((work / "checkpoint.txt").read_text())
    assert wait_status(capsys, "high")["status"] == "SUCCEEDED"
    assert wait_status(capsys, "low", timeout=90)["status"] == "SUCCEEDED"
    log = arena(capsys, "logs", "low").out
    assert f"resumed from step {cut}" in log or any(f"resumed from step {k}" in log for k in range(1, cut + 1)), log
    assert log.rstrip().endswith("finished at step 25")
    events = arena(capsys, "get", "low", "-e").out.split("Events:")[1]
    assert "Evicted" in events and "Preempted" in events


def test_strict_fifo_blocks_behind_its_head_and_best_effort_lets_a_smaller_job_by(capsys, tmp_path,
                                                                                   monkeypatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "4")
    apply_objects(*queues(("strict", 2, {"queueingStrategy": "StrictFIFO"}),
                          ("best-effort", 2, {"queueingStrategy": "BestEffortFIFO"})))
    for queue in ("strict", "best-effort"):
        holder, big, small = f"{queue}-holder", f"{queue}-big", f"{queue}-small"
        assert arena(capsys, "submit", "pytorch", "--name", holder, "--queue", queue, "--gpus", "1",
                     gated(tmp_path, holder)).code == 0
        until(lambda name=holder: (tmp_path / f"{name}.started").exists(), 60, holder)
        assert arena(capsys, "submit", "pytorch", "--name", big, "--queue", queue, "--gpus", "2", "true").code == 0
        until(lambda name=big: status(name)[1] == "Pending", 30, f"{big} pending")
        assert arena(capsys, "submit", "pytorch", "--name", small, "--queue", queue, "--gpus", "1", "true").code == 0
    until(lambda: status("best-effort-small")[0] == "SUCCEEDED", 60, "best effort lets the small job by")
    state, reason, message = until(lambda: status("strict-small")[1] == "Pending" and status("strict-small"), 30)
    assert state == "QUEUING" and "1 ahead of it" in message, message  # behind the big one, which blocks it
    assert status("best-effort-big")[0] == "QUEUING"
    for queue in ("strict", "best-effort"):
        (tmp_path / f"{queue}-holder.gate").touch()
    for name in ("strict-big", "strict-small", "best-effort-big"):
        assert wait_status(capsys, name)["status"] == "SUCCEEDED"


def test_an_unknown_queue_or_priority_class_in_a_manifest_is_waited_on_with_kueues_reason(
        capsys, cli, tmp_path, two_gpus) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "lost", "--queue", "nosuch", "true").code == 0
    state, reason, message = until(lambda: status("lost")[1] == "Pending" and status("lost"), 30)
    assert state == "QUEUING" and "LocalQueue nosuch doesn't exist in namespace default" in message
    created = yaml.safe_load(cli("get", "pytorchjob", "lost", "-o", "yaml").out)["status"]["conditions"][0]
    assert "Waiting: LocalQueue nosuch doesn't exist" in created["message"], created
    apply_objects(*queues(("later", 1, {})))
    manifest = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                "metadata": {"name": "unclassed", "labels": {QUEUE_LABEL: "later", PRIORITY_LABEL: "not-yet"}},
                "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [
                    {"name": "pytorch", "image": "x", "command": ["echo", "ran"]}]}}}}}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(manifest))
    assert cli("apply", "-f", path).code == 0
    state, reason, message = until(lambda: status("unclassed")[1] == "WorkloadPriorityClassNotFound"
                                   and status("unclassed"), 30)
    assert "WorkloadPriorityClass not-yet doesn't exist" in message
    apply_objects(priority_class("not-yet", 5))  # created later: the job goes on, as Kueue's would
    assert wait_status(capsys, "unclassed")["status"] == "SUCCEEDED"
    assert arena(capsys, "delete", "lost").code == 0  # its supervisor finishes its workload as it stops
    assert {(w.name, w.state) for w in WorkloadStore().list(namespace="default")} == {
        ("lost", "Finished"), ("unclassed", "Finished")}


def test_a_killed_supervisor_gives_its_quota_to_the_next_job(capsys, two_gpus, tmp_path) -> None:
    apply_objects(*queues(("solo", 1, {})))
    assert arena(capsys, "submit", "pytorch", "--name", "first", "--queue", "solo", "--gpus", "1",
                 gated(tmp_path, "first")).code == 0
    until(lambda: (tmp_path / "first.started").exists(), 60, "first")
    assert arena(capsys, "submit", "pytorch", "--name", "second", "--queue", "solo", "--gpus", "1", "true").code == 0
    until(lambda: status("second")[1] == "Pending", 30, "second pending")
    os.kill(record("first").supervisor_pid or 0, signal.SIGKILL)
    assert wait_status(capsys, "second")["status"] == "SUCCEEDED"  # the next cycle saw its holder gone
    assert wait_status(capsys, "first")["status"] == "FAILED"


def test_the_jobs_page_shows_a_queued_jobs_queue_and_why_it_waits(capsys, home, two_gpus) -> None:
    from tests.server_support import serving
    from tests.ui.test_server_ui import _browser, chromium_page

    sync_api = _browser()
    assert arena(capsys, "submit", "pytorch", "--name", "stuck", "--queue", "nosuch", "true").code == 0
    until(lambda: status("stuck")[1] == "Pending", 30, "the job's reason")
    try:
        for server in serving():
            with chromium_page() as (page, errors):
                page.goto(server.url + "/#/jobs")
                row = page.locator('tr.job-row[data-job="default/stuck"]')
                sync_api.expect(row.locator(".waiting")).to_contain_text(
                    "Pending: LocalQueue nosuch doesn't exist in namespace default", timeout=15_000)
                sync_api.expect(row).to_contain_text("nosuch")
                row.click()
                sync_api.expect(page.locator("#job-waiting")).to_contain_text("LocalQueue nosuch doesn't exist",
                                                                             timeout=15_000)
                assert not errors, errors
    finally:
        arena(capsys, "delete", "stuck")

"""``batch/v1`` Job through ``millpond apply/get/describe/delete``: real pods (processes) running ``python -c`` and
``sh`` commands, as Kubernetes' Job controller runs them.

completions 3 at parallelism 2 (never more than 2 at once), Indexed with ``JOB_COMPLETION_INDEX``, a failing
Job reaching its backoffLimit, activeDeadlineSeconds, restartPolicy OnFailure, suspend then resume by
re-applying, a Kueue-labelled Job held suspended until its queue admits it, ttlSecondsAfterFinished,
delete ending the pods, ``kill -9`` of the controller, ``get -o json`` applied back, and bad input refused
with one error line before anything is stored or started. The Job's life, Kueue and ``kill -9`` also run on
PostgreSQL (the ``database`` fixture).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond.runners.processes import is_running
from millpond.store.resources import ResourceStore
from millpond.training.batch.pods import COMPLETION_INDEX, Phase, job_pods, stop_pod
from tests.queues_support import apply_objects, queues, until

PY = sys.executable


@pytest.fixture(autouse=True)
def fast_backoff(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_JOB_BACKOFF_S", "0.1")  # Kubernetes' 10 s first back-off, shortened


def job(name: str, command: list[str], **spec: Any) -> dict[str, Any]:
    restart = spec.pop("restartPolicy", "Never")
    metadata = {"name": name, **spec.pop("metadata", {})}
    container = {"name": "main", "image": "python:3.12", "command": command, **spec.pop("container", {})}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {**spec, "template": {"spec": {"containers": [container], "restartPolicy": restart}}}}


def apply(cli: Any, tmp_path: Path, *docs: dict[str, Any]) -> Any:
    path = tmp_path / f"job-{time.monotonic_ns()}.yaml"
    path.write_text(yaml.safe_dump_all(list(docs)))
    return cli("apply", "-f", path)


def shown(cli: Any, name: str) -> dict[str, Any]:
    result = cli("get", "job", name, "-o", "json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def wait_condition(cli: Any, name: str, kinds: tuple[str, ...] = ("Complete", "Failed"),
                   timeout: float = 60) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        found = shown(cli, name)
        conditions = found["status"].get("conditions") or []
        return found if any(c["type"] in kinds and c["status"] == "True" for c in conditions) else None

    return until(done, timeout, f"job {name} {kinds}")


def condition(found: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in found["status"]["conditions"] if c["type"] == kind)


def pods_of(name: str) -> list[Any]:
    return [pod for one in job_pods() if one.job == name for pod in one.pods]


@pytest.mark.usefixtures("database")  # on SQLite and on PostgreSQL
def test_completions_run_at_most_parallelism_at_once_and_the_job_completes(cli, tmp_path) -> None:
    result = apply(cli, tmp_path, job("pi", [PY, "-c", "import time; time.sleep(0.8); print('done')"],
                                      completions=3, parallelism=2))
    assert (result.code, result.out) == (0, "job.batch/pi created\n"), result.err
    most = 0
    while not (found := shown(cli, "pi"))["status"].get("completionTime"):
        most = max(most, sum(1 for pod in pods_of("pi") if pod.phase == Phase.RUNNING))
        assert most <= 2
        time.sleep(0.05)
    assert most == 2
    status = found["status"]
    assert (status["succeeded"], status.get("failed"), status.get("active"), status["ready"]) == (3, None, None, 0)
    assert condition(found, "Complete")["reason"] == "CompletionsReached" and status["startTime"]
    table = cli("get", "jobs").out.splitlines()
    assert table[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert table[1].split()[:3] == ["pi", "Complete", "3/3"]
    pods = pods_of("pi")
    assert len(pods) == 3 and {pod.exit_code for pod in pods} == {0}
    assert all(Path(pod.log_path).read_text().rstrip().endswith("done") for pod in pods)
    assert all(pod.index is None and pod.name.startswith("pi-") for pod in pods)
    described = cli("describe", "job", "pi").out
    assert "SuccessfulCreate" in described and "Completed" in described and "job-controller" in described


def test_an_indexed_job_gives_each_pod_its_completion_index(cli, tmp_path) -> None:
    command = ["sh", "-c", 'echo "index=$JOB_COMPLETION_INDEX"']
    assert apply(cli, tmp_path, job("idx", command, completions=3, parallelism=3, completionMode="Indexed")).code == 0
    found = wait_condition(cli, "idx")
    assert condition(found, "Complete")["status"] == "True"
    assert found["status"]["completedIndexes"] == "0-2"
    [one] = [one for one in job_pods() if one.job == "idx"]
    assert sorted(pod.index for pod in one.pods) == [0, 1, 2]
    for pod in one.pods:
        assert Path(pod.log_path).read_text().split()[-1] == f"index={pod.index}"
        assert one.pod_labels(pod)[COMPLETION_INDEX] == str(pod.index)
        assert one.pod_annotations(pod)[COMPLETION_INDEX] == str(pod.index)
        assert pod.name.startswith(f"idx-{pod.index}-")
        assert one.pod_labels(pod)["batch.kubernetes.io/job-name"] == "idx"


def test_pod_failures_beyond_the_backoff_limit_fail_the_job(cli, tmp_path) -> None:
    assert apply(cli, tmp_path, job("flaky", ["sh", "-c", "echo trying; exit 3"], backoffLimit=2)).code == 0
    found = wait_condition(cli, "flaky")
    failed = condition(found, "Failed")
    assert (failed["reason"], failed["message"]) == ("BackoffLimitExceeded",
                                                      "Job has reached the specified backoff limit")
    assert found["status"]["failed"] == 3 and "succeeded" not in found["status"]
    assert [pod.exit_code for pod in pods_of("flaky")] == [3, 3, 3]
    assert cli("get", "jobs").out.splitlines()[1].split()[:3] == ["flaky", "Failed", "0/1"]


def test_restart_policy_on_failure_restarts_the_container_in_its_pod(cli, tmp_path) -> None:
    script = "import os, sys; os.path.exists('tried') or (open('tried', 'w').close(), sys.exit(1))"
    assert apply(cli, tmp_path, job("again", [PY, "-c", script], restartPolicy="OnFailure")).code == 0
    found = wait_condition(cli, "again")
    assert condition(found, "Complete")["status"] == "True"
    [pod] = pods_of("again")
    assert (pod.restarts, pod.exit_code, pod.phase) == (1, 0, Phase.SUCCEEDED)


def test_active_deadline_seconds_stops_the_pods_and_fails_the_job(cli, tmp_path) -> None:
    assert apply(cli, tmp_path, job("slow", ["sleep", "60"], activeDeadlineSeconds=1, parallelism=2)).code == 0
    found = wait_condition(cli, "slow", timeout=30)
    failed = condition(found, "Failed")
    assert (failed["reason"], failed["message"]) == ("DeadlineExceeded",
                                                      "Job was active longer than specified deadline")
    pods = pods_of("slow")
    assert pods and all(pod.phase == Phase.FAILED and pod.reason == "DeadlineExceeded" for pod in pods)
    assert until(lambda: not any(is_running(pod.pid, pod.pid_start) for pod in pods), 20, "pods stopped")


def test_a_suspended_job_runs_nothing_until_applied_again_unsuspended(cli, tmp_path) -> None:
    manifest = job("later", ["sh", "-c", "echo ran"], suspend=True)
    assert apply(cli, tmp_path, manifest).code == 0
    found = until(lambda: (one := shown(cli, "later"))["status"].get("conditions") and one, 20, "suspended")
    assert condition(found, "Suspended")["reason"] == "JobSuspended" and found["spec"]["suspend"] is True
    time.sleep(1)
    assert pods_of("later") == [] and "startTime" not in shown(cli, "later")["status"]
    assert cli("get", "jobs").out.splitlines()[1].split()[:2] == ["later", "Suspended"]
    manifest["spec"]["suspend"] = False
    result = apply(cli, tmp_path, manifest)
    assert (result.code, result.out) == (0, "job.batch/later configured\n")
    found = wait_condition(cli, "later")
    resumed = condition(found, "Suspended")
    assert (resumed["status"], resumed["reason"], resumed["message"]) == ("False", "JobResumed", "Job resumed")
    assert condition(found, "Complete")["status"] == "True"
    assert apply(cli, tmp_path, manifest).out == "job.batch/later unchanged\n"


@pytest.mark.usefixtures("database")  # on SQLite and on PostgreSQL
def test_a_kueue_labelled_job_waits_suspended_for_its_queue_then_runs(cli, tmp_path) -> None:
    apply_objects(*queues(("team", 0, {}), cpu="1"))
    labelled = {"labels": {"kueue.x-k8s.io/queue-name": "team"}}
    resources = {"resources": {"requests": {"cpu": "1"}}}
    release = tmp_path / "release"  # the first Job runs until the test has seen the second one wait
    waits = f"import os, time\nwhile not os.path.exists({str(release)!r}): time.sleep(0.05)"
    first = job("first", [PY, "-c", waits], metadata=labelled, container=resources)
    second = job("second", ["sh", "-c", "echo second"], metadata=labelled, container=resources)
    assert apply(cli, tmp_path, first).code == 0
    until(lambda: any(pod.phase == Phase.RUNNING for pod in pods_of("first")), 30, "first running")
    assert apply(cli, tmp_path, second).code == 0
    waiting = until(lambda: (one := shown(cli, "second"))["status"].get("conditions") and one, 20, "second held")
    assert condition(waiting, "Suspended")["status"] == "True" and waiting["spec"]["suspend"] is True
    assert pods_of("second") == []
    described = cli("describe", "job", "second").out
    assert "Pending" in described and "cpu" in described  # Kueue's reason: the quota the first one holds
    release.touch()
    assert condition(wait_condition(cli, "first"), "Complete")["status"] == "True"
    found = wait_condition(cli, "second", timeout=60)
    assert condition(found, "Complete")["status"] == "True"
    assert condition(found, "Suspended")["reason"] == "JobResumed" and found["spec"]["suspend"] is False


def test_ttl_seconds_after_finished_deletes_the_job(cli, tmp_path) -> None:
    assert apply(cli, tmp_path, job("brief", ["true"], ttlSecondsAfterFinished=1)).code == 0
    until(lambda: cli("get", "job", "brief").code != 0, 30, "the job deleted")
    assert "not found" in cli("get", "job", "brief").err


def test_delete_ends_the_pods_processes(cli, tmp_path) -> None:
    assert apply(cli, tmp_path, job("long", ["sleep", "300"], parallelism=2, completions=2)).code == 0
    pods = until(lambda: [p for p in pods_of("long") if p.phase == Phase.RUNNING][1:] and pods_of("long"), 30)
    result = cli("delete", "job", "long")
    assert (result.code, result.out) == (0, 'job.batch "long" deleted\n'), result.err
    assert until(lambda: not any(is_running(pod.pid, pod.pid_start) for pod in pods), 20, "pods stopped")
    assert ResourceStore().list("Job") == [] and "not found" in cli("get", "job", "long").err


@pytest.mark.usefixtures("database")  # on SQLite and on PostgreSQL
def test_kill_9_of_the_controller_fails_the_job_saying_why(cli, tmp_path) -> None:
    assert apply(cli, tmp_path, job("orphan", ["sleep", "300"])).code == 0
    [pod] = until(lambda: [p for p in pods_of("orphan") if p.phase == Phase.RUNNING], 30, "pod running")
    controller = ResourceStore().get("Job", "orphan")
    assert controller is not None and controller.process is not None
    os.kill(controller.process.pid, signal.SIGKILL)
    until(lambda: not is_running(controller.process.pid, controller.process.start), 20, "controller gone")
    found = shown(cli, "orphan")
    failed = condition(found, "Failed")
    assert failed["reason"] == "SupervisorDied" and f"pid {controller.process.pid}" in failed["message"]
    assert found["status"]["failed"] == 1 and "active" not in found["status"]
    assert until(lambda: not is_running(pod.pid, pod.pid_start), 20, "its pod killed")
    assert pods_of("orphan")[0].reason == "SupervisorDied"
    assert "SupervisorDied" in cli("describe", "job", "orphan").out


def test_get_json_applied_back_is_unchanged_and_an_immutable_change_refused(cli, tmp_path) -> None:
    assert apply(cli, tmp_path, job("round", ["true"], completions=2, parallelism=2)).code == 0
    exported = tmp_path / "round.json"
    exported.write_text(cli("get", "job", "round", "-o", "json").out)
    assert cli("apply", "-f", exported).out == "job.batch/round unchanged\n"
    changed = json.loads(exported.read_text())
    changed["spec"]["template"]["spec"]["containers"][0]["command"] = ["false"]
    result = apply(cli, tmp_path, changed)
    assert result.code == 2 and result.err.count("\n") == 1
    assert "spec.template: Invalid value: field is immutable" in result.err
    queued = json.loads(exported.read_text())
    queued["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "elsewhere"}  # Kueue's webhook refuses it
    result = apply(cli, tmp_path, queued)
    assert result.code == 2 and "queue-name]: Invalid value: field is immutable while the Job is not suspended" \
        in result.err


def test_generate_name_creates_a_new_job_at_each_apply(cli, tmp_path) -> None:
    manifest = job("", ["true"])
    manifest["metadata"] = {"generateName": "gen-"}
    names = []
    for _ in range(2):
        result = apply(cli, tmp_path, manifest)
        assert result.code == 0 and result.out.endswith(" created\n"), result.err
        names.append(result.out.split()[0].removeprefix("job.batch/"))
    assert names[0] != names[1] and all(name.startswith("gen-") and len(name) == 9 for name in names)


@pytest.mark.parametrize(("change", "message"), [
    ({"parallelism": "two"}, "spec.parallelism"),
    ({"completions": -1}, "spec.completions: Invalid value: -1: must be greater than or equal to 0"),
    ({"backoffLimit": -2}, "spec.backoffLimit: Invalid value: -2"),
    ({"parallelism": 1000, "completions": 1000}, "spec.parallelism: 1000 pods at once can never run here"),
    ({"completionMode": "Indexed", "parallelism": 2}, "spec.completions: Required value"),
    ({"completionMode": "Sometimes"}, "spec.completionMode: Unsupported value"),
    ({"restartPolicy": "Always"}, 'spec.template.spec.restartPolicy: Unsupported value: "Always"'),
    ({"podFailurePolicy": {"rules": []}}, "spec.podFailurePolicy: not supported"),
    ({"bogus": 1}, "bogus"),
])
def test_bad_input_is_one_error_line_and_nothing_is_stored(cli, tmp_path, change, message) -> None:
    manifest = job("bad", ["true"], **{key: value for key, value in change.items() if value is not None})
    for key, value in change.items():
        if value is None:
            manifest["spec"].pop(key, None)
    result = apply(cli, tmp_path, manifest)
    assert result.code == 2 and result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.err
    assert ResourceStore().list("Job") == []
    assert not (tmp_path / "home" / "batch").exists()


@pytest.mark.usefixtures("database")  # on SQLite and on PostgreSQL
def test_kueue_admits_part_of_the_pods_down_to_the_min_parallelism_annotation(cli, tmp_path) -> None:
    apply_objects(*queues(("small", 0, {}), cpu="2"))
    manifest = job("wide", [PY, "-c", "import time; time.sleep(0.5)"], parallelism=4, completions=4,
                   metadata={"labels": {"kueue.x-k8s.io/queue-name": "small"},
                             "annotations": {"kueue.x-k8s.io/job-min-parallelism": "2"}},
                   container={"resources": {"requests": {"cpu": "1"}}})
    assert apply(cli, tmp_path, manifest).code == 0
    most = 0
    while not (found := shown(cli, "wide"))["status"].get("completionTime"):
        most = max(most, sum(1 for pod in pods_of("wide") if pod.active))
        assert most <= 2, "Kueue's quota (2 CPUs) admits 2 of the 4 pods"
        time.sleep(0.05)
    assert most == 2 and found["status"]["succeeded"] == 4
    described = cli("describe", "job", "wide").out
    assert "PartiallyAdmitted" in described and "admitted with 2 of 4 pods" in described


def test_a_pod_the_machine_cannot_hold_yet_waits_pending_while_the_other_runs(cli, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "1")  # the ledger's test-only GPU count (no device is touched)
    command = [PY, "-c", "import os, time; print('gpus=' + os.environ['CUDA_VISIBLE_DEVICES']); time.sleep(1)"]
    gpu = {"resources": {"limits": {"nvidia.com/gpu": 1}}}
    assert apply(cli, tmp_path, job("gpu", command, parallelism=2, completions=2, container=gpu)).code == 0
    waiting = until(lambda: [p for p in pods_of("gpu") if p.reason == "Unschedulable"], 30, "a pod waiting")
    assert "GPU" in waiting[0].message and waiting[0].pid is None
    assert sum(1 for pod in pods_of("gpu") if pod.phase == Phase.RUNNING) == 1
    found = wait_condition(cli, "gpu")
    assert found["status"]["succeeded"] == 2
    assert [Path(pod.log_path).read_text().split()[-1] for pod in pods_of("gpu")] == ["gpus=0", "gpus=0"]
    assert "FailedScheduling" in cli("describe", "job", "gpu").out


def test_a_stopped_pod_is_counted_failed_and_replaced(cli, tmp_path) -> None:
    assert apply(cli, tmp_path, job("hit", ["sleep", "300"], backoffLimit=3)).code == 0
    [first] = until(lambda: [p for p in pods_of("hit") if p.phase == Phase.RUNNING], 30, "pod running")
    uid = shown(cli, "hit")["metadata"]["uid"]
    assert stop_pod(uid, first.name)
    replaced = until(lambda: [p for p in pods_of("hit") if p.phase == Phase.RUNNING and p.name != first.name], 30)
    assert replaced and [(p.phase, p.exit_code) for p in pods_of("hit") if p.name == first.name] == [
        (Phase.FAILED, 143)]  # 128 + SIGTERM, as a container's exit code says it
    status = shown(cli, "hit")["status"]
    assert (status["failed"], status["active"]) == (1, 1)
    assert not stop_pod(uid, first.name)  # it already ended
    assert cli("delete", "job", "hit").code == 0


def test_a_finished_job_past_its_ttl_is_deleted_by_the_next_reader_when_its_controller_is_gone(cli, tmp_path) -> None:
    assert apply(cli, tmp_path, job("expiring", ["true"], ttlSecondsAfterFinished=3)).code == 0
    wait_condition(cli, "expiring")
    controller = ResourceStore().get("Job", "expiring")
    assert controller is not None and controller.process is not None  # it waits out the TTL to delete the Job
    os.kill(controller.process.pid, signal.SIGKILL)
    until(lambda: not is_running(controller.process.pid, controller.process.start), 20, "controller gone")
    assert condition(shown(cli, "expiring"), "Complete")["status"] == "True"  # a killed waiter fails nothing
    until(lambda: cli("get", "job", "expiring").code != 0, 20, "the expired job deleted on read")
    assert ResourceStore().list("Job") == []

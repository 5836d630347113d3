"""JobSet (``jobset.x-k8s.io/v1alpha2``) through kubectl against a real ``millpond server``: its Jobs and pods
are real batch Jobs running ``sh -c`` commands on the host.

Replicas and indices with JobSet's labels, a coordinator, and a peer's hostname resolved from inside a pod;
InOrder startup and dependsOn ordering; successPolicy Any; a failing Job restarting the JobSet up to
maxRestarts, then Failed; a Kueue-labelled JobSet waiting suspended for its queue, then running; bad input
refused with Kubernetes' 422; ``kill -9`` of the JobSet's controller resumed without a Job run twice.
"""

from __future__ import annotations

import os
import signal
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond.store.resources import ResourceStore
from millpond.training.batch.pods import job_pods
from tests.kube_support import Kubectl, kubectl_for
from tests.queues_support import apply_objects, queues, until
from tests.server_support import Served, module_home


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    old = os.environ.get("MILLPOND_JOB_BACKOFF_S")
    os.environ["MILLPOND_JOB_BACKOFF_S"] = "0.1"
    yield from module_home(tmp_path_factory, "jobsets")
    if old is None:
        os.environ.pop("MILLPOND_JOB_BACKOFF_S", None)


@pytest.fixture(scope="module")
def kubectl(home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    server = Served()
    yield kubectl_for(server, tmp_path_factory.mktemp("kubectl"))
    server.stop()


def rjob(name: str, command: str, replicas: int = 1, pods: int = 1, **extra: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", "command": ["sh", "-c", command]}
    return {"name": name, "replicas": replicas, **extra,
            "template": {"spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0,
                                  "template": {"spec": {"containers": [container]}}}}}


def jobset(name: str, *rjobs: dict[str, Any], labels: dict[str, str] | None = None, **spec: Any) -> str:
    metadata: dict[str, Any] = {"name": name, **({"labels": labels} if labels else {})}
    return yaml.safe_dump({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": metadata,
                           "spec": {**spec, "replicatedJobs": list(rjobs)}})


def finished(kubectl: Kubectl, name: str, timeout: float = 60) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        found = kubectl.json("get", "jobset", name)
        return found if found["status"].get("terminalState") else None

    return until(done, timeout, f"jobset {name} finished")


def condition(found: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in found["status"]["conditions"] if c["type"] == kind)


def pods_of(prefix: str) -> list[Any]:
    return [(one, pod) for one in job_pods() if one.job.startswith(prefix) for pod in one.pods]


def test_replicas_indices_labels_coordinator_and_peer_hostnames(kubectl: Kubectl) -> None:
    resolve = "python3 -c \"import socket; print('peer', socket.gethostbyname('net-w-1-1.net'))\"; echo host=$HOSTNAME"
    env = [{"name": "RANK", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
        {"name": "JOB_INDEX", "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.labels['jobset.sigs.k8s.io/job-index']"}}}]
    workers = rjob("w", resolve + "; echo rank=$RANK job=$JOB_INDEX", replicas=2, pods=2)
    workers["template"]["spec"]["template"]["spec"]["containers"][0]["env"] = env
    out = kubectl.ok("apply", "-f", "-", stdin=jobset("net", workers, coordinator={"replicatedJob": "w",
                                                                                   "jobIndex": 1, "podIndex": 0}))
    assert out == "jobset.jobset.x-k8s.io/net created\n"
    found = finished(kubectl, "net")
    assert condition(found, "Completed")["reason"] == "AllJobsCompleted" and found["status"]["terminalState"] == \
        "Completed"
    assert found["spec"]["successPolicy"] == {"operator": "All"}  # the webhook's defaults
    assert found["status"]["replicatedJobsStatus"][0]["succeeded"] == 2
    jobs = kubectl.json("get", "jobs", "-l", "jobset.sigs.k8s.io/jobset-name=net")["items"]
    assert sorted(job["metadata"]["name"] for job in jobs) == ["net-w-0", "net-w-1"]
    job = next(job for job in jobs if job["metadata"]["name"] == "net-w-1")
    labels = job["metadata"]["labels"]
    assert (labels["jobset.sigs.k8s.io/replicatedjob-name"], labels["jobset.sigs.k8s.io/job-index"],
            labels["jobset.sigs.k8s.io/job-global-index"], labels["jobset.sigs.k8s.io/replicatedjob-replicas"],
            labels["jobset.sigs.k8s.io/restart-attempt"]) == ("w", "1", "1", "2", "0")
    assert labels["jobset.sigs.k8s.io/coordinator"] == "net-w-1-0.net"
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["template"]["spec"]["subdomain"] == "net"
    pods = pods_of("net-w-")
    assert len(pods) == 4
    for one, pod in pods:
        text = Path(pod.log_path).read_text()
        assert "peer 127.0.0.1" in text, text
        assert f"host={one.job}-{pod.index}" in text and f"rank={pod.index} job={one.job[-1]}" in text
    listed = kubectl.json("get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=net")["items"]
    assert len(listed) == 4


def test_in_order_startup_and_depends_on_wait_for_the_earlier_jobs(kubectl: Kubectl, tmp_path: Path) -> None:
    marks = tmp_path / "order"
    first = rjob("a", f"echo a >> {marks}; sleep 1")
    second = rjob("b", f"echo b >> {marks}", dependsOn=[{"name": "a", "status": "Complete"}])
    kubectl.ok("apply", "-f", "-", stdin=jobset("dep", first, second))
    assert condition(finished(kubectl, "dep"), "Completed")["status"] == "True"
    assert marks.read_text().split() == ["a", "b"]
    slow = rjob("x", "sleep 2")
    kubectl.ok("apply", "-f", "-", stdin=jobset("ord", rjob("lead", "sleep 4"), slow,
                                                startupPolicy={"startupPolicyOrder": "InOrder"}))
    found = finished(kubectl, "ord")
    assert condition(found, "StartupPolicyCompleted")["status"] == "True"
    [lead] = [pod for one, pod in pods_of("ord-lead-")]
    [after] = [pod for one, pod in pods_of("ord-x-")]
    assert after.created_at >= lead.started_at  # x was made only once lead's pod ran


def test_success_policy_any_completes_on_the_first_job(kubectl: Kubectl) -> None:
    kubectl.ok("apply", "-f", "-", stdin=jobset("anyone", rjob("quick", "echo ok"), rjob("slow", "sleep 300"),
                                                successPolicy={"operator": "Any", "targetReplicatedJobs": ["quick"]}))
    found = finished(kubectl, "anyone")
    assert condition(found, "Completed")["reason"] == "AllJobsCompleted"
    until(lambda: not [p for _, p in pods_of("anyone-slow-") if p.active], 30, "slow job deleted")


def test_a_failing_job_restarts_the_jobset_up_to_max_restarts_then_fails(kubectl: Kubectl) -> None:
    kubectl.ok("apply", "-f", "-", stdin=jobset("flaky", rjob("w", "exit 3"), failurePolicy={
        "maxRestarts": 2, "rules": [{"action": "RestartJobSet", "targetReplicatedJobs": ["w"]}]}))
    found = finished(kubectl, "flaky")
    failed = condition(found, "Failed")
    assert failed["reason"] == "ReachedMaxRestarts" and "first failed job: flaky-w-0" in failed["message"]
    assert found["status"]["restarts"] == 2 and found["spec"]["failurePolicy"]["rules"][0]["name"] == \
        "failurePolicyRule0"
    described = kubectl.ok("describe", "jobset", "flaky")
    assert "Restarting" in described and "restart attempt 2" in described
    kubectl.ok("apply", "-f", "-", stdin=jobset("nopolicy", rjob("w", "exit 1")))
    assert condition(finished(kubectl, "nopolicy"), "Failed")["reason"] == "FailedJobs"


def test_a_kueue_labelled_jobset_waits_suspended_then_runs(kubectl: Kubectl) -> None:
    labels = {"kueue.x-k8s.io/queue-name": "team"}
    kubectl.ok("apply", "-f", "-", stdin=jobset("queued", rjob("w", "echo ran", pods=2), labels=labels))
    waiting = until(lambda: (one := kubectl.json("get", "jobset", "queued"))["status"].get("conditions") and one,
                    30, "queued held")
    assert condition(waiting, "Suspended")["reason"] == "SuspendedJobs"
    assert not [p for _, p in pods_of("queued-")]  # its queue does not exist yet: nothing runs
    apply_objects(*queues(("team", 0, {}), cpu="8"))
    found = finished(kubectl, "queued")
    assert condition(found, "Completed")["status"] == "True"
    assert condition(found, "Suspended")["reason"] == "ResumeJobs"


@pytest.mark.parametrize(("change", "message"), [
    ({"spec": {"replicatedJobs": [{"name": "w", "replicas": -1, "template": {}}]}}, "replicas"),
    ({"spec": {"replicatedJobs": [{"name": "w", "template": {}}], "bogus": 1}}, "bogus"),
    ({"spec": {"replicatedJobs": [{"name": "w", "template": {}}], "failurePolicy": {"rules": [
        {"name": "same", "action": "FailJobSet"}, {"name": "same", "action": "RestartJobSet"}]}}}, "not unique"),
])
def test_bad_input_is_refused_with_kubernetes_422_and_nothing_stored(kubectl: Kubectl, change: dict[str, Any],
                                                                     message: str) -> None:
    body = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "bad"}, **change}
    done = kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(body))
    assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr
    assert 'The JobSet "bad" is invalid' in done.stderr or "(BadRequest)" in done.stderr  # 422, or strict decoding
    assert ResourceStore().get("JobSet", "bad") is None


def test_bad_input_through_millpond_apply_is_one_error_line(tmp_path: Path, home: Path) -> None:
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    path = tmp_path / "bad.yaml"
    path.write_text(jobset("bad2", rjob("w", "true"), rjob("w", "true")))
    done = subprocess.run([sys.executable, "-m", "millpond.cli.main", "apply", "-f", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith("error: ") and "spec.replicatedJobs[1].name: Duplicate value" in done.stderr


def test_kill_9_of_the_controller_is_resumed_without_running_a_job_twice(kubectl: Kubectl, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    release = tmp_path / "release"
    command = textwrap.dedent(f"""\
        echo $HOSTNAME >> {runs}
        while [ ! -e {release} ]; do sleep 0.1; done""")
    kubectl.ok("apply", "-f", "-", stdin=jobset("tough", rjob("w", command, replicas=2)))
    until(lambda: runs.exists() and len(runs.read_text().split()) == 2, 30, "both jobs running")
    record = ResourceStore().get("JobSet", "tough")
    assert record is not None and record.process is not None
    os.kill(record.process.pid, signal.SIGKILL)
    dead = record.process.pid

    def resumed() -> bool:
        kubectl.ok("get", "jobset", "tough")  # a reader finds the controller dead and resumes it
        now = ResourceStore().get("JobSet", "tough")
        return now is not None and now.process is not None and now.process.pid != dead

    until(resumed, 30, "resumed")
    release.touch()
    found = finished(kubectl, "tough")
    assert condition(found, "Completed")["status"] == "True" and found["status"]["restarts"] == 0
    assert sorted(runs.read_text().split()) == ["tough-w-0-0", "tough-w-1-0"]  # each Job's pod ran once
    assert "ControllerResumed" in kubectl.ok("describe", "jobset", "tough")

"""The core ``v1`` Pod kind: what millpond runs, seen as the pods upstream controllers would make.

Real jobs and model servers run here (``millpond apply -f``); their pods are read back with
``millpond get pods``/``describe pod``/``delete pod`` and the log reader the Kubernetes API serves
(``pods.logs.read_log``): a PyTorchJob's master and worker with the training operator's names and
labels going Running → Succeeded, their logs whole, tailed and followed to the end; a failing
instance's exit code and reason; a TrainJob's node pods with JobSet's labels; a model server's
replica; deleting a running instance (its supervisor restarts the job, as backoffLimit allows).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond.errors import NotFoundError, UserError
from millpond.kind_handler import KindContext
from millpond.pods.logs import LogRequest, read_log
from millpond.runners.processes import is_running
from millpond.settings import load_settings
from tests.conftest import PIPELINES

TIMEOUT_S = 90.0

# Prints two lines, waits for GO (a file the test writes) so the test sees it running, prints one more, exits CODE.
WAIT_THEN_EXIT = """
import os, sys, time
print("hello from", os.environ["ROLE"], flush=True)
print("rank", os.environ.get("RANK"), flush=True)
while not os.path.exists(os.environ["GO"]):
    time.sleep(0.05)
print("bye from", os.environ["ROLE"], flush=True)
sys.exit(int(os.environ.get("CODE", "0")))
"""


def pytorchjob(name: str, go: Path, *, worker_code: int = 0, backoff: int = 0, queue: str = "") -> dict[str, Any]:
    def replica(role: str, code: int) -> dict[str, Any]:
        env = [{"name": "ROLE", "value": role}, {"name": "GO", "value": str(go)}, {"name": "CODE", "value": str(code)}]
        return {"replicas": 1, "template": {
            "metadata": {"labels": {"team": "vision"}},
            "spec": {"containers": [{"name": "pytorch", "image": "example/mnist:1", "command": [sys.executable],
                                     "args": ["-c", WAIT_THEN_EXIT], "env": env}]}}}

    metadata: dict[str, Any] = {"name": name}
    if queue:
        metadata["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": metadata,
            "spec": {"runPolicy": {"backoffLimit": backoff},
                     "pytorchReplicaSpecs": {"Master": replica("master", 0), "Worker": replica("worker", worker_code)}}}


def apply(cli: Any, tmp_path: Path, *documents: dict[str, Any]) -> None:
    path = tmp_path / f"{documents[0]['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    result = cli("apply", "-f", path)
    assert result.code == 0, result.err


def until(what: Callable[[], Any], why: str, timeout_s: float = TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        found = what()
        if found:
            return found
        assert time.monotonic() < deadline, f"not within {timeout_s}s: {why}"
        time.sleep(0.1)


def pods(cli: Any, *args: str) -> list[dict[str, Any]]:
    result = cli("get", "pods", *args, "-o", "json")
    assert result.code == 0, result.err
    return list(result.json()["items"])


def pod(cli: Any, name: str) -> dict[str, Any]:
    result = cli("get", "pod", name, "-o", "json")
    assert result.code == 0, result.err
    return dict(result.json())


def phases(cli: Any, names: list[str]) -> dict[str, str]:
    shown = {item["metadata"]["name"]: item["status"]["phase"] for item in pods(cli)}
    return {name: shown.get(name, "") for name in names}


def log(name: str, **asked: Any) -> str:
    return b"".join(read_log(name, "default", LogRequest(**asked), KindContext(load_settings()))).decode()


def state(item: dict[str, Any]) -> dict[str, Any]:
    return dict(item["status"]["containerStatuses"][0]["state"])


def test_a_pytorchjob_shows_its_master_and_worker_pods_running_then_succeeded_with_their_logs(
        cli, home: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    apply(cli, tmp_path, pytorchjob("mnist", go, queue=""))
    names = ["mnist-master-0", "mnist-worker-0"]
    until(lambda: set(phases(cli, names).values()) == {"Running"}, "both pods Running")
    until(lambda: all("rank" in log(name) for name in names), "both printed their first lines")

    job = cli("get", "pytorchjob", "mnist", "-o", "json").json()
    master, worker = pod(cli, "mnist-master-0"), pod(cli, "mnist-worker-0")
    assert master["apiVersion"] == "v1" and master["kind"] == "Pod"
    assert master["metadata"]["labels"] == {
        "training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/replica-type": "master", "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/job-role": "master", "team": "vision"}
    assert "training.kubeflow.org/job-role" not in worker["metadata"]["labels"]
    assert worker["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "worker"
    assert master["metadata"]["ownerReferences"] == [{
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "mnist", "uid": job["metadata"]["uid"],
        "controller": True, "blockOwnerDeletion": True}]
    container = master["spec"]["containers"][0]
    assert (container["name"], container["image"], container["command"]) == ("pytorch", "example/mnist:1",
                                                                            [sys.executable])
    assert container["args"] == ["-c", WAIT_THEN_EXIT]
    assert master["spec"]["nodeName"] and master["status"]["podIP"] == "127.0.0.1"
    running = master["status"]["containerStatuses"][0]
    assert running["ready"] is True and running["restartCount"] == 0 and "startedAt" in running["state"]["running"]
    assert master["metadata"]["uid"] != worker["metadata"]["uid"]

    table = cli("get", "pods")
    assert table.code == 0, table.err
    lines = table.out.splitlines()
    assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [line.split()[:4] for line in lines[1:]] == [[name, "1/1", "Running", "0"] for name in names]
    assert cli("get", "pods", "-l", "training.kubeflow.org/replica-type=worker").out.splitlines()[1].split()[0] == \
        "mnist-worker-0"

    # whole and tailed while it runs; followed from the start until the process ends
    assert log("mnist-master-0") == "hello from master\nrank 0\n"
    assert log("mnist-worker-0", tail_lines=1) == "rank 1\n"
    assert log("mnist-worker-0", container="pytorch", tail_lines=0) == ""
    assert log("mnist-master-0", timestamps=True).split("\n")[0].endswith("Z hello from master")
    followed: list[str] = []
    follower = threading.Thread(target=lambda: followed.append(log("mnist-worker-0", follow=True)))
    follower.start()
    time.sleep(0.5)
    assert follower.is_alive()  # the process runs: following goes on
    go.write_text("go")
    follower.join(timeout=TIMEOUT_S)
    assert not follower.is_alive() and followed == ["hello from worker\nrank 1\nbye from worker\n"]

    until(lambda: set(phases(cli, names).values()) == {"Succeeded"}, "both pods Succeeded")
    done = state(pod(cli, "mnist-master-0"))["terminated"]
    assert (done["exitCode"], done["reason"]) == (0, "Completed") and done["startedAt"] <= done["finishedAt"]
    assert [line.split()[:3] for line in cli("get", "pods").out.splitlines()[1:]] == [
        [name, "0/1", "Completed"] for name in names]
    assert log("mnist-master-0", tail_lines=2) == "rank 0\nbye from master\n"
    described = cli("describe", "pod", "mnist-worker-0")
    assert described.code == 0 and "training.kubeflow.org/replica-type=worker" in described.out


def test_a_failing_instance_shows_its_exit_code_and_reason_error(cli, home: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    go.write_text("go")
    apply(cli, tmp_path, pytorchjob("broken", go, worker_code=3))
    until(lambda: phases(cli, ["broken-worker-0"])["broken-worker-0"] == "Failed", "the worker Failed")
    ended = state(pod(cli, "broken-worker-0"))["terminated"]
    assert (ended["exitCode"], ended["reason"]) == (3, "Error")
    row = next(line.split() for line in cli("get", "pods").out.splitlines() if line.startswith("broken-worker-0"))
    assert row[1:3] == ["0/1", "Error"]
    assert log("broken-worker-0").endswith("bye from worker\n")


def test_a_trainjob_node_pods_carry_the_labels_the_kubeflow_sdk_selects_on(cli, home: Path, tmp_path: Path) -> None:
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "tj"},
                "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {
                    "numNodes": 2, "image": "example/torch:1",
                    "command": [sys.executable, "-c", "import os; print('node', os.environ['PET_NODE_RANK'])"]}}}
    apply(cli, tmp_path, trainjob)
    until(lambda: [item["status"]["phase"] for item in pods(cli)] == ["Succeeded"] * 2, "two node pods Succeeded")
    items = sorted(pods(cli), key=lambda item: item["metadata"]["name"])
    uid = cli("get", "trainjob", "tj", "-o", "json").json()["metadata"]["uid"]
    for index, item in enumerate(items):
        labels = item["metadata"]["labels"]
        assert item["metadata"]["name"].startswith(f"tj-node-0-{index}-") and len(item["metadata"]["name"]) == 17
        assert labels["jobset.sigs.k8s.io/jobset-name"] == "tj"
        assert labels["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
        assert labels["batch.kubernetes.io/job-completion-index"] == str(index)
        assert labels["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
        assert item["metadata"]["ownerReferences"][0]["uid"] == uid
        container = item["spec"]["containers"][0]
        assert (container["name"], container["image"]) == ("node", "example/torch:1")
        assert log(item["metadata"]["name"], container="node") == f"node {index}\n"
    assert pods(cli) == pods(cli)  # names and uids stable from one read to the next


ECHO_SERVER = """
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
print("serving", flush=True)
HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def test_a_served_model_shows_its_replica_pod_and_delete_pod_restarts_it(cli, home: Path, tmp_path: Path) -> None:
    from millpond.serving import lifecycle
    from millpond.store.resources import ResourceStore

    container = {"name": "kserve-container", "image": "example/echo:1", "command": [sys.executable],
                 "args": ["-c", ECHO_SERVER, "$(PORT)"]}
    apply(cli, tmp_path, {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                          "metadata": {"name": "echo"}, "spec": {"predictor": {"containers": [container]}}})
    lifecycle.wait_ready(ResourceStore(), "echo")
    [item] = until(lambda: [i for i in pods(cli) if i["status"]["containerStatuses"][0]["ready"]], "a ready replica")
    name = item["metadata"]["name"]
    assert name.startswith("echo-predictor-00001-deployment-")
    labels = item["metadata"]["labels"]
    assert labels["serving.kserve.io/inferenceservice"] == "echo" and labels["component"] == "predictor"
    assert labels["app"] == "echo-predictor-00001"
    assert item["spec"]["containers"][0]["name"] == "kserve-container"
    assert item["metadata"]["ownerReferences"][0]["kind"] == "InferenceService"
    assert item["status"]["phase"] == "Running"
    assert "serving" in log(name)
    with pytest.raises(UserError, match="container main is not valid for pod echo-predictor-00001-deployment-"):
        log(name, container="main")

    deleted = cli("delete", "pod", name)
    assert deleted.code == 0 and deleted.out == f'pod "{name}" deleted\n'
    again = until(lambda: [i for i in pods(cli) if i["status"]["containerStatuses"][0]["ready"]], "the replica back")
    assert again[0]["metadata"]["name"] == name and again[0]["metadata"]["uid"] != item["metadata"]["uid"]
    assert again[0]["status"]["containerStatuses"][0]["restartCount"] == 1  # its supervisor restarted it
    assert cli("delete", "isvc", "echo").code == 0
    until(lambda: not pods(cli), "no pods once the InferenceService is deleted")


def test_deleting_a_running_instance_stops_it_and_the_job_restarts_as_its_backoff_limit_allows(
        cli, home: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    apply(cli, tmp_path, pytorchjob("again", go, backoff=1))
    until(lambda: phases(cli, ["again-worker-0"])["again-worker-0"] == "Running", "the worker Running")
    before = pod(cli, "again-worker-0")
    from millpond.pods import sources

    [container] = sources.find("again-worker-0", "default", KindContext(load_settings())).containers
    assert container.process is not None
    result = cli("delete", "pod", "again-worker-0")
    assert result.code == 0, result.err
    assert not is_running(container.process.pid, container.process.start)  # stopped, not only asked
    after = until(lambda: [i for i in pods(cli) if i["metadata"]["name"] == "again-worker-0"
                           and i["metadata"]["uid"] != before["metadata"]["uid"]], "the worker made again")
    assert after[0]["status"]["containerStatuses"][0]["restartCount"] == 1
    go.write_text("go")
    until(lambda: cli("get", "pytorchjob", "again", "-o", "json").json()["status"]["conditions"][-1]["type"]
          == "Succeeded", "the restarted job Succeeded")


def test_a_pod_not_there_is_not_found_and_a_pod_cannot_be_applied(cli, home: Path, tmp_path: Path) -> None:
    for args in (("get", "pod", "nope"), ("describe", "pod", "nope"), ("delete", "pod", "nope"),
                 ("get", "po", "nope", "-n", "other")):
        result = cli(*args)
        assert result.code == 2 and result.out == "", args
        assert result.err.startswith('error: pods "nope" not found'), result.err
    assert cli("get", "po", "nope", "-n", "other").err.strip() == 'error: pods "nope" not found in namespace "other"'
    with pytest.raises(NotFoundError, match='pods "nope" not found'):
        log("nope")
    path = tmp_path / "pod.yaml"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
    refused = cli("apply", "-f", path)
    assert refused.code == 2 and "pods here are the processes millpond runs" in refused.err
    assert cli("get", "pods").err == "No resources found in default namespace.\n"


def test_a_pipeline_runs_tasks_are_pods_of_its_workflow_with_argos_labels(cli, home: Path) -> None:
    ran = cli("run", PIPELINES / "failing.py", "--pipeline", "fails", "-o", "json")
    assert ran.code == 1  # the run fails: one task raises
    run_id = ran.json()["run_id"]
    items = {item["metadata"]["name"].rsplit("-", 1)[0]: item for item in pods(cli)}
    workflow = f"fails-{run_id[:8]}"
    assert sorted(items) == [f"{workflow}-fine", f"{workflow}-write-then-fail"]  # `after` never ran: no pod
    failed, fine = items[f"{workflow}-write-then-fail"], items[f"{workflow}-fine"]
    assert failed["metadata"]["labels"] == {"workflows.argoproj.io/workflow": workflow,
                                            "workflows.argoproj.io/completed": "true", "pipeline/runid": run_id,
                                            "pipelines.kubeflow.org/v2_component": "true"}
    assert failed["metadata"]["ownerReferences"][0]["kind"] == "Workflow"
    assert failed["spec"]["containers"][0]["name"] == "main"
    assert (failed["status"]["phase"], fine["status"]["phase"]) == ("Failed", "Succeeded")
    ended = state(failed)["terminated"]
    assert (ended["reason"], ended["exitCode"]) == ("Error", 1)
    assert "boom-marker: about to fail" in log(failed["metadata"]["name"])
    assert log(failed["metadata"]["name"], tail_lines=1, container="main").count("\n") == 1

"""Training jobs over ``millpond server``'s REST API (``/apis/millpond/v1/jobs``): jobs submitted with
``TrainingClient`` listed with paging, read as Arena's ``TrainingJobInfo``, their events and logs
(plain text, bounded), deleted; unknown jobs and instances 404, bad parameters 400, never a 500."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from millpond.training import PytorchJobBuilder, TrainingClient
from tests.server_support import Served, module_home, serving
from tests.training_support import gone, instances

JOBS = "/apis/millpond/v1/jobs"
INFO_KEYS = {"name", "namespace", "uuid", "status", "trainer", "duration", "priority", "requestGPUs", "allocatedGPUs",
             "creationTimestamp", "instances"}
INSTANCE_KEYS = {"name", "status", "age", "node", "ip", "chief", "requestGPUs", "gpuMetrics"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for _ in module_home(tmp_path_factory, "jobs-api"):
        yield from serving()


def _call(server: Served, path: str, method: str = "GET") -> tuple[int, Any, str]:
    """(status, parsed body, content type) of one request."""
    request = urllib.request.Request(server.url + path, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            kind = answer.headers.get("content-type", "")
            body = answer.read().decode()
            return answer.status, json.loads(body) if "json" in kind else body, kind
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}"), exc.headers.get("content-type", "")


@pytest.fixture(scope="module")
def finished(server: Served) -> TrainingClient:
    """Two finished jobs: ``hello`` (two instances, each printing lines) and ``later``."""
    client = TrainingClient()
    client.submit(PytorchJobBuilder().with_name("hello").with_workers(2)
                  .with_command('for i in 1 2 3; do echo "line $i of rank $RANK"; done').build())
    client.submit(PytorchJobBuilder().with_name("later").with_command("echo done").build())
    assert client.wait("hello", timeout=120, poll_s=0.2).status == "SUCCEEDED"
    assert client.wait("later", timeout=120, poll_s=0.2).status == "SUCCEEDED"
    return client


def test_list_pages_through_jobs_as_arena_shows_them(server: Served, finished: TrainingClient) -> None:
    status, page, _ = _call(server, f"{JOBS}?page_size=1")
    assert status == 200 and page["total_size"] == 2 and page["next_page_token"]
    [first] = page["jobs"]
    assert set(first) >= INFO_KEYS and first["name"] == "hello"  # oldest first
    status, rest, _ = _call(server, f"{JOBS}?page_size=1&page_token={page['next_page_token']}")
    assert status == 200 and [j["name"] for j in rest["jobs"]] == ["later"] and rest["next_page_token"] == ""
    _, newest, _ = _call(server, f"{JOBS}?sort_by=name%20desc")
    assert [j["name"] for j in newest["jobs"]] == ["later", "hello"]
    by_name = json.dumps({"predicates": [{"key": "name", "operation": "EQUALS", "string_value": "later"}]})
    _, filtered, _ = _call(server, f"{JOBS}?filter={urllib.request.quote(by_name)}")
    assert [j["name"] for j in filtered["jobs"]] == ["later"]
    assert _call(server, f"{JOBS}?namespace=elsewhere")[1]["jobs"] == []
    assert _call(server, f"{JOBS}?all_namespaces=true")[1]["total_size"] == 2


def test_one_job_its_events_and_its_logs(server: Served, finished: TrainingClient) -> None:
    status, info, _ = _call(server, f"{JOBS}/default/hello")
    assert status == 200 and set(info) >= INFO_KEYS
    assert (info["status"], info["trainer"], info["requestGPUs"], info["allocatedGPUs"]) == (
        "SUCCEEDED", "pytorchjob", 0, 0)
    sdk = finished.get("hello").as_dict()  # what arena get -o json prints
    assert {k: v for k, v in info.items() if k not in ("duration", "instances")} == {
        k: v for k, v in sdk.items() if k not in ("duration", "instances")}
    assert [(i["name"], i["chief"]) for i in info["instances"]] == [("hello-master-0", True),
                                                                    ("hello-worker-0", False)]
    assert all(set(i) == INSTANCE_KEYS for i in info["instances"])

    status, events, _ = _call(server, f"{JOBS}/default/hello/events")
    assert status == 200 and events["events"][0]["reason"] == "Submitted"
    assert all(set(e) == {"type", "reason", "message", "time", "age"} for e in events["events"])

    status, text, kind = _call(server, f"{JOBS}/default/hello/logs")
    assert status == 200 and kind.startswith("text/plain")
    assert text == "line 1 of rank 0\nline 2 of rank 0\nline 3 of rank 0\n"  # the chief's by default
    assert _call(server, f"{JOBS}/default/hello/logs?instance=hello-worker-0&tail=1")[1] == "line 3 of rank 1\n"
    assert _call(server, f"{JOBS}/default/hello/logs?tail=0")[1] == ""
    stamped = _call(server, f"{JOBS}/default/hello/logs?tail=1&timestamps=true")[1]
    assert stamped.endswith("Z line 3 of rank 0\n")


def test_unknown_jobs_and_bad_parameters_are_refused_with_a_message(server: Served, finished: TrainingClient) -> None:
    for path, wanted, words in (
        (f"{JOBS}/default/nope", 404, "no training job nope"),
        (f"{JOBS}/other/hello", 404, "no training job hello in namespace other"),
        (f"{JOBS}/default/nope/events", 404, "no training job nope"),
        (f"{JOBS}/default/nope/logs", 404, "no training job nope"),
        (f"{JOBS}/default/hello/logs?instance=hello-worker-7", 404, "has no instance 'hello-worker-7'"),
        (f"{JOBS}/default/hello/logs?tail=-1", 400, "tail"),
        (f"{JOBS}/default/hello/logs?tail=100001", 400, "tail"),
        (f"{JOBS}/default/hello/logs?tail=many", 400, "tail"),
        (f"{JOBS}?page_token=%21%21", 400, "invalid page_token"),
        (f"{JOBS}?page_size=5000", 400, "page_size"),
        (f"{JOBS}?sort_by=colour", 400, "invalid sort_by 'colour'"),
        (f"{JOBS}?filter=%7Bnope", 400, "invalid filter"),
    ):
        status, body, _ = _call(server, path)
        assert status == wanted and words in body["message"], (path, status, body)
    status, body, _ = _call(server, f"{JOBS}/default/nope", "DELETE")
    assert status == 404 and "no training job nope" in body["message"]


def test_delete_stops_a_running_job_and_forgets_it(server: Served, finished: TrainingClient) -> None:
    finished.submit(PytorchJobBuilder().with_name("sleepy").with_command("echo up; sleep 300").build())
    deadline = time.monotonic() + 60
    while not (finished.get("sleepy").status == "RUNNING" and finished.logs("sleepy")):
        assert time.monotonic() < deadline, finished.get("sleepy").status
        time.sleep(0.1)
    assert _call(server, f"{JOBS}/default/sleepy/logs")[1] == "up\n"
    running = instances("sleepy")
    status, body, _ = _call(server, f"{JOBS}/default/sleepy", "DELETE")
    assert status == 200 and body["message"] == "The training job sleepy has been deleted successfully"
    assert all(gone(i.pid, i.pid_start) for i in running)
    assert _call(server, f"{JOBS}/default/sleepy")[0] == 404
    assert [j["name"] for j in _call(server, JOBS)[1]["jobs"]] == ["hello", "later"]


def test_a_long_log_is_read_from_its_end_only(server: Served, finished: TrainingClient) -> None:
    from millpond.training import logs
    from millpond.training.paths import instance_log

    uid = finished.get("later").uuid
    path = instance_log(uid, "later-master-0")
    big = path.with_name("big.log")
    big.write_text("".join(f"2026-01-01T00:00:00.000000Z row {n}\n" for n in range(200_000)))
    lines = logs.tail_bounded(big, 10_000, 64 * 1024)
    assert lines[-1] == "row 199999" and len(lines) < 10_000  # at most 64 KiB read: fewer lines, all whole
    assert all(line.startswith("row ") for line in lines)


def test_the_request_guard_covers_the_job_routes(server: Served, finished: TrainingClient) -> None:
    """A cross-site DELETE is refused and nothing is deleted; with a token, no token is no answer."""
    request = urllib.request.Request(f"{server.url}{JOBS}/default/later", method="DELETE",
                                     headers={"Origin": "http://evil.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 403
    assert finished.get("later").status == "SUCCEEDED"
    guarded = Served(token="s3cret")
    try:
        with pytest.raises(urllib.error.HTTPError) as no_token:
            urllib.request.urlopen(f"{guarded.url}{JOBS}/default/later/logs", timeout=30)
        assert no_token.value.code == 401
        with_token = urllib.request.Request(f"{guarded.url}{JOBS}/default/later/logs",
                                            headers={"Authorization": "Bearer s3cret"})
        with urllib.request.urlopen(with_token, timeout=30) as answer:
            assert answer.read() == b"done\n"
    finally:
        guarded.stop()


def test_the_resource_routes_take_training_kinds_by_kubectls_names(server: Served, finished: TrainingClient) -> None:
    """``GET/DELETE /apis/millpond/v1/KIND[/NAME]`` and ``POST …/fluid/apply`` dispatch every kind through one table."""
    api = "/apis/millpond/v1"
    status, listed, _ = _call(server, f"{api}/pytorchjobs")
    assert status == 200 and listed["kind"] == "List"
    assert [(o["kind"], o["metadata"]["name"]) for o in listed["items"]] == [("PyTorchJob", "hello"),
                                                                            ("PyTorchJob", "later")]
    status, one, _ = _call(server, f"{api}/pytorchjob.v1.kubeflow.org/later")
    assert status == 200 and one["status"]["conditions"][-1]["type"] == "Succeeded"
    manifest = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "applied"},
                "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [
                    {"name": "pytorch", "image": "x", "command": ["sh", "-c", "sleep 300"]}]}}}}}}
    request = urllib.request.Request(f"{server.url}{api}/fluid/apply", data=json.dumps([manifest]).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        applied = json.loads(answer.read())
    assert [(i["kind"], i["name"], i["action"], i["started"]) for i in applied["items"]] == [
        ("PyTorchJob", "applied", "created", True)]
    assert _call(server, f"{api}/pytorchjobs/applied")[0] == 200
    status, deleted, _ = _call(server, f"{api}/pytorchjobs/applied", "DELETE")
    assert status == 200 and deleted["message"] == 'pytorchjob.kubeflow.org "applied" deleted'
    status, missing, _ = _call(server, f"{api}/pytorchjobs/applied")
    assert status == 404 and missing["message"] == 'pytorchjobs.kubeflow.org "applied" not found'
    status, unknown, _ = _call(server, f"{api}/widgets")
    assert status == 404 and "unknown resource type 'widgets'" in unknown["message"]
    assert "dataset (datasets)" in unknown["message"] and "pytorchjob (pytorchjobs)" in unknown["message"]


def test_a_server_start_fails_a_job_whose_supervisor_died_while_no_server_ran(home) -> None:
    """kill -9 of a supervisor with no server (and no reader) about; the server's start settles the job within
    seconds, before any request, and ends what its instances left running."""
    import os
    import signal

    from millpond.store.training import JobStore
    from tests.training_support import group_empty

    TrainingClient().submit(PytorchJobBuilder().with_name("orphan").with_workers(2)
                            .with_command("sleep 300; true").build())  # the shell forks the sleep: it outlives sh
    store = JobStore()
    deadline = time.monotonic() + 60
    while (job := store.get("orphan")) is None or job.status != "RUNNING":
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
    running = store.instances(job.uid)
    os.kill(job.supervisor_pid, signal.SIGKILL)
    assert gone(job.supervisor_pid, job.supervisor_start)
    time.sleep(0.5)
    assert store.get("orphan").status == "RUNNING"  # nobody looked: the store still says so
    started = time.monotonic()
    served = Served()
    try:
        while (seen := store.get("orphan")).status != "FAILED":  # the stored row: no read that would check it
            assert time.monotonic() - started < 10, seen
            time.sleep(0.05)
        settled_after = time.monotonic() - started
        assert seen.message == f"its supervisor (pid {job.supervisor_pid}) died"
        assert all(group_empty(i.pid) for i in running)
        assert [i.status for i in store.instances(job.uid)] == ["Failed", "Failed"]
    finally:
        served.stop()
    print(f"\na job whose supervisor died while no server ran: FAILED {settled_after:.2f}s after the server started")

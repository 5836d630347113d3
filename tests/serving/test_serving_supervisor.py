"""InferenceServices served by their supervisor, as real processes: replicas, restarts, canaries, kill -9.

A digits classifier is trained here (as ``test_model_server`` trains it) and saved as KServe's
sklearnserver finds it (``model.joblib``); manifests are applied with ``millpond apply -f`` and
the supervisor (``python -m millpond.serving.supervisor``) starts millpond's model server, or a
custom container's command, for each replica. Answers are compared with the model called directly.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import signal
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from millpond.datasets.mounts import fuse_available
from millpond.errors import UnavailableError
from millpond.runners.ports import is_free
from millpond.runners.processes import ProcessIdentity, start_ticks
from millpond.scheduling.ledger import Ledger
from millpond.serving import container_env, endpoints, lifecycle
from millpond.serving.model_fetch import ModelLoadFailed, _inside, _unpack_tar, fetch
from millpond.serving.storage_uri import parse_storage_uri
from millpond.store.resources import ResourceStore
from millpond.store.secrets import ConfigStore
from tests.datasets_support import create_s3_dataset
from tests.fuzz_support import fuzz_settings
from tests.s3_server import s3_server  # noqa: F401 - the session's SeaweedFS

pytest.importorskip("sklearn")
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

API = "serving.kserve.io/v1beta1"
READY_S = 60.0


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, np.ndarray, Path]:
    """The model, some rows to ask it about, and a folder holding it as ``model.joblib``."""
    features, labels = load_digits(return_X_y=True)
    model = LogisticRegression(max_iter=300).fit(features[:600], labels[:600])
    folder = tmp_path_factory.mktemp("digits-model")
    joblib.dump(model, folder / "model.joblib")
    return model, features[600:620], folder


def isvc(name: str, predictor: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "InferenceService", "metadata": {"name": name}, "spec": {"predictor": predictor}}


def apply(cli: Any, tmp_path: Path, document: dict[str, Any]) -> str:
    path = tmp_path / f"{document['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(document))
    result = cli("apply", "-f", path)
    assert result.code == 0, result.err
    return str(result.out.strip())


def post(url: str, path: str, body: Any) -> tuple[int, Any]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def until(what: Callable[[], Any], timeout_s: float = READY_S, why: str = "") -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        found = what()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s}s: {why}")
        time.sleep(0.1)


def served(name: str) -> endpoints.Endpoints:
    found = endpoints.read("default", name)
    assert found is not None, f"no live supervisor's endpoints for {name}"
    return found


def replicas_of(name: str) -> list[dict[str, Any]]:
    return list(served(name).extra["replicas"])


def alive(pid: int | None, ticks: str | None = None) -> bool:
    return bool(pid) and ProcessIdentity(int(pid), ticks or start_ticks(int(pid))).is_running()  # type: ignore[arg-type]


def ready_condition(name: str) -> dict[str, Any]:
    resource = ResourceStore().get("InferenceService", name)
    assert resource is not None
    status = lifecycle.observed_status(resource)
    return next(c for c in status["conditions"] if c["type"] == "Ready")


def predicts_like_the_model(url: str, name: str, digits: tuple[Any, np.ndarray, Path]) -> None:
    model, rows, _ = digits
    code, answer = post(url, f"/v1/models/{name}:predict", {"instances": rows.tolist()})
    assert code == 200, answer
    assert answer["predictions"] == model.predict(rows).tolist()


# --- tests --------------------------------------------------------------------------------------------------------
def test_two_replicas_from_a_folder_answer_and_one_killed_is_restarted(cli, home: Path, tmp_path: Path,
                                                                       digits) -> None:
    folder = digits[2]
    document = isvc("digits", {"minReplicas": 2, "sklearn": {"storageUri": f"file://{folder}"}})
    assert apply(cli, tmp_path, document) == "inferenceservice.serving.kserve.io/digits created"
    resource = lifecycle.wait_ready(ResourceStore(), "digits", timeout_s=READY_S)
    urls = until(lambda: len(served("digits").revisions[0].replicas) == 2 and served("digits").revisions[0].replicas,
                 why="two replicas answering")
    found = served("digits")
    assert found.revisions[0].name == "digits-predictor-00001" and found.revisions[0].percent == 100
    assert len(set(urls)) == 2 and found.model_name == "digits" and found.server == "sklearn"
    assert resource.status["url"] == f"http://127.0.0.1:{found.port}"
    for url in urls:
        predicts_like_the_model(url, "digits", digits)
    predicts_like_the_model(resource.status["url"], "digits", digits)  # the own port routes to a replica
    row = cli("get", "isvc").out.splitlines()[1].split()
    assert row[:4] == ["digits", f"http://127.0.0.1:{found.port}", "True", "100"]
    assert any("inference-service" in line and "default/digits" in line and "Ready True, 2 replicas answering" in line
               for line in cli("ps").out.splitlines())

    # applied again unchanged: the same supervisor serves it
    supervisor = lifecycle.supervisors("digits")
    assert apply(cli, tmp_path, document) == "inferenceservice.serving.kserve.io/digits unchanged"
    time.sleep(0.5)
    assert lifecycle.supervisors("digits") == supervisor and len(supervisor) == 1

    # a replica killed with SIGKILL is started again (CrashLoopBackOff's first second), and answers
    victim = replicas_of("digits")[0]
    os.kill(victim["pid"], signal.SIGKILL)
    again = until(lambda: [r for r in replicas_of("digits") if r["index"] == 0 and r["restarts"] == 1 and r["url"]],
                  why="replica 0 restarted")[0]
    assert again["pid"] != victim["pid"] and "exited with code -9 after it answered" in (
        lifecycle.replica_logs("digits")[0].read_text())
    until(lambda: len(served("digits").revisions[0].replicas) == 2, why="two replicas again")
    assert ready_condition("digits")["status"] == "True"
    predicts_like_the_model(again["url"], "digits", digits)
    logs = lifecycle.replica_logs("digits")
    assert [p.name for p in logs] == ["replica-0.log", "replica-1.log"]
    assert "millpond-model-server ready name=digits" in logs[1].read_text()
    assert logs[1].read_text()[:2] == "20"  # each line after the time it was read

    # deleted: its supervisor and replicas end, its endpoints go
    pids = [r["pid"] for r in replicas_of("digits")]
    assert cli("delete", "isvc", "digits").code == 0
    assert not lifecycle.supervisors("digits") and endpoints.read_file("default", "digits") is None
    until(lambda: not any(alive(pid) for pid in pids), 10, "replicas gone")
    assert is_free(found.port)  # nobody listens on its own port any more


def test_a_canary_gets_its_percent_then_is_promoted(cli, home: Path, tmp_path: Path, digits) -> None:
    model, rows, folder = digits
    other = tmp_path / "v2"
    other.mkdir()
    (other / "model.joblib").symlink_to(folder / "model.joblib")
    apply(cli, tmp_path, isvc("canary", {"sklearn": {"storageUri": str(folder)}}))
    lifecycle.wait_ready(ResourceStore(), "canary")
    first = replicas_of("canary")[0]
    apply(cli, tmp_path, isvc("canary", {"canaryTrafficPercent": 20, "sklearn": {"storageUri": f"file://{other}"}}))

    def split() -> bool:
        found = endpoints.read("default", "canary")
        return found is not None and [(r.name, r.percent, len(r.replicas)) for r in found.revisions] == [
            ("canary-predictor-00001", 80, 1), ("canary-predictor-00002", 20, 1)]

    until(split, why="an 80/20 split over two revisions")
    until(lambda: ready_condition("canary")["status"] == "True", why="Ready with the split")

    def traffic() -> list[tuple[str, int, str | None]]:
        status = ResourceStore().get("InferenceService", "canary").status  # type: ignore[union-attr]
        found = ((status.get("components") or {}).get("predictor") or {}).get("traffic") or []
        return [(t["revisionName"], t["percent"], t.get("tag")) for t in found]

    # the status is written by the supervisor after it publishes the endpoints: wait for it, not for the endpoints
    until(lambda: traffic() == [("canary-predictor-00001", 80, "prev"), ("canary-predictor-00002", 20, "latest")],
          why="the status's traffic with the split")
    assert cli("get", "isvc").out.splitlines()[1].split()[2:5] == ["True", "80", "20"]
    for revision in served("canary").revisions:
        predicts_like_the_model(revision.replicas[0], "canary", digits)

    # its supervisor killed and started again: the same two revisions, the same split
    [supervisor] = lifecycle.supervisors("canary")
    os.kill(supervisor.pid, signal.SIGKILL)
    until(lambda: endpoints.read("default", "canary") is None, 10, "the dead supervisor's endpoints unread")
    assert lifecycle.reconcile(ResourceStore()) == ["default/canary"]
    until(split, why="the 80/20 split again after a restart of the supervisor")

    # canaryTrafficPercent removed: the latest takes everything, the previous stops
    apply(cli, tmp_path, isvc("canary", {"sklearn": {"storageUri": f"file://{other}"}}))
    until(lambda: [(r.name, r.percent) for r in served("canary").revisions] == [("canary-predictor-00002", 100)],
          why="the canary promoted")
    until(lambda: not alive(first["pid"]), 10, "the previous revision's replica stopped")
    status = ResourceStore().get("InferenceService", "canary").status  # type: ignore[union-attr]
    assert [(t["revisionName"], t["percent"]) for t in status["components"]["predictor"]["traffic"]] == [
        ("canary-predictor-00002", 100)]


def test_a_model_in_a_bucket_is_served_and_kill_9_of_its_supervisor_leaves_nothing(
        cli, home: Path, tmp_path: Path, digits, s3_server, monkeypatch) -> None:  # noqa: F811
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    bucket = s3_server.create_bucket()
    s3_server.filesystem().put_file(str(digits[2] / "model.joblib"), f"{bucket}/models/digits/model.joblib")
    apply(cli, tmp_path, isvc("bucket", {"sklearn": {"storageUri": f"s3://{bucket}/models/digits"}}))
    store = ResourceStore()
    lifecycle.wait_ready(store, "bucket")
    found = served("bucket")
    predicts_like_the_model(found.revisions[0].replicas[0], "bucket", digits)
    copy = home / "serving/default/bucket/models/bucket-predictor-00001"
    assert (copy / ".millpond-source").read_text() == f"s3://{bucket}/models/digits"
    inode = (copy / "model.joblib").stat().st_ino

    [supervisor] = lifecycle.supervisors("bucket")
    replica = replicas_of("bucket")[0]
    os.kill(supervisor.pid, signal.SIGKILL)
    until(lambda: not alive(replica["pid"]), 10, "the replica ends with its supervisor")
    assert endpoints.read("default", "bucket") is None
    condition = ready_condition("bucket")
    assert (condition["status"], condition["reason"]) == ("False", "SupervisorNotRunning")
    assert cli("get", "isvc", "bucket").out.splitlines()[1].split()[1] == "False"

    # what millpond server does every 10 s: a new supervisor, the same port, the copy reused
    assert lifecycle.reconcile(store) == ["default/bucket"]
    lifecycle.wait_ready(store, "bucket")
    assert served("bucket").port == found.port
    assert (copy / "model.joblib").stat().st_ino == inode
    predicts_like_the_model(served("bucket").revisions[0].replicas[0], "bucket", digits)
    assert lifecycle.stop("bucket") and endpoints.read_file("default", "bucket") is None


ECHO = """
import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.answer(200, {"name": "echo", "ready": True})

    def do_POST(self):
        if self.path != "/v1/models/echo:predict":
            return self.answer(404, {"error": "no such model"})
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.answer(200, {"predictions": [sum(row) for row in body["instances"]], "greeting": os.environ["GREETING"],
                          "gpus": os.environ["CUDA_VISIBLE_DEVICES"],
                          "fraction": os.environ.get("MILLPOND_GPU_MEMORY_FRACTION")})

    def answer(self, code, value):
        data = json.dumps(value).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass

print("listening on", sys.argv[1], flush=True)
HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def echo(home: Path, greeting: str = "hi", **fields: Any) -> dict[str, Any]:
    """A custom container running ECHO on $(PORT), its GREETING from the Secret ``words`` (made here)."""
    ConfigStore(home).create("secret", "words", {"greeting": greeting}, replace=True)
    return {"name": "kserve-container", "command": [sys.executable], "args": ["-c", ECHO, "$(PORT)"],
            "env": [{"name": "GREETING", "valueFrom": {"secretKeyRef": {"name": "words", "key": "greeting"}}}],
            **fields}


def serve_echo(cli: Any, home: Path, tmp_path: Path, name: str) -> tuple[dict[str, Any], dict[str, Any], ResourceStore]:
    """An InferenceService of one echo container, applied and Ready: its document, its container, the store."""
    container = echo(home)
    document = isvc(name, {"containers": [container]})
    apply(cli, tmp_path, document)
    store = ResourceStore()
    lifecycle.wait_ready(store, name)
    return document, container, store


def test_a_custom_container_runs_its_command_on_its_port_with_env_from_a_secret_and_its_gpu(
        cli, home: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "2")  # test-only: two GPU indices for the ledger, no device behind
    container = echo(home, greeting="hello", image="example/echo:1", resources={"limits": {"nvidia.com/gpu": 1}})
    apply(cli, tmp_path, isvc("echo", {"minReplicas": 2, "containers": [container]}))
    lifecycle.wait_ready(ResourceStore(), "echo")
    urls = until(lambda: len(served("echo").revisions[0].replicas) == 2 and served("echo").revisions[0].replicas,
                 why="two replicas answering")
    assert served("echo").server == "command"
    answers = [post(url, "/v1/models/echo:predict", {"instances": [[1, 2], [3, 4]]}) for url in urls]
    assert all(answer == (200, {"predictions": [3, 7], "greeting": "hello", "gpus": answer[1]["gpus"],
                                "fraction": None}) for answer in answers)
    assert sorted(answer[1]["gpus"] for answer in answers) == ["0", "1"]  # one GPU each, from the ledger
    holders = [grant.holder.name for grant in Ledger().grants()]
    assert sorted(holders) == ["default/echo/echo-predictor-00001-0", "default/echo/echo-predictor-00001-1"]
    logs = "".join(path.read_text() for path in lifecycle.replica_logs("echo"))
    assert all(f"listening on {url.rsplit(':', 1)[1]}" in logs for url in urls)
    assert cli("delete", "isvc", "echo").code == 0
    assert Ledger().grants() == []  # given back with the replicas


def test_a_model_that_cannot_load_is_ModelLoadFailed_with_the_servers_error_line(cli, home: Path,
                                                                                  tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.joblib").write_bytes(b"not a model at all")
    apply(cli, tmp_path, isvc("broken", {"sklearn": {"storageUri": f"file://{broken}"}}))
    with pytest.raises(UnavailableError, match="ModelLoadFailed") as caught:
        lifecycle.wait_ready(ResourceStore(), "broken")
    error = next(line for line in lifecycle.replica_logs("broken")[0].read_text().splitlines() if " error: " in line)
    assert error.split(" error: ", 1)[1] in str(caught.value)
    assert "before it answered" in str(caught.value)
    condition = ready_condition("broken")
    assert (condition["status"], condition["reason"]) == ("False", "ModelLoadFailed")
    status = ResourceStore().get("InferenceService", "broken").status  # type: ignore[union-attr]
    assert status["modelStatus"]["transitionStatus"] == "BlockedByFailedLoad" and "url" not in status
    assert "latestReadyRevision" not in status["components"]["predictor"]  # no revision of it was ever ready


def test_an_unfitted_model_is_ModelLoadFailed_and_names_no_ready_revision(cli, home: Path, tmp_path: Path,
                                                                            digits) -> None:
    unfitted = tmp_path / "unfitted"
    unfitted.mkdir()
    joblib.dump(LogisticRegression(), unfitted / "model.joblib")
    apply(cli, tmp_path, isvc("unfitted", {"sklearn": {"storageUri": f"file://{unfitted}"}}))
    with pytest.raises(UnavailableError, match="ModelLoadFailed: .*LogisticRegression that was never fitted"):
        lifecycle.wait_ready(ResourceStore(), "unfitted")
    status = ResourceStore().get("InferenceService", "unfitted").status  # type: ignore[union-attr]
    predictor = status["components"]["predictor"]
    assert predictor["latestCreatedRevision"] == "unfitted-predictor-00001"
    assert "latestReadyRevision" not in predictor and "latestRolledoutRevision" not in predictor  # never ready
    # a fitted model applied over it: the new revision answers, and only it is named ready
    apply(cli, tmp_path, isvc("unfitted", {"sklearn": {"storageUri": f"file://{digits[2]}"}}))
    until(lambda: ready_condition("unfitted")["status"] == "True", why="the fitted revision served")
    predictor = ResourceStore().get("InferenceService", "unfitted").status["components"]["predictor"]  # type: ignore[union-attr]
    assert (predictor["latestReadyRevision"], predictor["latestRolledoutRevision"]) == (
        "unfitted-predictor-00002", "unfitted-predictor-00002")
    assert lifecycle.stop("unfitted")


def test_a_pvc_is_a_named_volume_or_a_datasets_shared_mount(cli, home: Path, tmp_path: Path, digits,
                                                              s3_server) -> None:  # noqa: F811
    volume = home / "volumes" / "default" / "models" / "digits"
    volume.mkdir(parents=True)
    # one file named as a KFP Model artifact is (after its output, no extension): served as model.joblib
    (volume / "model").write_bytes((digits[2] / "model.joblib").read_bytes())
    apply(cli, tmp_path, isvc("volume", {"sklearn": {"storageUri": "pvc://models/digits/model"}}))
    lifecycle.wait_ready(ResourceStore(), "volume")
    predicts_like_the_model(served("volume").revisions[0].replicas[0], "volume", digits)
    linked = home / "serving/default/volume/models/volume-predictor-00001/model.joblib"
    assert linked.is_symlink() and os.readlink(linked) == str(volume / "model")
    assert lifecycle.stop("volume")
    if fuse_available() is not None:
        pytest.skip(f"FUSE unavailable, so no dataset mount: {fuse_available()}")
    create_s3_dataset(cli, home, tmp_path, s3_server, {"models/digits/model.joblib":
                                                       (digits[2] / "model.joblib").read_bytes()}, name="trained")
    apply(cli, tmp_path, isvc("mounted", {"sklearn": {"storageUri": "pvc://trained/models/digits"}}))
    lifecycle.wait_ready(ResourceStore(), "mounted")
    predicts_like_the_model(served("mounted").revisions[0].replicas[0], "mounted", digits)
    assert "InferenceService default/mounted" in cli("ps").out
    assert lifecycle.stop("mounted")


@pytest.mark.parametrize(("text", "expanded"), [
    ("--port=$(PORT)", "--port=8080"), ("$$(PORT)", "$(PORT)"), ("$(NOPE)", "$(NOPE)"), ("$(PORT", "$(PORT"),
    ("$PORT", "$PORT"), ("a$", "a$"), ("$(PORT)$(PORT)", "80808080"), ("$$$(PORT)", "$8080"),
])
def test_kubernetes_expansion_of_a_containers_command(text: str, expanded: str) -> None:
    assert container_env.expand(text, {"PORT": "8080"}) == expanded


def test_replicas_asking_a_gpu_share_share_one_gpu(cli, home: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "1x16Gi")  # test-only: one GPU of 16 GiB, no device behind it
    container = echo(home, resources={"limits": {"aliyun.com/gpu-mem": 4}})
    apply(cli, tmp_path, isvc("shared", {"minReplicas": 2, "containers": [container]}))
    lifecycle.wait_ready(ResourceStore(), "shared")
    urls = until(lambda: len(served("shared").revisions[0].replicas) == 2 and served("shared").revisions[0].replicas,
                 why="two replicas answering")
    answers = [post(url, "/v1/models/echo:predict", {"instances": [[1]]})[1] for url in urls]
    assert [(a["gpus"], a["fraction"]) for a in answers] == [("0", "0.2500"), ("0", "0.2500")]  # 4 of 16 GiB each
    assert [grant.share_gpus for grant in Ledger().grants()] == [(0,), (0,)]


def test_a_missing_secret_is_CreateContainerConfigError_until_it_exists(cli, home: Path, tmp_path: Path) -> None:
    container = {"name": "kserve-container", "command": [sys.executable], "args": ["-c", ECHO, "$(PORT)"],
                 "env": [{"name": "GREETING", "valueFrom": {"secretKeyRef": {"name": "later", "key": "word"}}}]}
    apply(cli, tmp_path, isvc("later", {"containers": [container]}))
    with pytest.raises(UnavailableError, match="CreateContainerConfigError: .*secret 'later' not found"):
        lifecycle.wait_ready(ResourceStore(), "later")
    ConfigStore(home).create("secret", "later", {"word": "now"})
    until(lambda: ready_condition("later")["status"] == "True", 20, "started once the secret exists")
    url = served("later").revisions[0].replicas[0]
    assert post(url, "/v1/models/echo:predict", {"instances": [[1]]})[1]["greeting"] == "now"


def test_a_model_downloaded_over_http_is_unpacked_and_a_404_is_ModelLoadFailed(cli, home: Path, tmp_path: Path,
                                                                                digits) -> None:
    archive = tmp_path / "site" / "digits.tar.gz"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(digits[2] / "model.joblib", arcname="model.joblib")
    site = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(archive.parent)))
    threading.Thread(target=site.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{site.server_address[1]}"
    try:
        apply(cli, tmp_path, isvc("fetched", {"sklearn": {"storageUri": f"{base}/digits.tar.gz"}}))
        apply(cli, tmp_path, isvc("nowhere", {"sklearn": {"storageUri": f"{base}/missing.joblib"}}))
        lifecycle.wait_ready(ResourceStore(), "fetched")
        predicts_like_the_model(served("fetched").revisions[0].replicas[0], "fetched", digits)
        copy = home / "serving/default/fetched/models/fetched-predictor-00001"
        assert sorted(p.name for p in copy.iterdir()) == [".millpond-source", "model.joblib"]  # the archive unpacked
        with pytest.raises(UnavailableError, match=f"ModelLoadFailed: storageUri {base}/missing.joblib: the download "
                                                   "answered HTTP 404"):
            lifecycle.wait_ready(ResourceStore(), "nowhere")
        assert not (home / "serving/default/nowhere/models").exists() or not any(
            (home / "serving/default/nowhere/models").iterdir())  # no partial copy left behind
    finally:
        site.shutdown()


@pytest.mark.parametrize(("uri", "says"), [
    ("hf://someone/model", "hf:// models are not fetched yet"),
    ("file:///nowhere/at/all", "/nowhere/at/all does not exist"),
    ("file:///dev/zero", "/dev/zero is a character device, not a model file or folder"),
    ("oci://registry/model:1", "oci:// model images are pulled by a container runtime"),
    ("pvc://nothing/model", "no Dataset nothing in namespace default and no volume"),
])
def test_what_cannot_be_fetched_says_why_naming_the_uri(home: Path, uri: str, says: str) -> None:
    with ExitStack() as held, pytest.raises(ModelLoadFailed) as caught:
        fetch(parse_storage_uri(uri), "default", "m", "m-predictor-00001", held)
    assert says in str(caught.value) and uri in str(caught.value) and "\n" not in str(caught.value)


def test_a_re_created_inference_service_gets_a_supervisor_of_its_own(cli, home: Path, tmp_path: Path) -> None:
    document, _, store = serve_echo(cli, home, tmp_path, "again")
    [old] = lifecycle.supervisors("again")
    old_replica = replicas_of("again")[0]
    assert store.delete("InferenceService", "again")  # behind the supervisor's back, then applied again
    assert apply(cli, tmp_path, document) == "inferenceservice.serving.kserve.io/again created"
    until(lambda: not old.running and not alive(old_replica["pid"]), 10, "the old uid's supervisor ends by itself")
    until(lambda: ready_condition("again")["status"] == "True", why="the new uid served")
    [new] = lifecycle.supervisors("again")
    assert new.uid == store.get("InferenceService", "again").uid != old.uid  # type: ignore[union-attr]
    assert served("again").uid == new.uid


def test_a_supervisor_that_fails_says_why_in_the_status_and_leaves_nothing(cli, home: Path, tmp_path: Path) -> None:
    document, container, store = serve_echo(cli, home, tmp_path, "fails")
    replica = replicas_of("fails")[0]
    # a predictor no check let through (written to the store directly): the supervisor cannot read it
    store.apply([{**document, "spec": {"predictor": {"minReplicas": -1, "containers": [container]}}}])
    until(lambda: ready_condition("fails").get("reason") == "SupervisorFailed", 10, "the failure in the status")
    condition = ready_condition("fails")
    assert condition["status"] == "False" and condition["message"] == (
        "its supervisor failed: UserError: spec.predictor.minReplicas: -1 cannot be less than 0")
    assert "Traceback" in lifecycle.supervisor_log("fails").read_text()  # the traceback only in its own log
    until(lambda: not alive(replica["pid"]) and not lifecycle.supervisors("fails"), 10, "nothing left running")
    assert endpoints.read_file("default", "fails") is None


def test_a_command_that_cannot_run_is_RunContainerError(cli, home: Path, tmp_path: Path) -> None:
    container = {"name": "kserve-container", "command": [str(tmp_path / "no-such-server")], "args": ["$(PORT)"]}
    apply(cli, tmp_path, isvc("nocommand", {"containers": [container]}))
    with pytest.raises(UnavailableError, match=f"RunContainerError: .*cannot run {tmp_path}/no-such-server: No such"):
        lifecycle.wait_ready(ResourceStore(), "nocommand")


# --- model_fetch's paths, fuzzed -----------------------------------------------------------------------------------
NAMES = st.lists(st.sampled_from([*"ab./\\\x00 -", "..", "../", "/etc", "é"]), max_size=8).map("".join)


@fuzz_settings(150)
@given(NAMES)
def test_a_listed_key_lands_inside_its_folder_or_is_refused(tmp_path_factory, relative: str) -> None:
    into = tmp_path_factory.getbasetemp() / "fetched"
    try:
        path = _inside(into, relative, "s3://b/m")
    except ModelLoadFailed as exc:
        assert "s3://b/m" in str(exc) and "\n" not in str(exc)
        return
    assert into in Path(os.path.normpath(path)).parents


@fuzz_settings(40)
@given(st.lists(NAMES, min_size=1, max_size=3))
def test_an_archive_unpacks_inside_its_folder_or_fails_whole(tmp_path_factory, names: list[str]) -> None:
    base = tmp_path_factory.mktemp("unpack")
    into = base / "into"
    into.mkdir()
    archive = into / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in names:
            info = tarfile.TarInfo(name or "x")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"1"))
    try:
        _unpack_tar(archive, into, "https://h/model.tar.gz")
    except ModelLoadFailed:
        pass
    outside = [p for p in base.rglob("*") if into not in p.parents and p != into]
    assert outside == []

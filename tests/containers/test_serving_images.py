"""Custom InferenceService containers in their images: pulled with an imagePullSecrets Secret, the reasons
KServe and the kubelet give when an image cannot be had, and no container left once it is deleted.

The model server (a ``http.server`` answering KServe's v1 predict path) exists only in its image, built
here on the Debian Python base; the model folder its ``storageUri`` names is read at ``/mnt/models``.
The images and the registry come from the shared container test support (``tests/containers_support.py``).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond.runners.containers import runtimes, sweep
from millpond.runners.containers.command import OWNER_LABEL
from millpond.serving import endpoints, lifecycle
from millpond.store.resources import ResourceStore
from millpond.store.secrets import ConfigStore
from tests.containers_support import build_image, dockerconfigjson
from tests.queues_support import until

pytestmark = pytest.mark.containers

API = "serving.kserve.io/v1beta1"
SERVER = """\
import json, os, pathlib
from http.server import BaseHTTPRequestHandler, HTTPServer

MODEL = pathlib.Path(os.environ.get("MILLPOND_MODEL_DIR", "/mnt/models")) / "weight.txt"

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.answer(200, {"ready": True})

    def do_POST(self):
        name = os.environ["K_SERVICE"].removesuffix("-predictor")
        if self.path != f"/v1/models/{name}:predict":
            return self.answer(404, {"error": "no such model"})
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        weight = int(MODEL.read_text())
        self.answer(200, {"predictions": [weight * sum(row) for row in body["instances"]],
                          "greeting": os.environ.get("GREETING"), "model_dir": os.environ.get("MILLPOND_MODEL_DIR"),
                          "in_image": pathlib.Path("/srv/server.py").exists()})

    def answer(self, code, value):
        data = json.dumps(value).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass

print("serving on", os.environ["PORT"], flush=True)
HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
"""


@pytest.fixture(scope="module")
def server_image(python_image: str) -> str:
    """The model server's image: its script at /srv/server.py (nowhere on this host), run by its entrypoint."""
    containerfile = f'FROM {python_image}\nCOPY server.py /srv/server.py\nENTRYPOINT ["python3", "/srv/server.py"]\n'
    return build_image("localhost/millpond-test/kserve-echo:1", containerfile, {"server.py": SERVER})


def isvc(name: str, predictor: dict[str, Any], runtime: str = "container") -> dict[str, Any]:
    return {"apiVersion": API, "kind": "InferenceService",
            "metadata": {"name": name, "annotations": {"millpond.io/runtime": runtime}},
            "spec": {"predictor": predictor}}


def apply(cli: Any, tmp_path: Path, document: dict[str, Any]) -> None:
    path = tmp_path / f"{document['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(document))
    result = cli("apply", "-f", path)
    assert result.code == 0, result.err


def ready(name: str) -> dict[str, Any]:
    resource = ResourceStore().get("InferenceService", name)
    assert resource is not None
    return next(c for c in lifecycle.observed_status(resource)["conditions"] if c["type"] == "Ready")



def predict(url: str, name: str, rows: list[list[int]]) -> tuple[int, Any]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("POST", f"/v1/models/{name}:predict", body=json.dumps({"instances": rows}),
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def containers_of(name: str) -> list[str]:
    runtime = runtimes.find()
    assert not isinstance(runtime, str), runtime
    return sweep.labelled(runtime, f"{OWNER_LABEL}=InferenceService/default/{name}")


def test_a_custom_container_pulled_with_its_pull_secret_serves_from_its_image_and_goes_with_its_delete(
        cli, home: Path, tmp_path: Path, server_image: str, registry, monkeypatch) -> None:
    monkeypatch.setenv("CONTAINERS_REGISTRIES_CONF", str(registry.registries_conf))
    remote = registry.push(server_image, "serving/kserve-echo:1")
    ConfigStore(home).create("secret", "regcred", {
        ".dockerconfigjson": dockerconfigjson(registry.host, registry.user, registry.password)})
    ConfigStore(home).create("secret", "words", {"greeting": "hello"})
    model = tmp_path / "model"
    model.mkdir()
    (model / "weight.txt").write_text("3")
    greeting = {"name": "GREETING", "valueFrom": {"secretKeyRef": {"name": "words", "key": "greeting"}}}
    predictor = {"imagePullSecrets": [{"name": "regcred"}], "containers": [{
        "name": "kserve-container", "image": remote, "imagePullPolicy": "Always",
        "env": [{"name": "STORAGE_URI", "value": f"file://{model}"}, greeting],
        "resources": {"limits": {"memory": "256Mi", "cpu": "1"}}}]}
    apply(cli, tmp_path, isvc("echo", predictor))
    resource = lifecycle.wait_ready(ResourceStore(), "echo", timeout_s=180)

    code, answer = predict(resource.status["url"], "echo", [[1, 2], [3, 4]])  # through its own port's router
    assert (code, answer) == (200, {"predictions": [9, 21], "greeting": "hello", "model_dir": "/mnt/models",
                                    "in_image": True})
    replica = endpoints.read("default", "echo").extra["replicas"][0]  # type: ignore[union-attr]
    assert replica["container"] and replica["container"].startswith("millpond-")
    assert len(containers_of("echo")) == 1
    logs = "".join(path.read_text() for path in lifecycle.replica_logs("echo"))
    assert "serving on" in logs
    described = cli("get", "events", "-o", "json")
    assert described.code == 0, described.err
    reasons = [item["reason"] for item in described.json()["items"]
               if item["involvedObject"]["kind"] == "InferenceService"]
    assert "Pulled" in reasons

    assert cli("delete", "isvc", "echo").code == 0
    assert containers_of("echo") == []


def test_a_wrong_password_is_ErrImagePull_with_the_registrys_words(
        cli, home: Path, tmp_path: Path, server_image: str, registry, monkeypatch) -> None:
    monkeypatch.setenv("CONTAINERS_REGISTRIES_CONF", str(registry.registries_conf))
    remote = registry.push(server_image, "serving/kserve-echo:locked")
    ConfigStore(home).create("secret", "wrong", {
        ".dockerconfigjson": dockerconfigjson(registry.host, registry.user, "not-the-password")})
    predictor = {"imagePullSecrets": [{"name": "wrong"}],
                 "containers": [{"name": "kserve-container", "image": remote, "imagePullPolicy": "Always"}]}
    apply(cli, tmp_path, isvc("locked", predictor))
    condition = until(lambda: ready("locked")["status"] == "False" and ready("locked"), 120, "Ready False")
    assert condition["reason"] in ("ErrImagePull", "ImagePullBackOff"), condition
    assert f'"{remote}"' in condition["message"] and "unauthorized" in condition["message"].lower(), condition
    events = [item for item in cli("get", "events", "-o", "json").json()["items"]
              if item["involvedObject"]["name"] == "locked"]
    assert any(item["reason"] == "Failed" and item["message"] == "Error: ErrImagePull" for item in events), events
    pods = [pod for pod in cli("get", "pods", "-o", "json").json()["items"]
            if pod["metadata"]["labels"].get("serving.kserve.io/inferenceservice") == "locked"]
    waiting = pods[0]["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting["reason"] in ("ErrImagePull", "ImagePullBackOff") and "unauthorized" in waiting["message"].lower()
    backoff = until(lambda: ready("locked")["reason"] == "ImagePullBackOff" and ready("locked"), 30,
                    "ImagePullBackOff on the next try, within the kubelet's back-off")
    assert backoff["message"].startswith(f'Back-off pulling image "{remote}"'), backoff
    assert containers_of("locked") == []
    assert cli("delete", "isvc", "locked").code == 0


def test_never_with_a_missing_image_is_ErrImageNeverPull(cli, home: Path, tmp_path: Path, python_image: str) -> None:
    image = "localhost/millpond-test/not-built-anywhere:1"
    predictor = {"containers": [{"name": "kserve-container", "image": image, "imagePullPolicy": "Never"}]}
    apply(cli, tmp_path, isvc("never", predictor))
    condition = until(lambda: ready("never")["status"] == "False" and ready("never"), 60, "Ready False")
    assert condition["reason"] == "ErrImageNeverPull", condition
    assert condition["message"] == f'Container image "{image}" is not present with pull policy of Never'
    assert cli("delete", "isvc", "never").code == 0


def test_auto_without_the_image_runs_the_command_on_the_host_and_says_why(
        cli, home: Path, tmp_path: Path, python_image: str) -> None:
    """``auto`` with an image that cannot be had: the command runs here, once said; none of it in a container."""
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    model = tmp_path / "model"
    model.mkdir()
    (model / "weight.txt").write_text("2")
    predictor = {"containers": [{"name": "kserve-container", "image": "localhost/millpond-test/absent:1",
                                 "imagePullPolicy": "Never", "command": [sys.executable, str(script)],
                                 "env": [{"name": "STORAGE_URI", "value": f"file://{model}"}]}]}
    apply(cli, tmp_path, isvc("fallback", predictor, runtime="auto"))
    resource = lifecycle.wait_ready(ResourceStore(), "fallback", timeout_s=60)
    code, answer = predict(resource.status["url"], "fallback", [[1, 1]])
    assert code == 200 and answer["predictions"] == [4] and answer["in_image"] is False
    events = [item for item in cli("get", "events", "-o", "json").json()["items"]
              if item["involvedObject"]["name"] == "fallback"]
    said = [item for item in events if item["reason"] == "ImageNotUsed"]
    assert len(said) == 1 and "ErrImageNeverPull" in said[0]["message"], events
    assert containers_of("fallback") == []
    assert cli("delete", "isvc", "fallback").code == 0


def test_arena_serve_custom_with_an_image_runs_in_it_with_its_data_bound_at_the_path_given(
        home: Path, server_image: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``arena serve custom --image IMG --data VOLUME:/PATH``: the command runs in the image (the launcher that
    binds ``--data`` on this host is read back: the supervisor binds the volume into the container instead)."""
    from millpond.cli.arena import main

    def arena(*args: str) -> int:
        try:
            main(list(args))
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else 0
        return 0

    volume = home / "volumes" / "weights"
    volume.mkdir(parents=True)
    (volume / "weight.txt").write_text("5")
    assert arena("serve", "custom", "--name", "arena-echo", "--image", server_image, "-a",
                 "millpond.io/runtime=container", "--data", "weights:/mnt/models", "python3 /srv/server.py") == 0
    resource = lifecycle.wait_ready(ResourceStore(), "arena-echo", timeout_s=120)
    code, answer = predict(resource.status["url"], "arena-echo", [[1, 2]])
    assert (code, answer["predictions"], answer["in_image"]) == (200, [15], True)
    assert len(containers_of("arena-echo")) == 1
    assert arena("serve", "delete", "arena-echo") == 0
    assert containers_of("arena-echo") == []
    capsys.readouterr()


def test_after_kill_9_of_its_supervisor_the_next_one_and_the_delete_leave_no_stray_container(
        cli, home: Path, tmp_path: Path, server_image: str) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "weight.txt").write_text("1")
    predictor = {"containers": [{"name": "kserve-container", "image": server_image, "imagePullPolicy": "IfNotPresent",
                                 "env": [{"name": "STORAGE_URI", "value": f"file://{model}"}]}]}
    apply(cli, tmp_path, isvc("sturdy", predictor))
    lifecycle.wait_ready(ResourceStore(), "sturdy", timeout_s=120)
    [first] = containers_of("sturdy")
    [supervisor] = lifecycle.supervisors("sturdy")
    os.kill(supervisor.pid, signal.SIGKILL)
    until(lambda: not lifecycle.supervisors("sturdy"), 20, "the supervisor gone")
    assert lifecycle.reconcile() == ["default/sturdy"]  # as millpond server does every 10 s
    until(lambda: ready("sturdy")["status"] == "True" and containers_of("sturdy") not in ([], [first]), 120,
          "served again, from a new container")
    assert len(containers_of("sturdy")) == 1  # the one the killed supervisor left was removed
    assert cli("delete", "isvc", "sturdy").code == 0
    assert containers_of("sturdy") == []

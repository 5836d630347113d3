"""A Kubeflow Notebook applied with the real ``kubectl`` to a real ``millpond server``: Ready, a real kernel
answering ``1+1`` through the server's proxy (REST and WebSocket), Jupyter's token never needed by (nor shown
to) the caller, stop and start through ``kubeflow-resource-stopped``, a kill -9 of the Jupyter server
restarted, a delete that leaves no process behind, and bad input refused in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websocket

from millpond.notebooks import objects
from millpond.runners.process_groups import MARK_VAR
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore
from tests.kube_support import Kubectl, kubectl_for
from tests.notebooks.support import alive, ending_notebooks, environ_value, execute, marked_processes, request
from tests.server_support import Served, module_home

pytestmark = pytest.mark.timeout(600)
ROOT = Path(__file__).resolve().parents[2]


def notebook(name: str, **limits: str) -> str:
    return json.dumps({
        "apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": {"name": name, "namespace": "default"},
        "spec": {"template": {"spec": {"containers": [{
            "name": name, "image": "kubeflownotebookswg/jupyter-scipy:v1.8.0",
            "env": [{"name": "GREETING", "value": "hello"}],
            "resources": {"limits": {"cpu": "500m", "memory": "1Gi", **limits}}}]}}}})


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "notebooks")


@pytest.fixture(scope="module")
def served(home: Path) -> Iterator[Served]:
    yield from ending_notebooks(Served())


@pytest.fixture(scope="module")
def kubectl(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return kubectl_for(served, tmp_path_factory.mktemp("kubectl"))


def wait_for(kubectl: Kubectl, name: str, ready: bool, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        shown = kubectl.json("get", "notebook", name)
        if (shown.get("status", {}).get("readyReplicas") == 1) == ready:
            return shown
        assert time.monotonic() < deadline, f"notebook {name} not ready={ready}: {shown.get('status')}"
        time.sleep(0.5)


def server_view(name: str) -> dict[str, Any]:
    resource = ResourceStore(load_settings()).get("Notebook", name, "default")
    assert resource is not None
    shown = objects.view(load_settings(), resource.uid)
    assert shown is not None
    return shown


def start_kernel(base: str) -> str:
    status, text = request(f"{base}/api/kernels", "POST", {"name": "python3"})
    assert status == 201, text
    return str(json.loads(text)["id"])


def test_a_kernel_answers_through_the_proxy_and_the_notebook_stops_starts_restarts_and_goes(
        served: Served, kubectl: Kubectl) -> None:
    assert "notebook.kubeflow.org/lab created" in kubectl.ok("apply", "-f", "-", stdin=notebook("lab"))
    assert "condition met" in kubectl.ok("wait", "--for=condition=Ready", "notebook/lab", "--timeout=180s")
    shown = wait_for(kubectl, "lab", True)
    conditions = {c["type"]: c["status"] for c in shown["status"]["conditions"]}
    assert conditions["Ready"] == "True" and "running" in shown["status"]["containerState"]
    base = f"{served.url}/notebook/default/lab"

    status, text = request(f"{base}/api/status")
    assert status == 200 and "started" in json.loads(text), text
    kernel = start_kernel(base)
    ws = base.replace("http://", "ws://") + f"/api/kernels/{kernel}/channels"
    assert execute(ws, "1+1") == "2"
    environment = execute(ws, "import os; os.environ['GREETING'], os.environ['NB_PREFIX']")
    assert environment == "('hello', '/notebook/default/lab')"
    assert "JUPYTER_TOKEN" not in json.dumps(shown) and "token" not in json.dumps(shown.get("status", {}))

    view = server_view("lab")
    mark = environ_value(view["pid"], MARK_VAR)
    assert mark and len(marked_processes(mark)) >= 2  # the server and its kernel
    pods = kubectl.json("get", "pods", "-l", "notebook-name=lab")["items"]
    assert [pod["metadata"]["name"] for pod in pods] == ["lab-0"]
    assert pods[0]["metadata"]["labels"]["statefulset"] == "lab" and pods[0]["status"]["phase"] == "Running"
    assert "Jupyter Server" in kubectl.ok("logs", "lab-0")

    # kill -9 of the Jupyter server: its supervisor starts another, which answers again
    os.kill(view["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 120
    while server_view("lab").get("pid") in (None, view["pid"]) or not server_view("lab").get("ready"):
        assert time.monotonic() < deadline, server_view("lab")
        time.sleep(0.5)
    assert server_view("lab")["restarts"] == 1
    assert execute(base.replace("http://", "ws://") + f"/api/kernels/{start_kernel(base)}/channels", "1+1") == "2"

    # stop and start through the notebook controller's annotation
    kubectl.ok("annotate", "notebook", "lab", "kubeflow-resource-stopped=2026-01-01T00:00:00Z")
    stopped = wait_for(kubectl, "lab", False)
    deadline = time.monotonic() + 60
    while request(f"{base}/api/status")[0] != 503:
        assert time.monotonic() < deadline
        time.sleep(0.5)
    assert stopped["status"]["readyReplicas"] == 0
    assert "Stopped" in kubectl.ok("get", "notebooks")
    kubectl.ok("annotate", "notebook", "lab", "kubeflow-resource-stopped-")
    wait_for(kubectl, "lab", True)
    kernel = start_kernel(base)
    assert execute(base.replace("http://", "ws://") + f"/api/kernels/{kernel}/channels", "1+1") == "2"

    # delete: no process of the notebook is left, kernels included
    view = server_view("lab")
    mark = environ_value(view["pid"], MARK_VAR)
    assert mark
    kubectl.ok("delete", "notebook", "lab")
    deadline = time.monotonic() + 30
    while marked_processes(mark):
        assert time.monotonic() < deadline, marked_processes(mark)
        time.sleep(0.2)
    assert not alive(view["pid"])
    assert request(f"{base}/api/status")[0] == 404


def test_the_proxy_forwards_nothing_outside_the_prefix_and_answers_with_jupyters_token_not_the_callers(
        served: Served, kubectl: Kubectl) -> None:
    kubectl.ok("apply", "-f", "-", stdin=notebook("echo"))
    wait_for(kubectl, "echo", True)
    base = f"{served.url}/notebook/default/echo"
    for path in ("/../other/api/status", "/%2e%2e/other/api/status", "/api/%2E%2E/%2e%2e/x"):
        status, text = request(base + path)
        assert status in (400, 404), (path, status, text)
    # the caller's bearer and session cookie are not Jupyter's: the proxy puts Jupyter's token in their place
    # (test_proxy_headers checks what is sent)
    status, text = request(f"{base}/api/status", headers={"Authorization": "Bearer not-jupyters",
                                                          "Cookie": "millpond_session=abc; other=1"})
    assert status == 200, text
    # a WebSocket from another site's page (cross-site WebSocket hijacking) is refused; this server's own passes
    channels = base.replace("http://", "ws://") + f"/api/kernels/{start_kernel(base)}/channels"
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        execute(channels, "1+1", origin="http://evil.example")
    assert refused.value.status_code == 403
    assert execute(channels, "1+1", origin=served.url) == "2"
    status, text = request(f"{served.url}/notebook/default/missing/api/status")
    assert status == 404 and json.loads(text)["message"] == 'notebooks.kubeflow.org "missing" not found'
    kubectl.ok("delete", "notebook", "echo")


@pytest.mark.parametrize(("document", "error"), [
    (notebook("Bad_Name"), "metadata.name"),
    (notebook("too-big", cpu="100000"), "can never run on this machine"),
    (notebook("too-many", **{"nvidia.com/gpu": "64"}), "nvidia.com/gpu"),
])
def test_bad_input_is_refused_in_one_line_and_nothing_is_stored(home: Path, document: str, error: str) -> None:
    done = subprocess.run([sys.executable, "-m", "millpond.cli.main", "apply", "-f", "-"], input=document,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and error in lines[0], done.stderr
    stored = {resource.name for resource in ResourceStore(load_settings()).list("Notebook", None)}
    assert not stored & {"Bad_Name", "too-big", "too-many"}


def test_a_killed_supervisor_takes_its_server_and_kernels_along_and_the_server_starts_another(
        served: Served, kubectl: Kubectl) -> None:
    kubectl.ok("apply", "-f", "-", stdin=notebook("kept"))
    wait_for(kubectl, "kept", True)
    base = f"{served.url}/notebook/default/kept"
    start_kernel(base)
    view = server_view("kept")
    mark = environ_value(view["pid"], MARK_VAR)
    assert mark and len(marked_processes(mark)) >= 2
    [supervisor] = objects.supervisors("default", "kept")
    os.kill(supervisor.pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while marked_processes(mark):  # its guardian ends what it started
        assert time.monotonic() < deadline, marked_processes(mark)
        time.sleep(0.2)
    # millpond server's reconcile starts another supervisor, whose server answers
    deadline = time.monotonic() + 120
    while not (objects.supervisors("default", "kept") and server_view("kept").get("ready")
               and server_view("kept").get("pid") != view["pid"]):
        assert time.monotonic() < deadline, server_view("kept")
        time.sleep(0.5)
    assert request(f"{base}/api/status")[0] == 200
    kubectl.ok("delete", "notebook", "kept")


@pytest.mark.parametrize(("document", "error"), [
    (notebook("Bad_Name"), "Bad_Name"),
    (notebook("too-big", memory="100Ti"), "can never run on this machine"),
])
def test_bad_input_through_kubectl_is_a_status_naming_the_field(kubectl: Kubectl, document: str, error: str) -> None:
    done = kubectl.run("apply", "-f", "-", stdin=document)
    assert done.returncode == 1 and error in done.stderr and "Traceback" not in done.stderr, done
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Bad_Name" not in kubectl.ok("get", "notebooks") and "too-big" not in kubectl.ok("get", "notebooks")

"""A Notebook runs in its image when a container runtime works (issue 21's runtime policy), as Kubeflow runs the
Notebook's pod from ``spec.template.spec.containers[0].image``: the real Podman, an image made here (Debian's
``jupyter-server`` and ``python3-ipykernel``, started as Kubeflow's images start Jupyter: port 8888, an empty
token, ``NB_PREFIX`` as the base URL), applied with the real ``kubectl`` to a real ``millpond server``.

Ready in the image, its kernel the image's Python through the proxy (REST and WebSocket), the workspace at the
image's home, ``millpond.io/ran-in: podman``; stop/start, kill -9 of the supervisor (never two containers) and
delete leave no container with its label; ``imagePullPolicy: Never`` with an absent image waits with
``ErrImageNeverPull`` under policy ``container`` and runs on this host under ``auto``, saying why; multi-user
mode keeps the server on this host."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millpond.notebooks import in_image, objects, paths
from millpond.runners.containers import sweep
from millpond.runners.containers.command import OWNER_LABEL
from millpond.runners.containers.policy import ANNOTATION, RAN_IN
from millpond.runners.containers.runtimes import ContainerRuntime
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore
from tests.containers_support import build_image, ensure_debian_image
from tests.kube_support import Kubectl, kubectl_for
from tests.notebooks.support import ending_notebooks, execute, request
from tests.server_support import Served, module_home

pytestmark = pytest.mark.timeout(900)
BASE_IMAGE = "localhost/millpond-test/jupyter-base:1"
IMAGE = "localhost/millpond-test/jupyter:1"
# Kubeflow's jupyter images start Jupyter so (s6's jupyterlab service): 8888 on every address, no token, NB_PREFIX;
# as their user jovyan (uid 1000, group users: 100), whose home is the workspace volume
CONTAINERFILE = f"""\
FROM {BASE_IMAGE}
RUN echo 'jovyan:x:1000:100:Jovyan:/home/jovyan:/bin/sh' >> /etc/passwd && mkdir -p /home/jovyan \
    && chown 1000:100 /home/jovyan
ENV HOME=/home/jovyan NB_USER=jovyan NB_UID=1000 NB_PREFIX=/
USER jovyan
WORKDIR /home/jovyan
EXPOSE 8888
CMD ["sh", "-c", "exec jupyter-server --ip=0.0.0.0 --port=8888 --no-browser --allow-root --ServerApp.token='' \
--ServerApp.password='' --ServerApp.allow_origin='*' --ServerApp.base_url=\\"$NB_PREFIX\\""]
"""


@pytest.fixture(scope="module")
def notebook_image(podman: ContainerRuntime) -> str:
    ensure_debian_image(podman, BASE_IMAGE, ("python3", "jupyter-server", "python3-ipykernel"))
    return build_image(IMAGE, CONTAINERFILE)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    old = os.environ.get("MILLPOND_FAKE_GPUS")
    os.environ["MILLPOND_FAKE_GPUS"] = "1x16Gi"  # one fake GPU of 16 GiB: its share's variables reach the image
    try:
        yield from module_home(tmp_path_factory, "notebooks-in-image")
    finally:
        if old is None:
            os.environ.pop("MILLPOND_FAKE_GPUS", None)
        else:
            os.environ["MILLPOND_FAKE_GPUS"] = old


@pytest.fixture(scope="module")
def served(home: Path) -> Iterator[Served]:
    yield from ending_notebooks(Served())


@pytest.fixture(scope="module")
def kubectl(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return kubectl_for(served, tmp_path_factory.mktemp("kubectl"))


def notebook(name: str, image: str, policy: str | None = None, limits: dict[str, str] | None = None,
             **container: Any) -> str:
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if policy:
        metadata["annotations"] = {ANNOTATION: policy}
    return json.dumps({
        "apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": metadata,
        "spec": {"template": {"spec": {"containers": [{
            "name": name, "image": image, "env": [{"name": "GREETING", "value": "hello"}],
            "resources": {"limits": {"cpu": "1", "memory": "1Gi", **(limits or {})}}, **container}]}}}})


def wait_status(kubectl: Kubectl, name: str, done: Any, timeout: float = 240) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        shown = kubectl.json("get", "notebook", name)
        if done(shown.get("status") or {}):
            return shown
        assert time.monotonic() < deadline, f"notebook {name}: {shown.get('status')}"
        time.sleep(0.5)


def ready(status: dict[str, Any]) -> bool:
    return status.get("readyReplicas") == 1


def containers(podman: ContainerRuntime, name: str) -> list[str]:
    return sweep.labelled(podman, f"{OWNER_LABEL}={in_image.owner('default', name)}")


def inspect(podman: ContainerRuntime, container: str, template: str) -> str:
    return subprocess.run(podman.argv("inspect", "--format", template, container), capture_output=True, text=True,
                          timeout=60, check=True).stdout.strip()


def xsrf_headers(base: str) -> dict[str, str]:
    """What a browser sends with a POST to a token-less Jupyter: the ``_xsrf`` cookie its first page set, echoed."""
    import urllib.request

    with urllib.request.urlopen(f"{base}/", timeout=30) as answer:  # noqa: S310 - the test's own server
        cookie = next(value for key, value in answer.headers.items()
                      if key.lower() == "set-cookie" and value.startswith("_xsrf="))
    token = cookie.split(";", 1)[0].split("=", 1)[1]
    return {"Cookie": f"_xsrf={token}", "X-XSRFToken": token}


def test_a_notebook_runs_in_its_image_through_stop_start_kill_and_delete(
        served: Served, kubectl: Kubectl, podman: ContainerRuntime, notebook_image: str) -> None:
    kubectl.ok("apply", "-f", "-", stdin=notebook("img", notebook_image))
    wait_status(kubectl, "img", ready)
    [pod] = kubectl.json("get", "pods", "-l", "notebook-name=img")["items"]
    assert pod["metadata"]["annotations"][RAN_IN] == "podman"
    [container] = containers(podman, "img")
    assert inspect(podman, container, "{{.HostConfig.Memory}}") == str(2**30)  # limits.memory, enforced
    published = json.loads(inspect(podman, container, "{{json .HostConfig.PortBindings}}"))
    assert [binding["HostIp"] for binding in published["8888/tcp"]] == ["127.0.0.1"]

    base = f"{served.url}/notebook/default/img"
    headers = xsrf_headers(base)
    status, text = request(f"{base}/api/kernels", "POST", {"name": "python3"}, headers=headers)
    assert status == 201, text
    ws = base.replace("http://", "ws://") + f"/api/kernels/{json.loads(text)['id']}/channels"
    assert execute(ws, "import sys; sys.executable") == "'/usr/bin/python3'"  # the image's, not this host's
    said = execute(ws, "import os; open('from-kernel.txt', 'w').write('hi'); "
                       "os.getcwd(), os.environ['NB_PREFIX'], os.environ['GREETING']")
    assert said == "('/home/jovyan', '/notebook/default/img', 'hello')"
    status, text = request(f"{base}/api/contents")
    assert status == 200 and "from-kernel.txt" in [item["name"] for item in json.loads(text)["content"]], text
    workspace = paths.workspace(load_settings(), "default", "img")
    assert (workspace / "from-kernel.txt").read_text() == "hi"  # the workspace is the image's home
    # written by the image's user (jovyan), in the pod's fsGroup (100), as on a Kubeflow workspace volume
    assert ((workspace / "from-kernel.txt").stat().st_uid, (workspace / "from-kernel.txt").stat().st_gid) == (1000, 100)

    # kill -9 of the server (the runtime's client): its container is removed, another started, one at a time
    resource = ResourceStore(load_settings()).get("Notebook", "img", "default")
    view = objects.view(load_settings(), resource.uid) if resource is not None else None
    assert view is not None
    os.kill(view["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 120
    while True:
        found = containers(podman, "img")
        assert len(found) <= 1, found
        if found and found != [container] and objects.endpoint(load_settings(), "default", "img"):
            break
        assert time.monotonic() < deadline, found
        time.sleep(0.3)
    assert request(f"{base}/api/status")[0] == 200

    # stop: no container left with its label; start: one again, the workspace kept
    kubectl.ok("annotate", "notebook", "img", "kubeflow-resource-stopped=2026-01-01T00:00:00Z")
    wait_status(kubectl, "img", lambda status: status.get("readyReplicas") == 0 and not status.get("conditions"))
    assert containers(podman, "img") == []
    kubectl.ok("annotate", "notebook", "img", "kubeflow-resource-stopped-")
    wait_status(kubectl, "img", ready)
    [first] = containers(podman, "img")
    status, text = request(f"{base}/api/contents/from-kernel.txt")
    assert status == 200 and json.loads(text)["content"] == "hi", text

    # kill -9 of the supervisor: its container is ended, never two; the next supervisor's answers
    [supervisor] = objects.supervisors("default", "img")
    os.kill(supervisor.pid, signal.SIGKILL)
    deadline = time.monotonic() + 180
    while True:
        found = containers(podman, "img")
        assert len(found) <= 1, found
        answered = objects.supervisors("default", "img") and objects.endpoint(load_settings(), "default", "img")
        if answered and found and found != [first]:
            break
        assert time.monotonic() < deadline, (found, objects.supervisors("default", "img"))
        time.sleep(0.3)
    assert request(f"{base}/api/status")[0] == 200

    # delete: the container goes with the notebook
    kubectl.ok("delete", "notebook", "img")
    assert containers(podman, "img") == []
    assert request(f"{base}/api/status")[0] == 404


def test_the_templates_command_args_and_port_are_the_containers_and_its_gpu_share_reaches_it(
        served: Served, kubectl: Kubectl, podman: ContainerRuntime, notebook_image: str) -> None:
    kubectl.ok("apply", "-f", "-", stdin=notebook(
        "cmd", notebook_image, "podman", {"aliyun.com/gpu-mem": "4"}, command=["jupyter-server"],
        args=["--ip=0.0.0.0", "--port=9999", "--no-browser", "--allow-root", "--ServerApp.token=",
              "--ServerApp.base_url=$(NB_PREFIX)"], ports=[{"containerPort": 9999, "name": "notebook-port"}],
        workingDir="/tmp"))
    wait_status(kubectl, "cmd", ready)
    [container] = containers(podman, "cmd")
    assert "9999/tcp" in json.loads(inspect(podman, container, "{{json .HostConfig.PortBindings}}"))
    base = f"{served.url}/notebook/default/cmd"
    status, text = request(f"{base}/api/kernels", "POST", {"name": "python3"}, headers=xsrf_headers(base))
    assert status == 201, text
    ws = base.replace("http://", "ws://") + f"/api/kernels/{json.loads(text)['id']}/channels"
    granted = execute(ws, "import os; os.environ['CUDA_VISIBLE_DEVICES'], os.environ['MILLPOND_GPU_MEMORY_FRACTION']")
    assert granted == "('0', '0.2500')", granted  # the ledger's share of the (fake) GPU, as on this host
    marker = f"host-only-{os.getpid()}"
    Path("/tmp", marker).touch()  # the image's /tmp is its own: nothing of this host's is bound at workingDir
    try:
        assert execute(ws, f"import os; os.getcwd(), os.path.exists('/tmp/{marker}')") == "('/tmp', False)"
    finally:
        Path("/tmp", marker).unlink()
    kubectl.ok("delete", "notebook", "cmd")
    assert containers(podman, "cmd") == []


def test_an_image_that_may_not_be_pulled_waits_or_runs_on_this_host_saying_why(
        served: Served, kubectl: Kubectl, podman: ContainerRuntime, notebook_image: str) -> None:
    absent = f"localhost/millpond-test/not-here-{os.getpid()}:1"
    kubectl.ok("apply", "-f", "-", stdin=notebook("never", absent, "container", imagePullPolicy="Never"))
    shown = wait_status(kubectl, "never", lambda status: "ErrImageNeverPull" in json.dumps(status))
    waiting = shown["status"]["containerState"]["waiting"]
    assert waiting["reason"] == "ErrImageNeverPull" and absent in waiting["message"], waiting
    assert shown["status"]["readyReplicas"] == 0 and containers(podman, "never") == []

    kubectl.ok("apply", "-f", "-", stdin=notebook("fallback", absent, "auto", imagePullPolicy="Never"))
    wait_status(kubectl, "fallback", ready)
    [pod] = kubectl.json("get", "pods", "-l", "notebook-name=fallback")["items"]
    ran_in = pod["metadata"]["annotations"][RAN_IN]
    assert ran_in.startswith("host: the image could not be had: ErrImageNeverPull"), ran_in
    assert "is not used, JupyterLab runs on this host" in kubectl.ok("logs", "fallback-0")
    assert containers(podman, "fallback") == []

    # the image loaded meanwhile (as `podman load` would): the waiting notebook starts in it, its failure said once
    subprocess.run(podman.argv("tag", notebook_image, absent), check=True, capture_output=True, timeout=60)
    try:
        wait_status(kubectl, "never", ready, timeout=120)
        assert kubectl.ok("logs", "never-0").count("ErrImageNeverPull") == 1
        assert len(containers(podman, "never")) == 1
    finally:
        subprocess.run(podman.argv("untag", notebook_image, absent), capture_output=True, timeout=60)  # that name only
    kubectl.ok("delete", "notebook", "never", "fallback")
    assert containers(podman, "never") == []


def test_multi_user_mode_keeps_the_server_on_this_host_saying_why(home: Path, notebook_image: str) -> None:
    settings = load_settings()
    container = in_image.container_of(json.loads(notebook("mu", notebook_image))["spec"])
    assert (container.image, container.port, container.memory_bytes, container.cpus) == (notebook_image, 8888,
                                                                                          2**30, 1.0)
    placed = in_image.place(dataclasses.replace(settings, multi_user=True), "default", {}, container)
    assert placed.runtime is None and placed.ran_in == f"host: {in_image.MULTI_USER}"
    assert in_image.place(settings, "default", {}, container).ran_in == "podman"


@pytest.mark.parametrize(("document", "error"), [
    (notebook("bad-policy", IMAGE, "somewhere"), "metadata.annotations[millpond.io/runtime]"),
    (notebook("bad-pull", IMAGE, imagePullPolicy="Sometimes"), "containers[0].imagePullPolicy: Unsupported value"),
])
def test_a_runtime_or_pull_policy_kubernetes_does_not_know_is_refused_naming_the_field(
        kubectl: Kubectl, document: str, error: str) -> None:
    done = kubectl.run("apply", "-f", "-", stdin=document)
    assert done.returncode == 1 and error in done.stderr and "Traceback" not in done.stderr, done
    name = json.loads(document)["metadata"]["name"]
    assert ResourceStore(load_settings()).get("Notebook", name, "default") is None

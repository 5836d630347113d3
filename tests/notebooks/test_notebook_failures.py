"""Kill -9 around a Notebook, with ``millpond server`` as its own process: the Jupyter server killed is never
shown Ready while gone, and comes back; ``millpond server`` killed leaves the notebook running (same Jupyter,
its kernel and the kernel's variables kept), reachable through the proxy again once a server is started.
(A killed supervisor: ``test_notebook_lifecycle``.)"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from millpond.notebooks import objects
from millpond.notebooks.kinds import LAST_ACTIVITY_ANNOTATION
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore
from tests.kube_support import Kubectl, write_kubeconfig
from tests.notebooks.support import alive, execute, request
from tests.notebooks.test_notebook_lifecycle import notebook, wait_for

pytestmark = pytest.mark.timeout(600)
MILLPOND = Path(sys.executable).parent / "millpond"


class ServerProcess:
    """``millpond server`` on ``port`` of the loopback, over ``home`` (its culler checking every 1.2 s, culling
after 10 hours: the last-activity annotation is kept, nothing is culled)."""

    def __init__(self, home: Path, port: int) -> None:
        self.port, self.url = port, f"http://127.0.0.1:{port}"
        self.log = open(home.parent / f"server-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115 - open while it runs
        self.process = subprocess.Popen([str(MILLPOND), "server", "--port", str(port), "--enable-culling",
                                         "--cull-idle-time", "600", "--idleness-check-period", "0.02"],
                                        env={**os.environ, "MILLPOND_HOME": str(home)},
                                        stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/apis/v2beta1/healthz", timeout=5):
                    return
            except OSError:
                assert self.process.poll() is None, "server exited"
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self.log.close()


def server_view(name: str) -> dict[str, Any]:
    resource = ResourceStore(load_settings()).get("Notebook", name, "default")
    assert resource is not None
    return objects.view(load_settings(), resource.uid) or {}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MILLPOND_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_kill_9_of_the_jupyter_server_and_of_millpond_server(home: Path, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ServerProcess(home, port)
    kubectl = Kubectl(write_kubeconfig(tmp_path / "kubeconfig", server.url), tmp_path / "cache")
    try:
        kubectl.ok("apply", "-f", "-", stdin=notebook("survivor"))
        wait_for(kubectl, "survivor", True)
        deadline = time.monotonic() + 60  # the server's options reached its culler
        while LAST_ACTIVITY_ANNOTATION not in (kubectl.json("get", "notebook", "survivor")["metadata"].get(
                "annotations") or {}):
            assert time.monotonic() < deadline
            time.sleep(0.5)
        base = f"{server.url}/notebook/default/survivor"

        # kill -9 of the Jupyter server: whenever the notebook is shown Ready, what it names answers
        killed = server_view("survivor")["pid"]
        os.kill(killed, signal.SIGKILL)
        deadline = time.monotonic() + 120
        seen_down = False
        while True:
            shown = kubectl.json("get", "notebook", "survivor")
            if shown["status"].get("readyReplicas") == 1:
                assert server_view("survivor")["pid"] != killed, shown["status"]
                assert request(f"{base}/api/status")[0] == 200
                break
            seen_down = True
            assert time.monotonic() < deadline, shown["status"]
            time.sleep(0.1)
        assert seen_down and server_view("survivor")["restarts"] == 1

        status, text = request(f"{base}/api/kernels", "POST", {"name": "python3"})
        assert status == 201, text
        kernel = json.loads(text)["id"]
        channels = base.replace("http://", "ws://") + f"/api/kernels/{kernel}/channels"
        assert execute(channels, "x = 41; x") == "41"
        jupyter = server_view("survivor")["pid"]
        [supervisor] = objects.supervisors("default", "survivor")

        # kill -9 of millpond server: the notebook goes on; a new server reaches the same Jupyter and kernel
        server.kill()
        time.sleep(2)  # a few supervisor ticks without a server
        assert alive(jupyter) and alive(supervisor.pid)
        server = ServerProcess(home, port)
        assert kubectl.json("get", "notebook", "survivor")["status"]["readyReplicas"] == 1
        status, text = request(f"{base}/api/kernels")
        assert status == 200 and [one["id"] for one in json.loads(text)] == [kernel], text
        assert execute(channels, "x + 1") == "42"
        assert server_view("survivor")["pid"] == jupyter
        assert [one.pid for one in objects.supervisors("default", "survivor")] == [supervisor.pid]
        kubectl.ok("delete", "notebook", "survivor")
        assert not alive(jupyter)
    finally:
        for resource in ResourceStore(load_settings()).list("Notebook", None):
            objects.delete(load_settings(), resource.namespace, resource.name)
        server.kill()


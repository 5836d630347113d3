"""Kubeflow's culler on a real ``millpond server`` (in this process, culling on through upstream's environment
variables, in fractions of a minute): an idle notebook is stopped (``kubeflow-resource-stopped``), its workspace
kept, and started again; a notebook whose kernel is executing is not culled; ``last-activity`` follows the
kernels (``/api/kernels``), and the rules read as upstream's."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websocket

from millpond.notebooks import culler, objects, paths
from millpond.notebooks.kinds import LAST_ACTIVITY_ANNOTATION, STOP_ANNOTATION
from millpond.pods.records import parse_instant
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore
from tests.kube_support import Kubectl, kubectl_for
from tests.notebooks.support import execute, request
from tests.notebooks.test_notebook_lifecycle import notebook, wait_for
from tests.server_support import Served, module_home

pytestmark = pytest.mark.timeout(600)
IDLE_S = 20.0
CULLING = {"ENABLE_CULLING": "true", "CULL_IDLE_TIME": str(IDLE_S / 60), "IDLENESS_CHECK_PERIOD": str(1 / 60)}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    old = {key: os.environ.get(key) for key in CULLING}
    os.environ.update(CULLING)
    for _ in module_home(tmp_path_factory, "notebook-culling"):
        server = Served()  # reads the culler's settings now
        yield server
        for resource in ResourceStore(load_settings()).list("Notebook", None):
            objects.delete(load_settings(), resource.namespace, resource.name)
        server.stop()
    for key, value in old.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def kubectl(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return kubectl_for(served, tmp_path_factory.mktemp("kubectl"))


def annotations(kubectl: Kubectl, name: str) -> dict[str, str]:
    return dict(kubectl.json("get", "notebook", name)["metadata"].get("annotations") or {})


def wait_annotation(kubectl: Kubectl, name: str, key: str, present: bool = True, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while (key in annotations(kubectl, name)) != present:
        assert time.monotonic() < deadline, (name, key, present, annotations(kubectl, name))
        time.sleep(0.5)
    return annotations(kubectl, name).get(key, "")


def start_busy(ws_url: str, seconds: int) -> websocket.WebSocket:
    """Ask the kernel to run ``time.sleep(seconds)`` and leave it running (the socket is the caller's to close)."""
    socket = websocket.create_connection(ws_url, timeout=30)
    socket.send(json.dumps({
        "header": {"msg_id": uuid.uuid4().hex, "username": "test", "session": uuid.uuid4().hex,
                   "msg_type": "execute_request", "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell",
        "content": {"code": f"import time; time.sleep({seconds})", "silent": False, "store_history": False,
                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
    return socket


def kernel_channels(base: str) -> str:
    status, text = request(f"{base}/api/kernels", "POST", {"name": "python3"})
    assert status == 201, text
    return base.replace("http://", "ws://") + f"/api/kernels/{json.loads(text)['id']}/channels"


def kernel_states(base: str) -> list[str]:
    status, text = request(f"{base}/api/kernels")
    assert status == 200, text
    return [kernel["execution_state"] for kernel in json.loads(text)]


def test_an_idle_notebook_is_culled_a_busy_one_is_not_and_the_culled_one_starts_again_with_its_workspace(
        served: Served, kubectl: Kubectl) -> None:
    for name in ("idle", "busy"):
        kubectl.ok("apply", "-f", "-", stdin=notebook(name))
    for name in ("idle", "busy"):
        wait_for(kubectl, name, True)
    idle, busy = f"{served.url}/notebook/default/idle", f"{served.url}/notebook/default/busy"
    # a file in the idle notebook's workspace, through Jupyter's contents API (no kernel: no activity)
    status, text = request(f"{idle}/api/contents/kept.txt", "PUT", {"type": "file", "format": "text",
                                                                     "content": "still here"})
    assert status in (200, 201), text
    channels = kernel_channels(busy)
    assert execute(channels, "1+1") == "2"
    first = wait_annotation(kubectl, "busy", LAST_ACTIVITY_ANNOTATION)
    assert parse_instant(first) is not None and first.endswith("Z"), first  # RFC3339, as upstream writes
    socket = start_busy(channels, int(IDLE_S * 4))
    try:
        deadline = time.monotonic() + 60
        while kernel_states(busy) != ["busy"]:
            assert time.monotonic() < deadline, kernel_states(busy)
            time.sleep(0.2)
        busy_since = time.monotonic()

        # the idle one is culled: stopped through the controller's annotation, its last-activity removed
        stopped_at = wait_annotation(kubectl, "idle", STOP_ANNOTATION)
        assert parse_instant(stopped_at) is not None, stopped_at
        shown = wait_for(kubectl, "idle", False)
        assert shown["status"]["readyReplicas"] == 0
        wait_annotation(kubectl, "idle", LAST_ACTIVITY_ANNOTATION, present=False)
        assert request(f"{idle}/api/status")[0] == 503
        workspace = paths.workspace(load_settings(), "default", "idle")
        assert (workspace / "kept.txt").read_text() == "still here"

        # the busy one, executing for longer than the idle time, is not; its last-activity keeps moving
        while time.monotonic() - busy_since < IDLE_S * 1.5:
            time.sleep(0.5)
        assert kernel_states(busy) == ["busy"]
        shown_busy = annotations(kubectl, "busy")
        assert STOP_ANNOTATION not in shown_busy, shown_busy
        assert parse_instant(shown_busy[LAST_ACTIVITY_ANNOTATION]) > parse_instant(first)  # type: ignore[operator]
        assert wait_for(kubectl, "busy", True)["status"]["readyReplicas"] == 1
    finally:
        socket.close()

    # started again (the annotation removed, as the Jupyter web app's Start does): reachable, its files there,
    # and a fresh idle period (not culled at once)
    kubectl.ok("annotate", "notebook", "idle", f"{STOP_ANNOTATION}-")
    wait_for(kubectl, "idle", True)
    status, text = request(f"{idle}/api/contents/kept.txt")
    assert status == 200 and json.loads(text)["content"] == "still here", text
    assert execute(kernel_channels(idle), "1+1") == "2"
    restarted = wait_annotation(kubectl, "idle", LAST_ACTIVITY_ANNOTATION)
    assert parse_instant(restarted) > parse_instant(stopped_at)  # type: ignore[operator]
    for name in ("idle", "busy"):
        kubectl.ok("delete", "notebook", name)


NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)


def kernel(state: str, last: str) -> dict[str, Any]:
    return {"id": "k", "name": "python3", "execution_state": state, "last_activity": last, "connections": 1}


@pytest.mark.parametrize(("current", "kernels", "terminals", "expected"), [
    (None, [], [], "2026-01-02T03:04:05Z"),  # first sight: now
    ("2026-01-01T00:00:00Z", [], [], None),  # no kernels: left as it is
    ("2026-01-01T00:00:00Z", [kernel("busy", "2025-12-31T00:00:00.5Z")], [], "2026-01-02T03:04:05Z"),
    ("2026-01-01T00:00:00Z", [kernel("starting", "2025-12-31T00:00:00Z")], [], "2026-01-02T03:04:05Z"),
    ("2026-01-01T00:00:00Z", [kernel("idle", "2026-01-01T10:00:00.123456Z"), kernel("idle", "2026-01-01T09:00:00Z")],
     [], "2026-01-01T10:00:00Z"),  # all idle: the latest kernel's, in RFC3339 seconds
    ("2026-01-01T00:00:00Z", [kernel("idle", "2026-01-01T10:00:00Z")], [{"name": "1", "last_activity":
                                                                         "2026-01-01T11:00:00Z"}],
     "2026-01-01T11:00:00Z"),  # an open terminal counts too
])
def test_last_activity_follows_the_kernels_as_upstreams(current: str | None, kernels: list[dict[str, Any]],
                                                         terminals: list[dict[str, Any]],
                                                         expected: str | None) -> None:
    activity = None if current is None else culler.activity_of(kernels, terminals)
    assert culler.next_last_activity(current, activity, NOW) == expected


def test_the_settings_are_upstreams_minutes_with_fractions_and_bad_values_fall_back(tmp_path: Path) -> None:
    assert culler.CullingSettings.from_env({}) == culler.CullingSettings(False, 1440 * 60, 60)
    shown = culler.CullingSettings.from_env({"ENABLE_CULLING": "true", "CULL_IDLE_TIME": "0.5",
                                             "IDLENESS_CHECK_PERIOD": "2"})
    assert shown == culler.CullingSettings(True, 30, 120)
    for bad in ("ten", "-1", "0", "nan", "inf"):
        assert culler.CullingSettings.from_env({"CULL_IDLE_TIME": bad}).idle_s == 1440 * 60
    assert not culler.CullingSettings.from_env({"ENABLE_CULLING": "yes"}).enabled  # upstream: only "true"
    assert culler.idle_past("2026-01-02T03:03:00Z", culler.CullingSettings(True, 60, 1), NOW)
    assert not culler.idle_past("2026-01-02T03:03:10Z", culler.CullingSettings(True, 60, 1), NOW)
    assert not culler.idle_past("not a time", culler.CullingSettings(True, 60, 1), NOW)


@pytest.mark.parametrize(("option", "value"), [("--cull-idle-time", "-1"), ("--cull-idle-time", "0"),
                                                ("--idleness-check-period", "nan"),
                                                ("--idleness-check-period", "inf")])
def test_a_culling_option_that_is_no_positive_number_is_refused_in_one_line(tmp_path: Path, option: str,
                                                                             value: str) -> None:
    done = subprocess.run([sys.executable, "-m", "millpond.cli.main", "server", "--port", "0", option, value],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "MILLPOND_HOME": str(tmp_path / "home")})
    assert done.returncode == 2, done
    assert done.stderr.strip().splitlines() == [f"error: {option} {float(value):g}: expected a positive number "
                                                "of minutes"], done.stderr

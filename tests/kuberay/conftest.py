"""What the KubeRay tests share: a home whose RayClusters are real local Ray nodes, and waiting on them.

``kuberay_home`` (marked ``ray`` by tests/markers.py: these tests start Ray nodes, so they run in
the Ray group) is the ``home`` fixture, skipped when Ray is not installed; what a test leaves
running there is ended with the home (its supervisors' guardians end their nodes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from millpond.kuberay.nodes import ray_binary
from millpond.runners.processes import is_running

WAIT_S = 240.0  # a cluster's nodes start in ~10-40 s on two loaded cores


@pytest.fixture
def kuberay_home(home: Path) -> Path:
    if ray_binary() is None:
        pytest.skip("ray is not installed (pip install 'millpond[ray]')")
    return home


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def get(cli: Callable[..., Any], kind: str, name: str) -> dict[str, Any]:
    result = cli("get", kind, name, "-o", "json")
    assert result.code == 0, result.err
    shown: dict[str, Any] = json.loads(result.out)
    return shown


def wait_for(cli: Callable[..., Any], kind: str, name: str, done: Callable[[dict[str, Any]], bool],
             timeout_s: float = WAIT_S) -> dict[str, Any]:
    """The object once ``done(status)`` holds; the last status in the failure otherwise."""
    deadline = time.monotonic() + timeout_s
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = get(cli, kind, name).get("status") or {}
        if done(status):
            return status
        time.sleep(1.0)
    raise AssertionError(f"{kind} {name} did not get there in {timeout_s:.0f} s: {json.dumps(status)[:2000]}")


def alive(pids: list[tuple[int, str | None]]) -> list[int]:
    return [pid for pid, ticks in pids if is_running(pid, ticks)]


def run_driver(home: Path, gcs_port: str, code: str) -> subprocess.CompletedProcess[str]:
    """``code`` as a Ray driver joined to the cluster at ``gcs_port`` with the home's token."""
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(home / "kuberay" / "token")}
    prelude = (f"import ray; ray.init(address='127.0.0.1:{gcs_port}', logging_level='ERROR', "
               "log_to_driver=False)\n")
    return subprocess.run([sys.executable, "-c", prelude + code], env=env, capture_output=True, text=True,
                          timeout=180)

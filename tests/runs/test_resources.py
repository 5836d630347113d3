"""Resource requests are scheduled: GPUs by index, CPUs shared out, impossible requests refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PIPELINES, task

RESOURCES = PIPELINES / "resources.py"


def test_gpu_request_without_gpu_fails_before_any_task(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "0")
    result = cli("run", RESOURCES, "--pipeline", "gpu-task", "-o", "json")
    assert result.code == 1
    data = result.json()
    assert data["state"] == "FAILED"
    assert "visible-gpus requests 1 nvidia.com/gpu but this machine has none" in data["error"]
    assert data["tasks"] == []


def test_gpu_task_sees_only_its_own_gpu(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "2")
    result = cli("run", RESOURCES, "--pipeline", "gpu-task", "-o", "json")
    assert result.code == 0, result.err
    assert result.json()["outputs"] == {"Output": "0"}


def test_ignore_resources_runs_the_gpu_task_anyway(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "0")
    result = cli("run", RESOURCES, "--pipeline", "gpu-task", "--ignore-resources", "-o", "json")
    assert result.code == 0, result.err


def test_tasks_wait_until_their_cpu_request_fits(cli, tmp_path: Path) -> None:
    result = cli("run", RESOURCES, "--pipeline", "cpu-hogs", "-p", f"folder={tmp_path / 'busy'}", "-o", "json")
    assert result.code == 0, result.err
    assert [t["outputs"]["Output"] for t in result.json()["tasks"]] == ["alone", "alone"]


def test_request_larger_than_the_machine_fails_the_task(cli) -> None:
    result = cli("run", RESOURCES, "--pipeline", "too-big", "-o", "json")
    assert result.code == 1
    assert "GiB of memory but this machine has" in task(result.json(), "visible-gpus")["error"]

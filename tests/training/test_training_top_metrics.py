"""``arena top`` with GPU metrics and ``-r``: nvidia-smi's per-GPU use attached to the instances
holding those GPUs, N/A when nvidia-smi hangs or fails, and a refreshing top ended by Ctrl-C.

There is no GPU here, so ``nvidia-smi`` is a real executable script put first on PATH that prints
fixed CSV (or hangs, or fails); the ledger's GPUs are the test-only MILLPOND_FAKE_GPUS.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from millpond.scheduling import gpu_metrics
from tests.training_support import arena, instances, wait_status

CSV = "0, 37, 1024, 16384\n1, 5, 2048, 16384\n"
MIB = 1024 * 1024


@pytest.fixture
def smi(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write the fake ``nvidia-smi`` (its shell body) and put it first on PATH."""
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "2")
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")

    def write(body: str) -> None:
        script = folder / "nvidia-smi"
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)

    return write


def test_gpu_metrics_attach_to_the_instances_holding_them_and_fail_soft(capsys, smi) -> None:
    smi(f'case "$1" in --query-gpu=*) printf "{CSV}";; *) exit 6;; esac')
    assert gpu_metrics.read()[1] == gpu_metrics.GpuMetric(1, 5.0, 2048 * MIB, 16384 * MIB)
    assert arena(capsys, "submit", "pytorch", "--name", "metr", "--gpus", "1", "sleep 300").code == 0
    try:
        wait_status(capsys, "metr", ("RUNNING",), timeout=60)
        [gpu] = instances("metr")[0].gpus
        expected = {0: (37.0, 1024), 1: (5.0, 2048)}[gpu]
        info = json.loads(arena(capsys, "get", "metr", "-o", "json").out)
        assert info["instances"][0]["gpuMetrics"] == {str(gpu): {
            "gpuDutyCycle": expected[0], "usedGPUMemory": expected[1] * MIB, "totalGPUMemory": 16384.0 * MIB}}

        top = arena(capsys, "top", "job", "metr")
        assert top.code == 0, top.err
        [row] = [line.split() for line in top.out.splitlines() if line.strip().startswith("metr-master-0")]
        assert row[4:] == [str(gpu), f"{expected[0]:.1f}%", f"{expected[1]:.1f}/16384.0(MiB)"]
        one = arena(capsys, "top", "job", "metr", "-i", "metr-master-0")
        assert one.code == 0 and "metr-master-0" in one.out
        bad = arena(capsys, "top", "job", "metr", "-i", "nope")
        assert bad.code == 2 and bad.err.startswith("error: the job metr has no instance nope")

        node = arena(capsys, "top", "node", "-d")
        gpus = {cells[0]: cells for cells in (line.split() for line in node.out.splitlines())
                if cells and cells[0] in ("0", "1")}
        assert gpus[str(gpu)][-1] == "default/metr" and gpus[str(1 - gpu)][-1] == "-"
        assert gpus["0"][1:6] == ["16384.0", "MiB", "1024.0", "MiB", "37.0%"]

        for body in ("exec sleep 30", "echo 'NVIDIA-SMI has failed' >&2; exit 9", "echo '0, [N/A], x, y'"):
            smi(body)  # hanging, failing, unparseable: no metrics, no error
            started = time.monotonic()
            info = json.loads(arena(capsys, "get", "metr", "-o", "json").out)
            assert time.monotonic() - started < gpu_metrics.TIMEOUT_S + 3, body
            assert info["instances"][0]["gpuMetrics"] == {}
            top = arena(capsys, "top", "job", "metr")
            assert top.code == 0
            [row] = [line.split() for line in top.out.splitlines() if line.strip().startswith("metr-master-0")]
            assert row[4:] == [str(gpu), "N/A", "N/A"]
        assert "N/A" in arena(capsys, "top", "node", "-d").out

        needs_name = arena(capsys, "top", "job", "-r")
        assert needs_name.code == 2 and needs_name.err.startswith("error: you must specify the job name")
        assert arena(capsys, "top", "node", "-r").code == 2
    finally:
        arena(capsys, "delete", "metr")


def test_refresh_redraws_until_ctrl_c(capsys, home: Path, smi) -> None:
    smi(f'printf "{CSV}"')
    assert arena(capsys, "submit", "pytorch", "--name", "live", "--gpus", "1", "sleep 300").code == 0
    try:
        wait_status(capsys, "live", ("RUNNING",), timeout=60)
        proc = subprocess.Popen([str(Path(sys.executable).with_name("arena")), "top", "job", "live", "-r"],
                                env={**os.environ, "MILLPOND_HOME": str(home)},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
        frames, current, deadline = [], [], time.monotonic() + 30
        while len(frames) < 2:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if line.startswith("-----") and line.rstrip().endswith("-----") and ":" in line:
                frames.append(current)
                current = []
            else:
                current.append(line)
        for frame in frames:
            assert any(line.strip().startswith("live-master-0") and "%" in line for line in frame), frame
            assert frame[-1].strip() == "Allocated/Requested GPUs of Job: 1/1"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
        err = proc.stderr.read()
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    finally:
        arena(capsys, "delete", "live")

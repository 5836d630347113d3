"""``arena top job -o wide|json`` and ``arena top node -d|-o json``: CPU, memory and GPUs allocated by the ledger
beside what a real running job's processes use (its instances' sessions, read from /proc)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from millpond.datasets.quantity import format_bytes
from tests.training_support import arena, wait_status

MIB = 1024 * 1024
# Holds 48 MiB and keeps one core busy, in a child process: the job's use is its whole session's
BUSY = ("python -c 'import subprocess, sys; subprocess.run([sys.executable, \"-c\", "
        "\"b = bytearray(48 << 20)\\nwhile True: sum(range(10**5))\"])'")


@pytest.fixture
def busy(home: Path, capsys, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "2")  # the ledger's test-only GPU count (no device is touched)
    result = arena(capsys, "submit", "pytorch", "--name", "busy", "--gpus", "1", "--cpu", "1", "--memory", "128Mi",
                   BUSY)
    assert result.code == 0, result.err
    try:
        wait_status(capsys, "busy", ("RUNNING",), timeout=90)
        yield
    finally:
        assert arena(capsys, "delete", "busy").code == 0


def _json(capsys, *args: str) -> dict:
    result = arena(capsys, "top", *args, "-o", "json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_top_job_shows_allocated_and_used(capsys, busy) -> None:
    deadline = time.monotonic() + 30
    while True:  # the grandchild is up and holds its 48 MiB
        [job] = _json(capsys, "job")["jobs"]
        if job["memoryUsed"] > 48 * MIB:
            break
        assert time.monotonic() < deadline, job
        time.sleep(0.3)
    assert (job["name"], job["status"], job["requestGPUs"], job["allocatedGPUs"]) == ("busy", "RUNNING", 1, 1)
    assert job["cpuAllocated"] == 1 and job["memoryAllocated"] == 128 * MIB and job["gpuAllocated"] == 1
    assert job["cpuUsed"] > 0.05  # a core kept busy, measured over a 0.3 s sample on a shared machine
    assert job["gpuMemoryUsed"] is None and job["gpuDutyCycle"] is None  # no GPU metrics here: unknown, not 0

    wide = arena(capsys, "top", "job", "-o", "wide")
    assert wide.code == 0, wide.err
    header, row = (line.split() for line in wide.out.splitlines()[:2])
    assert header[-5:] == ["CPU(Allocated)", "CPU(Used)", "MEMORY(Allocated)", "MEMORY(Used)", "GPU_MEMORY(Used)"]
    assert row[0] == "busy" and row[-5] == "1" and row[-3] == format_bytes(128 * MIB) and row[-1] == "N/A"
    assert wide.out.rstrip().endswith("Total Allocated/Requested GPUs of Training Jobs: 1/1")

    one = _json(capsys, "job", "busy")
    assert [job["name"] for job in one["jobs"]] == ["busy"]
    assert arena(capsys, "top", "job", "nosuch", "-o", "json").code != 0
    refused = arena(capsys, "top", "job", "busy", "-r", "-o", "json")
    assert refused.code == 2 and refused.err.startswith("error: ") and len(refused.err.splitlines()) == 1


def test_top_node_shows_capacity_allocated_and_used(capsys, busy) -> None:
    [node] = _json(capsys, "node")["nodes"]
    assert (node["totalGPUs"], node["allocatedGPUs"], node["gpuCapacity"]) == (2, 1, 2)
    assert node["cpuAllocated"] >= 1 and node["memoryAllocated"] >= 128 * MIB
    assert node["cpuCapacity"] >= 1 and 0 < node["memoryUsed"] <= node["memoryTotal"]
    assert 0 <= node["cpuUsed"] <= node["cpuCores"]
    [holder] = [h for h in node["instances"] if h["name"] == "busy"]
    assert holder["kind"] == "job" and len(holder["gpus"]) == 1
    assert [gpu["index"] for gpu in node["gpus"]] == [0, 1]

    details = arena(capsys, "top", "node", "-d")
    assert details.code == 0, details.err
    lines = details.out.splitlines()
    start = lines.index("CPU/Memory:")
    assert lines[start + 1].split() == ["RESOURCE", "CAPACITY", "ALLOCATED", "USED", "MACHINE(Total)"]
    cpu = lines[start + 3].split()
    assert cpu[0] == "cpu" and float(cpu[2]) >= 1
    assert lines[start + 4].split()[0] == "memory"


def test_a_sessions_use_is_its_whole_tree_and_a_gone_leader_counts_nothing() -> None:
    """One /proc pass: a session's members summed (a grandchild in another process group included); a leader
    that exited, or a live pid recorded with another start time (pid reuse), counts for nothing."""
    import subprocess
    import sys

    from millpond.runners.processes import start_ticks
    from millpond.scheduling.usage import SessionTable

    script = ("import subprocess, sys, time\n"  # the child: a process group of its own, still in the session
              "child = subprocess.Popen([sys.executable, '-c', 'b = bytearray(32 << 20); import time; time.sleep(60)'],"
              " process_group=0)\n"
              "print(child.pid, flush=True); time.sleep(60)\n")
    leader = subprocess.Popen([sys.executable, "-c", script], start_new_session=True, stdout=subprocess.PIPE, text=True)
    grandchild = 0
    try:
        grandchild = int(leader.stdout.readline())
        ticks = start_ticks(leader.pid)
        deadline = time.monotonic() + 20
        while True:
            used = SessionTable().of([(leader.pid, ticks)])
            if used.memory_bytes > 32 * MIB:
                break
            assert time.monotonic() < deadline, used
            time.sleep(0.1)
        assert used.pids == {leader.pid, grandchild} and used.processes == 2
        assert SessionTable().of([(leader.pid, "1")]).processes == 0  # same pid, another start: not this one
        assert SessionTable().of([(leader.pid, f"{ticks}@elsewhere0000")]).processes == 0  # another machine's
    finally:
        import os
        import signal

        os.killpg(leader.pid, signal.SIGKILL)
        if grandchild:
            os.killpg(grandchild, signal.SIGKILL)
        leader.wait()
        leader.stdout.close()
    assert SessionTable().of([(leader.pid, ticks)]).processes == 0  # gone

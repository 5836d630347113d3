"""``arena top job`` and ``arena top node`` over a real running job, with the ledger's test-only two GPUs:
Arena's columns, the job's GPUs requested and allocated, the machine's GPUs held and by whom."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from millpond.training.views import LOCAL_IP, node_name
from tests.training_support import arena, instances, record, wait_status


@pytest.fixture
def two_gpus(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "2")  # the ledger's test-only GPU count (no device is touched)


def _columns(line: str) -> list[str]:
    return line.split()


def test_top_job_and_top_node_show_a_running_jobs_gpus(capsys, two_gpus) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "toppy", "--workers", "1", "--gpus", "1", "sleep 300").code == 0
    try:
        wait_status(capsys, "toppy", ("RUNNING",), timeout=60)
        assert arena(capsys, "submit", "pytorch", "--name", "waits", "--gpus", "2", "true").code == 0
        deadline = time.monotonic() + 30  # QUEUING from the start; the ledger's answer (1 GPU free) follows
        while "GPU" not in (record("waits").message or ""):
            assert time.monotonic() < deadline, record("waits")
            time.sleep(0.1)

        jobs = arena(capsys, "top", "job")
        assert jobs.code == 0, jobs.err
        lines = jobs.out.splitlines()
        assert _columns(lines[0]) == ["NAME", "STATUS", "TRAINER", "AGE", "GPU(Requested)", "GPU(Allocated)", "NODE"]
        rows = {cells[0]: cells for cells in map(_columns, lines[1:-2])}
        assert rows["toppy"][1:3] == ["RUNNING", "PYTORCHJOB"] and rows["toppy"][4:] == ["1", "1", LOCAL_IP]
        assert rows["waits"][1:3] == ["QUEUING", "PYTORCHJOB"] and rows["waits"][4:] == ["2", "0", "N/A"]
        assert lines[-2] == ""  # Arena's blank line, then the RUNNING jobs' totals (the queued one is not counted)
        assert lines[-1] == "Total Allocated/Requested GPUs of Training Jobs: 1/1"

        one = arena(capsys, "top", "job", "toppy")
        assert one.code == 0 and "Status:    RUNNING" in one.out
        [row] = [_columns(line) for line in one.out.splitlines() if line.strip().startswith("toppy-master-0")]
        assert row[1:3] == ["Running", "1"] and row[3] == LOCAL_IP
        assert row[4] == str(instances("toppy")[0].gpus[0])
        assert one.out.rstrip().endswith("Allocated/Requested GPUs of Job: 1/1")

        node = arena(capsys, "top", "node")
        assert node.code == 0, node.err
        lines = node.out.splitlines()
        assert _columns(lines[0]) == ["NAME", "IPADDRESS", "ROLE", "STATUS", "GPU(Total)", "GPU(Allocated)"]
        assert _columns(lines[1]) == [node_name(), LOCAL_IP, "<none>", "Ready", "2", "1"]
        assert set(lines[2]) == {"-"}
        assert lines[3:] == ["Allocated/Total GPUs In Cluster:", "1/2 (50.0%)"]

        details = arena(capsys, "top", "node", "-d")
        assert details.code == 0 and "Type:    GPUExclusive" in details.out
        [holder] = [_columns(line) for line in details.out.splitlines() if " toppy " in line]
        assert holder[:6] == ["default", "toppy", "job", "Running", "1", f"gpu{instances('toppy')[0].gpus[0]}"]
        assert "Allocated GPUs: 1" in details.out and "Total GPUs:     2" in details.out

        unknown = arena(capsys, "top", "node", "elsewhere")
        assert unknown.code == 2 and unknown.err.startswith("error: no node elsewhere")
        missing = arena(capsys, "top", "job", "nope")
        assert missing.code == 2 and missing.err.startswith("error: no training job nope")
    finally:
        arena(capsys, "delete", "toppy", "waits")
    node = arena(capsys, "top", "node")
    assert node.out.splitlines()[-1] == "0/2 (0.0%)"  # the deleted job's grant went back to the ledger

"""Training jobs and the machine-wide ledger: a job waits QUEUING, saying why, while the GPUs it
needs are held, gets GPU indices of its own in CUDA_VISIBLE_DEVICES, and a request no machine of
this kind can meet is refused at submit. Runs where ``millpond.scheduling`` is present."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("millpond.scheduling.ledger")

from millpond.store.training import JobStore
from tests.training_support import arena, gone, instances, record, wait_status

pytestmark = pytest.mark.usefixtures("database")  # on SQLite and on PostgreSQL


@pytest.fixture
def two_gpus(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "2")  # the ledger's test-only GPU count (no device is touched)


def test_a_job_queues_until_the_gpus_it_needs_are_free(capsys, two_gpus) -> None:
    line = 'echo "gpus=[$CUDA_VISIBLE_DEVICES]"; sleep 300'
    assert arena(capsys, "submit", "pytorch", "--name", "first", "--workers", "2", "--gpus", "1", line).code == 0
    wait_status(capsys, "first", ("RUNNING",), timeout=60)
    assert sorted(i.gpus for i in instances("first")) == [(0,), (1,)]
    assert arena(capsys, "submit", "pytorch", "--name", "second", "--gpus", "1", "echo gpus=[$CUDA_VISIBLE_DEVICES]"
                 ).code == 0
    waiting = wait_status(capsys, "second", ("QUEUING",), timeout=30)
    assert waiting["status"] == "QUEUING"
    reason = ""
    for _ in range(100):  # QUEUING is written before the first answer of the ledger; the reason follows
        reason = record("second").message or ""
        if "GPU" in reason:
            break
        time.sleep(0.1)
    assert "needs 1 GPU, 0 free" in reason and "default/first" in reason
    assert "Queuing" in arena(capsys, "get", "second", "-e").out
    first = instances("first")
    assert arena(capsys, "delete", "first").code == 0
    assert all(gone(i.pid, i.pid_start) for i in first)
    assert wait_status(capsys, "second")["status"] == "SUCCEEDED"
    assert arena(capsys, "logs", "second").out.strip() in ("gpus=[0]", "gpus=[1]")


def test_a_request_no_machine_can_meet_is_refused_at_submit(capsys, two_gpus) -> None:
    result = arena(capsys, "submit", "pytorch", "--name", "huge", "--workers", "3", "--gpus", "1", "true")
    assert result.code == 2
    assert result.err.strip().startswith("error: the job huge can never run here: requests 3 GPUs")
    assert JobStore().list(None) == []

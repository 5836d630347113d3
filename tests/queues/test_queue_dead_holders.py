"""A ClusterQueue never counts workloads whose holders are dead (issue 28, defect 6).

Three jobs in a 1-CPU queue, one admitted and two waiting, whose supervisors are all killed
with ``kill -9``: nobody is left to run an admission cycle. A read of the queue (``millpond get
clusterqueues``, ``queue list``) reclaims their quota before it counts, and a running server does
it on its own timer, with no read at all, as job status reads already settle dead supervisors.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from millpond.store.workloads import WorkloadStore
from tests.queues.test_queued_jobs import gated
from tests.queues_support import apply_objects, queues, until
from tests.training_support import arena, gone, record


def _three_jobs_then_kill_their_supervisors(capsys: pytest.CaptureFixture[str], cli, tmp_path: Path) -> None:
    """j0 admitted (running), j1 and j2 waiting for the queue's one CPU; then every supervisor SIGKILLed."""
    apply_objects(*queues(("one-cpu", 0, {}), cpu="1"))
    for name in ("j0", "j1", "j2"):
        assert arena(capsys, "submit", "pytorch", "--name", name, "--queue", "one-cpu", "--cpu", "1",
                     gated(tmp_path, name)).code == 0, name
    until(lambda: sum((tmp_path / f"j{i}.started").exists() for i in range(3)) == 1, 60, "one job running")
    until(lambda: sorted(w.state for w in WorkloadStore().list()) == ["Admitted", "Pending", "Pending"], 30,
          "one admitted, two pending")
    assert _counts(cli) == (2, 1, "1")  # the live supervisors' view, before the kill
    supervisors = [(record(f"j{i}").supervisor_pid, record(f"j{i}").supervisor_start) for i in range(3)]
    for pid, _ in supervisors:
        os.kill(pid or 0, signal.SIGKILL)
    for pid, ticks in supervisors:
        assert gone(pid, ticks), pid


def _counts(cli) -> tuple[int, int, str]:
    """(pending, admitted, cpu used) of ClusterQueue one-cpu, as ``get clusterqueue -o json`` reports them."""
    status = json.loads(cli("get", "clusterqueue", "one-cpu", "-o", "json").out)["status"]
    used = [r["total"] for f in status.get("flavorsUsage", []) for r in f["resources"] if r["name"] == "cpu"]
    return status["pendingWorkloads"], status["admittedWorkloads"], (used or ["0"])[0]


def test_reading_a_clusterqueue_reclaims_the_quota_of_killed_supervisors(capsys, cli, home, tmp_path) -> None:
    try:
        _three_jobs_then_kill_their_supervisors(capsys, cli, tmp_path)
        assert _counts(cli) == (0, 0, "0")  # the first read: nothing dead is counted
        (row,) = cli("get", "clusterqueues").out.splitlines()[1:]
        assert row.split()[:4] == ["one-cpu", "BestEffortFIFO", "0", "0"], row
        shown = json.loads(cli("queue", "get", "one-cpu", "-o", "json").out)
        assert (shown["admittedWorkloads"], shown["pendingWorkloads"]) == (0, 0), shown
        finished = WorkloadStore().list()
        assert {w.state for w in finished} == {"Finished"}
        assert all("holder process" in w.reason and "is gone" in w.reason for w in finished), finished
    finally:
        for i in range(3):
            (tmp_path / f"j{i}.gate").touch()


def test_a_running_server_reclaims_the_quota_of_killed_supervisors_without_a_read(capsys, cli, home,
                                                                                   tmp_path) -> None:
    from tests.server_support import Served

    server = Served()
    try:
        _three_jobs_then_kill_their_supervisors(capsys, cli, tmp_path)
        # the workload table read directly (no queue read reclaims anything): the server's timer did it
        until(lambda: {w.state for w in WorkloadStore().list()} == {"Finished"}, 60, "the server's reclaim")
    finally:
        server.stop()
        for i in range(3):
            (tmp_path / f"j{i}.gate").touch()

"""Training jobs end to end, with real processes: a 2-instance DDP job over gloo writing a checkpoint
into a ReadWrite dataset over SeaweedFS, a failing instance, --retry, --running-timeout, delete, SIGTERM and kill -9
of the supervisor."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from millpond.datasets.mounts import fuse_available, is_mounted
from tests.datasets_support import create_s3_dataset
from tests.queues_support import until
from tests.training_support import (
    arena,
    gone,
    group_empty,
    instances,
    job_json,
    reaped,
    record,
    wait_status,
)

torch = pytest.importorskip("torch")

DDP_SCRIPT = textwrap.dedent("""\
    import os, sys
    import torch
    import torch.distributed as dist

    env = {k: os.environ.get(k) for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PET_MASTER_ADDR",
           "PET_MASTER_PORT", "PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE", "CUDA_VISIBLE_DEVICES")}
    print("env", sorted(env.items()), flush=True)
    rank = int(env["RANK"])
    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "127.0.0.1", env
    assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] and int(env["MASTER_PORT"]) > 0, env
    assert env["WORLD_SIZE"] == env["PET_NNODES"] == "2", env
    assert env["PET_NODE_RANK"] == str(rank) and env["PET_NPROC_PER_NODE"] == "1", env
    assert env["CUDA_VISIBLE_DEVICES"] == "", env
    assert os.environ["EPOCHS"] == "1"
    dist.init_process_group("gloo")
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    assert value.item() == 3.0, value
    if rank == 0:
        os.makedirs("/data/ckpt", exist_ok=True)
        torch.save({"sum": value.item(), "world": dist.get_world_size()}, "/data/ckpt/model.pt")
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank} done", flush=True)
""")


@pytest.fixture
def rw_dataset(cli, home: Path, tmp_path: Path, s3_server):
    """A ReadWrite dataset ``work`` over a SeaweedFS bucket, holding the training script."""
    if fuse_available() is not None:
        pytest.skip(f"FUSE unavailable: {fuse_available()}")
    dataset = create_s3_dataset(cli, home, tmp_path, s3_server, {"train.py": DDP_SCRIPT.encode()}, name="work",
                                access="ReadWriteMany")
    yield dataset
    folder = home / "mnt" / "default" / "work"
    if is_mounted(str(folder)):
        subprocess.run(["fusermount3", "-u", "-z", str(folder)], check=False)


@pytest.mark.s3
def test_ddp_job_over_gloo_checks_its_environment_and_writes_a_checkpoint(capsys, rw_dataset) -> None:
    submitted = arena(capsys, "submit", "pytorch", "--name", "ddp", "--workers", "2", "-e", "EPOCHS=1",
                      "--data", "work:/data", sys.executable, "/data/train.py")
    assert submitted.code == 0, submitted.err
    assert "pytorchjob.kubeflow.org/ddp created" in submitted.out
    info = wait_status(capsys, "ddp")
    assert info["status"] == "SUCCEEDED", (info, arena(capsys, "logs", "ddp").out, arena(capsys, "get", "ddp").out)
    assert [i["status"] for i in info["instances"]] == ["Succeeded", "Succeeded"]
    saved = rw_dataset.object("ckpt/model.pt")  # written through the mount into the dataset's bucket
    checkpoint = torch.load(io.BytesIO(saved))
    assert checkpoint == {"sum": 3.0, "world": 2}
    assert arena(capsys, "logs", "ddp").out.splitlines()[-1] == "rank 0 done"
    worker = arena(capsys, "logs", "ddp", "-i", "ddp-worker-0", "--tail", "1", "--timestamps").out.strip()
    assert worker.endswith(" rank 1 done") and worker[:4].isdigit()


def test_a_failing_instance_fails_the_job_and_stops_its_peer(capsys, home: Path) -> None:
    line = 'if [ "$RANK" = 1 ]; then echo giving up; exit 3; fi; sleep 300'
    assert arena(capsys, "submit", "pytorch", "--name", "broken", "--workers", "2", line).code == 0
    info = wait_status(capsys, "broken")
    job = record("broken")
    assert info["status"] == "FAILED"
    assert job.message == "broken-worker-0 exited with code 3"
    master, worker = instances("broken")
    assert (worker.status, worker.exit_code) == ("Failed", 3)
    assert master.status == "Failed" and master.exit_code != 0  # stopped, not left sleeping
    assert gone(master.pid, master.pid_start) and group_empty(master.pid)
    assert "giving up" in arena(capsys, "logs", "broken", "-i", "broken-worker-0").out


def test_retry_restarts_the_job_until_it_succeeds(capsys, home: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    line = 'echo run >> /shared/count; [ "$(wc -l < /shared/count)" -ge 3 ]'
    result = arena(capsys, "submit", "pytorch", "--name", "flaky", "--retry", "2", "--data-dir", f"{shared}:/shared",
                   line)
    assert result.code == 0, result.err
    assert wait_status(capsys, "flaky")["status"] == "SUCCEEDED"
    assert (shared / "count").read_text().count("run") == 3
    assert record("flaky").attempt == 2
    events = arena(capsys, "get", "flaky", "-e").out
    assert events.count("Restarting") == 2


def test_retry_gives_up_after_its_count(capsys, home: Path) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "hopeless", "--retry", "1", "exit 4").code == 0
    assert wait_status(capsys, "hopeless")["status"] == "FAILED"
    job = record("hopeless")
    assert (job.attempt, job.message) == (1, "hopeless-master-0 exited with code 4")


def test_running_timeout_ends_the_job_failed(capsys, home: Path) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "slow", "--running-timeout", "1s", "sleep 300").code == 0
    assert wait_status(capsys, "slow")["status"] == "FAILED"
    assert "running timeout" in record("slow").message
    (master,) = instances("slow")
    assert gone(master.pid, master.pid_start)


def _running(capsys, name: str, count: int = 2):
    wait_status(capsys, name, ("RUNNING",), timeout=60)
    found = instances(name)
    assert len(found) == count and all(i.pid for i in found)
    return found


def test_delete_stops_a_running_job(capsys, home: Path) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "doomed", "--workers", "2", "sleep 300").code == 0
    started = _running(capsys, "doomed")
    job = record("doomed")
    result = arena(capsys, "delete", "doomed")
    assert result.code == 0, result.err
    assert all(gone(i.pid, i.pid_start) and group_empty(i.pid) for i in started)
    assert gone(job.supervisor_pid, job.supervisor_start)
    missing = arena(capsys, "get", "doomed")
    assert missing.code == 2 and missing.err.startswith("error: no training job doomed")


def test_sigterm_to_the_supervisor_stops_the_job_failed(capsys, home: Path) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "stopped", "sleep 300").code == 0
    (master,) = _running(capsys, "stopped", 1)
    os.kill(record("stopped").supervisor_pid, signal.SIGTERM)
    assert wait_status(capsys, "stopped")["status"] == "FAILED"
    assert record("stopped").message == "stopped: its supervisor got SIGTERM"
    assert gone(master.pid, master.pid_start)


def test_a_supervisor_killed_mid_job_is_seen_dead_at_the_next_get(capsys, home: Path) -> None:
    # "sleep 300; true": the shell forks the sleep (no exec), so the instance's group outlives its leader.
    line = "sleep 300; true"
    assert arena(capsys, "submit", "pytorch", "--name", "orphan", "--workers", "2", line).code == 0
    started = _running(capsys, "orphan")
    job = record("orphan")
    os.kill(job.supervisor_pid, signal.SIGKILL)
    assert gone(job.supervisor_pid, job.supervisor_start)
    for item in started:  # the leaders die with their parent (bwrap --die-with-parent): let them be reaped first
        reaped(item.pid, timeout=5)
    info = job_json(capsys, "orphan")  # the first read after the death
    assert info["status"] == "FAILED"
    assert record("orphan").message == f"its supervisor (pid {job.supervisor_pid}) died"
    assert all(gone(i.pid, i.pid_start) and group_empty(i.pid) for i in started)
    assert [i["status"] for i in info["instances"]] == ["Failed", "Failed"]
    assert "SupervisorDied" in arena(capsys, "get", "orphan", "-e").out


TORCHRUN_SCRIPT = textwrap.dedent("""\
    import os
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    value = torch.tensor([1.0])
    dist.all_reduce(value)
    print("rank", os.environ["RANK"], "local", os.environ["LOCAL_RANK"], "world", os.environ["WORLD_SIZE"],
          "sum", int(value.item()), flush=True)
    dist.destroy_process_group()
""")


def test_nproc_per_node_runs_torchrun_in_each_instance(capsys, home: Path, tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "all_reduce.py").write_text(TORCHRUN_SCRIPT)
    result = arena(capsys, "submit", "pytorch", "--name", "procs", "--workers", "2", "--nproc-per-node", "2",
                   "--data-dir", f"{code}:/code", sys.executable, "/code/all_reduce.py")
    assert result.code == 0, result.err
    info = wait_status(capsys, "procs")
    assert info["status"] == "SUCCEEDED", arena(capsys, "logs", "procs").out
    lines = [line for name in ("procs-master-0", "procs-worker-0")
             for line in arena(capsys, "logs", "procs", "-i", name).out.splitlines() if line.startswith("rank ")]
    assert sorted(lines) == [f"rank {r} local {r % 2} world 4 sum 4" for r in range(4)]


def test_logs_follow_prints_until_the_job_ends(capsys, home: Path) -> None:
    line = "for i in 1 2 3; do echo line $i; sleep 0.5; done"
    assert arena(capsys, "submit", "pytorch", "--name", "chatty", line).code == 0
    wait_status(capsys, "chatty", ("RUNNING", "SUCCEEDED"), timeout=60)
    followed = arena(capsys, "logs", "chatty", "-f")  # returns once the job ended and its log is read
    assert followed.code == 0 and followed.out.splitlines() == ["line 1", "line 2", "line 3"]
    assert job_json(capsys, "chatty")["status"] == "SUCCEEDED"
    assert arena(capsys, "logs", "chatty", "--since", "1h").out.splitlines() == ["line 1", "line 2", "line 3"]
    assert arena(capsys, "logs", "chatty", "--since", "1ns").out == ""  # every line is older than that
    assert arena(capsys, "logs", "chatty", "-t", "2").out.splitlines() == ["line 2", "line 3"]


def test_clean_task_policy_none_lets_the_others_finish(capsys, home: Path) -> None:
    line = 'if [ "$RANK" = 1 ]; then exit 5; fi; sleep 1; echo master finished'
    assert arena(capsys, "submit", "pytorch", "--name", "lenient", "--workers", "2", "--clean-task-policy", "None",
                 line).code == 0
    info = wait_status(capsys, "lenient")
    assert info["status"] == "FAILED" and record("lenient").message == "lenient-worker-0 exited with code 5"
    master, _ = instances("lenient")
    assert (master.status, master.exit_code) == ("Succeeded", 0)
    assert arena(capsys, "logs", "lenient").out.strip() == "master finished"


def test_ttl_after_finished_deletes_the_job_at_a_later_list(capsys, home: Path) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "brief", "--ttl-after-finished", "1s", "true").code == 0
    wait_status(capsys, "brief")
    time.sleep(1.5)
    assert "brief" not in arena(capsys, "list").out
    assert arena(capsys, "get", "brief").code == 2


def test_millpond_train_is_the_same_command(cli, capsys) -> None:
    assert cli("train", "submit", "pytorch", "--name", "viamillpond", "true").code == 0
    assert wait_status(capsys, "viamillpond")["status"] == "SUCCEEDED"
    assert cli("train", "list").out.splitlines()[1].split()[:2] == ["viamillpond", "SUCCEEDED"]


@pytest.mark.s3
def test_a_killed_supervisor_leaves_no_dataset_mount_behind(capsys, home: Path, rw_dataset) -> None:
    folder = home / "mnt" / "default" / "work"
    assert arena(capsys, "submit", "pytorch", "--name", "mounted", "--data", "work:/data", "ls /data; sleep 300"
                 ).code == 0
    (master,) = _running(capsys, "mounted", 1)
    assert is_mounted(str(folder))
    # the instance listed the dataset before its supervisor dies (running is its shell started, not ls done)
    until(lambda: "train.py" in arena(capsys, "logs", "mounted").out, 60, "the instance's ls of /data")
    job = record("mounted")
    os.kill(job.supervisor_pid, signal.SIGKILL)
    assert gone(job.supervisor_pid, job.supervisor_start)
    assert job_json(capsys, "mounted")["status"] == "FAILED"
    assert gone(master.pid, master.pid_start)
    assert group_empty(master.pid), "the instance's shell died, but the sleep it started is still running"
    deadline = time.monotonic() + 60
    while is_mounted(str(folder)):  # its lease died with the supervisor: the mount's daemon ends it
        assert time.monotonic() < deadline, "the dataset stayed mounted after its only user was killed"
        time.sleep(0.2)
    assert "train.py" in arena(capsys, "logs", "mounted").out


def test_millpond_ps_fails_a_job_whose_supervisor_died_and_ends_its_instances(cli, capsys, home: Path) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "unwatched", "sleep 300; true").code == 0
    (master,) = _running(capsys, "unwatched", 1)
    job = record("unwatched")
    (line,) = [line for line in cli("ps").out.splitlines() if line.startswith("training-job")]
    assert "default/unwatched" in line and "RUNNING" in line  # the supervisor, with its job's status
    os.kill(job.supervisor_pid, signal.SIGKILL)
    assert gone(job.supervisor_pid, job.supervisor_start)
    result = cli("ps")
    assert f"failed: training job default/unwatched: its supervisor (pid {job.supervisor_pid}) died" in result.err
    assert group_empty(master.pid)
    assert record("unwatched").status == "FAILED"

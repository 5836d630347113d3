"""Training jobs on a real local Ray cluster (tests/ray_cluster.py: a head and two worker nodes).

``arena submit pytorch --ray ADDRESS`` keeps the job on this machine (its supervisor, statuses,
logs) and runs its instances as Ray tasks in a placement group: a 2-instance DDP job over gloo
spans two nodes with MASTER_ADDR the master's node; a failing instance fails the job and its
peer's process is gone; ``arena delete`` stops the remote processes; ``arena top node`` lists
the cluster's nodes; a lost node fails the job naming it; ``arena submit ray`` runs a driver
that joins the cluster; a request no node can meet is one error line at submit, nothing stored.

The nodes are processes of this machine, so a test finds an instance's process by a token
in its command line, as it would on the node.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("ray")
pytest.importorskip("torch")

from tests.ray_cluster import RayCluster
from tests.training_support import arena, job_json, wait_status

pytestmark = pytest.mark.timeout(300)

DDP_SCRIPT = textwrap.dedent("""\
    import os
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    print("node", os.environ["MILLPOND_RAY_NODE_ID"], "master", os.environ["MASTER_ADDR"],
          os.environ["MASTER_PORT"], "rank", rank, flush=True)
    dist.init_process_group("gloo")
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    print("sum", value.item(), flush=True)
    dist.destroy_process_group()
""")

# Rank 0 sleeps; rank 1 fails after a moment unless told to sleep too (FAIL=0).
SLEEPER = textwrap.dedent("""\
    import os, sys, time
    print("started", os.environ["RANK"], os.getpid(), flush=True)
    if os.environ["RANK"] == "1" and os.environ.get("FAIL", "1") == "1":
        time.sleep(2)
        sys.exit(3)
    time.sleep(300)
""")


def _processes(token: str) -> list[int]:
    """Live processes (not zombies) of this machine whose command line carries ``token``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


def _describe(pids: list[int]) -> str:
    out = []
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        ppid = re.search(r"PPid:\s+(\d+)", status).group(1)
        pcmd = Path(f"/proc/{ppid}/cmdline").read_bytes().replace(b"\0", b" ")[:200]
        out.append(f"{pid} {cmd!r} ppid {ppid} {pcmd!r} tokens {[e for e in env if b'TOKEN' in e]}")
    return "; ".join(out)


def _wait(condition, timeout: float, what: str) -> None:  # noqa: ANN001 - a zero-argument predicate
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        time.sleep(0.2)


def _logs(capsys: pytest.CaptureFixture[str], name: str, instance: str, started: bool = True) -> str:
    """The instance's log (``started=False``: "" while the job has no instances yet)."""
    result = arena(capsys, "logs", name, "-i", instance)
    if not started and result.code != 0:
        return ""
    assert result.code == 0, result.err
    return result.out


def _script(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "job.py").write_text(text)
    return folder


def test_a_ddp_job_spans_two_nodes_with_master_addr_the_masters_node(
    ray_cluster: RayCluster, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import ray

    folder = _script(tmp_path, "ddp", DDP_SCRIPT)
    submitted = arena(capsys, "submit", "pytorch", "--name", "ddp", "--workers", "2", "--cpu", "1",
                      "--ray", ray_cluster.address, "--ray-placement", "STRICT_SPREAD",
                      "--working-dir", folder, sys.executable, "job.py")
    assert submitted.code == 0, submitted.err
    info = wait_status(capsys, "ddp", timeout=180)
    master, worker = _logs(capsys, "ddp", "ddp-master-0"), _logs(capsys, "ddp", "ddp-worker-0")
    assert info["status"] == "SUCCEEDED", (info, master, worker, arena(capsys, "get", "ddp").out)
    seen = {}
    for log in (master, worker):
        found = re.search(r"^node (\w+) master (\S+) (\d+) rank (\d)$", log, re.M)
        assert found, log
        assert "sum 3.0" in log, log  # 1 + 2, all-reduced across the two nodes
        seen[int(found.group(4))] = (found.group(1), found.group(2), found.group(3))
    (master_node, master_addr, port), (worker_node, worker_addr, worker_port) = seen[0], seen[1]
    cluster_ids = {node.node_id for node in ray_cluster.nodes.values()}
    assert master_node != worker_node and {master_node, worker_node} <= cluster_ids  # two nodes of the cluster
    addresses = {str(n["NodeID"]): str(n["NodeManagerAddress"]) for n in ray.nodes() if n["Alive"]}
    assert master_addr == worker_addr == addresses[master_node]
    assert port == worker_port
    events = arena(capsys, "get", "ddp", "-e").out
    assert "ddp-master-0 on node " + master_node[:12] in events, events
    # the log lines carry the time they arrived, as local instances' do
    stamped = arena(capsys, "logs", "ddp", "-i", "ddp-master-0", "--timestamps").out
    assert re.search(r"^\d{4}-\d\d-\d\dT\S+Z node ", stamped, re.M), stamped


def test_a_failing_instance_fails_the_job_and_its_peers_process_is_gone(
    ray_cluster: RayCluster, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MILLPOND_RAY_ADDRESS", ray_cluster.address)  # cluster mode from the environment
    token = f"fails-{uuid.uuid4().hex[:8]}"
    folder = _script(tmp_path, "fails", SLEEPER)
    submitted = arena(capsys, "submit", "pytorch", "--name", "fails", "--workers", "2",
                      "--working-dir", folder, sys.executable, "job.py", token)
    assert submitted.code == 0, submitted.err
    _wait(lambda: "started 0" in _logs(capsys, "fails", "fails-master-0", started=False), 90, "the master started")
    assert _processes(token)
    info = wait_status(capsys, "fails", timeout=90)
    assert info["status"] == "FAILED", info
    described = arena(capsys, "get", "fails").out
    assert "fails-worker-0 exited with code 3" in described, described
    _wait(lambda: not _processes(token), 30, f"the master's process ended ({_describe(_processes(token))})")
    instances = {i["name"]: i["status"] for i in job_json(capsys, "fails")["instances"]}
    assert instances["fails-worker-0"] == "Failed", instances


def test_delete_of_a_running_job_stops_its_remote_processes(
    ray_cluster: RayCluster, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = f"deleted-{uuid.uuid4().hex[:8]}"
    folder = _script(tmp_path, "deleted", SLEEPER)
    submitted = arena(capsys, "submit", "pytorch", "--name", "deleted", "--workers", "2", "-e", "FAIL=0",
                      "--ray", ray_cluster.address, "--working-dir", folder, sys.executable, "job.py", token)
    assert submitted.code == 0, submitted.err
    wait_status(capsys, "deleted", ("RUNNING",), timeout=90)
    _wait(lambda: len({p for p in _processes(token)}) >= 2, 60, "both instances' processes run")
    deleted = arena(capsys, "delete", "deleted")
    assert deleted.code == 0, deleted.err
    _wait(lambda: not _processes(token), 30, f"the remote processes ended ({_processes(token)})")
    assert arena(capsys, "get", "deleted").code == 2


def test_a_supervisor_killed_leaves_no_instance_running_on_the_nodes(
    ray_cluster: RayCluster, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = f"orphan-{uuid.uuid4().hex[:8]}"
    folder = _script(tmp_path, "orphan", SLEEPER)
    submitted = arena(capsys, "submit", "pytorch", "--name", "orphan", "--workers", "2", "-e", "FAIL=0",
                      "--ray", ray_cluster.address, "--working-dir", folder, sys.executable, "job.py", token)
    assert submitted.code == 0, submitted.err
    wait_status(capsys, "orphan", ("RUNNING",), timeout=90)
    _wait(lambda: len(_processes(token)) >= 2, 60, "both instances' processes run")
    os.kill(_supervisor_pid(), 9)
    info = wait_status(capsys, "orphan", timeout=60)  # a read notices the dead supervisor
    assert info["status"] == "FAILED", info
    _wait(lambda: not _processes(token), 30, f"the instances' processes ended ({_describe(_processes(token))})")


def _supervisor_pid() -> int:
    from millpond.store.training import JobStore

    job = JobStore().get("orphan", "default")
    assert job is not None and job.supervisor_pid
    return int(job.supervisor_pid)


def test_a_lost_node_fails_the_job_saying_which(
    ray_cluster: RayCluster, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = f"lost-{uuid.uuid4().hex[:8]}"
    folder = _script(tmp_path, "lost", SLEEPER)
    submitted = arena(capsys, "submit", "pytorch", "--name", "lost", "--workers", "2", "-e", "FAIL=0",
                      "--ray", ray_cluster.address, "--ray-placement", "STRICT_SPREAD", "--working-dir", folder,
                      sys.executable, "job.py", token)
    assert submitted.code == 0, submitted.err
    wait_status(capsys, "lost", ("RUNNING",), timeout=90)
    _wait(lambda: len(_processes(token)) >= 2, 60, "both instances' processes run")
    events = arena(capsys, "get", "lost", "-e").out
    placed = re.search(r"lost-worker-0 on node (\w+)", events)
    assert placed, events
    victim = next(name for name, node in ray_cluster.nodes.items() if node.node_id.startswith(placed.group(1)))
    try:
        ray_cluster.stop_node(victim)  # the worker's machine is gone
        info = wait_status(capsys, "lost", timeout=120)
        described = arena(capsys, "get", "lost").out
        assert info["status"] == "FAILED", described
        assert "lost-worker-0: Ray node" in described and ("was lost" in described or "died" in described), described
        master_pid = int(re.search(r"started 0 (\d+)", _logs(capsys, "lost", "lost-master-0")).group(1))
        _wait(lambda: master_pid not in _processes(token), 30, f"the master's process ended ({master_pid})")
    finally:
        for pid in _processes(token):  # what the lost "machine" left on this one (a real one takes it along)
            os.kill(pid, 9)
        ray_cluster.start_node(victim)


RAY_DRIVER = textwrap.dedent("""\
    import ray

    ray.init(address="auto", log_to_driver=False)  # RAY_ADDRESS, set by the job

    @ray.remote(num_cpus=1)
    def where():
        return ray.get_runtime_context().get_node_id()

    print("nodes", " ".join(sorted(set(ray.get([where.remote() for _ in range(6)])))), flush=True)
""")


def test_a_ray_job_runs_its_driver_against_the_cluster_and_its_log_is_the_jobs(
    ray_cluster: RayCluster, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _script(tmp_path, "driver", RAY_DRIVER)
    submitted = arena(capsys, "submit", "ray", "--name", "rj", "--ray", ray_cluster.address, "--worker-replicas", "2",
                      "--working-dir", folder, sys.executable, "job.py")
    assert submitted.code == 0, submitted.err
    assert "rayjob.ray.io/rj created" in submitted.out
    assert "--worker-replicas only means something on a Kubernetes cluster" in submitted.err
    info = wait_status(capsys, "rj", timeout=120)
    log = arena(capsys, "logs", "rj").out
    assert info["status"] == "SUCCEEDED", (info, log)
    found = re.search(r"^nodes (.+)$", log, re.M)
    assert found, log
    assert set(found.group(1).split()) <= {node.node_id for node in ray_cluster.nodes.values()}, log
    shown = arena(capsys, "get", "rj")
    assert shown.code == 0 and "RAYJOB" in shown.out, shown
    refused = arena(capsys, "submit", "ray", "--name", "rj2", "python", "x.py")  # no address anywhere
    assert refused.code == 2 and "--ray HOST:PORT" in refused.err, refused.err


def test_top_node_lists_the_clusters_nodes(ray_cluster: RayCluster, home: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    import ray

    shown = arena(capsys, "top", "node", "--ray", ray_cluster.address)
    addresses = {str(n["NodeID"]): str(n["NodeManagerAddress"]) for n in ray.nodes() if n["Alive"]}
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert lines[0].split()[:4] == ["NAME", "IPADDRESS", "ROLE", "STATUS"], shown.out
    for name, node in ray_cluster.nodes.items():
        row = next((line for line in lines if line.startswith(node.node_id[:12])), None)
        assert row is not None, (name, shown.out)
        cells = row.split()
        assert cells[1] == addresses[node.node_id] and cells[2] == ("head" if name == "head" else "worker"), row
        assert cells[4] == str(node.cpus), row  # CPU(Total)
    assert "Allocated/Total GPUs In Cluster:" in shown.out


def test_a_request_no_node_can_meet_is_one_error_line_and_nothing_is_stored(
    ray_cluster: RayCluster, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = arena(capsys, "submit", "pytorch", "--name", "huge", "--cpu", "64", "--ray", ray_cluster.address,
                    "echo", "hi")
    assert refused.code == 2
    assert refused.err.startswith("error: ") and len(refused.err.strip().splitlines()) == 1, refused.err
    assert "can never run on the Ray cluster" in refused.err and "CPU=64" in refused.err
    spread = arena(capsys, "submit", "pytorch", "--name", "wide", "--workers", "4", "--ray", ray_cluster.address,
                   "--ray-placement", "STRICT_SPREAD", "echo", "hi")
    assert spread.code == 2 and "STRICT_SPREAD" in spread.err, spread.err
    assert arena(capsys, "list").out.count("\n") <= 1  # no job recorded (the header at most)


def test_a_queues_quota_holds_jobs_back_on_the_cluster_too(
    ray_cluster: RayCluster, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kueue's quota is the logical layer above Ray's placement: the cluster has room for both jobs, the
    queue for one; the second waits with Kueue's reason and runs on the cluster once the first is deleted."""
    from millpond.store.training import JobStore
    from tests.queues_support import apply_objects, queues

    apply_objects(*queues(("ray-q", 0, {}), cpu="1"))
    token = f"queued-{uuid.uuid4().hex[:8]}"
    folder = _script(tmp_path, "queued", SLEEPER)
    first = arena(capsys, "submit", "pytorch", "--name", "first", "--queue", "ray-q", "--cpu", "1", "-e", "FAIL=0",
                  "--ray", ray_cluster.address, "--working-dir", folder, sys.executable, "job.py", token)
    assert first.code == 0, first.err
    wait_status(capsys, "first", ("RUNNING",), timeout=90)
    second = arena(capsys, "submit", "pytorch", "--name", "second", "--queue", "ray-q", "--cpu", "1",
                   "--ray", ray_cluster.address, "echo ran on the cluster")
    assert second.code == 0, second.err

    def waiting() -> str:
        job = JobStore().get("second", "default")
        return job.message or "" if job is not None and job.reason == "Pending" else ""

    _wait(lambda: "insufficient unused quota for cpu" in waiting(), 60, "the second job's reason")
    assert arena(capsys, "delete", "first").code == 0
    assert wait_status(capsys, "second", timeout=120)["status"] == "SUCCEEDED"
    assert "ran on the cluster" in arena(capsys, "logs", "second").out

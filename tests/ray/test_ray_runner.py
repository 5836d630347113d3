"""Cluster mode's primitive on a real local Ray cluster: one ProcessSpec run as a Ray task.

The cluster (tests/ray_cluster.py) is a head and two worker nodes, each with its own
MILLPOND_NODE_DIR; a task pinned to node b by its custom resource must run there, in b's
folder, and stream its log back; a cancel must end its process on the node; a node lost
mid-task must end the attempt with an error that says so.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

from millpond.runners.base import Bind, ProcessSpec
from millpond.runners.ray_cluster import (
    ClusterUnavailable,
    RayResources,
    cluster_nodes,
    connect,
    run_on_cluster,
    unmet,
)
from tests.ray_cluster import RayCluster

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def joined(ray_cluster: RayCluster) -> RayCluster:
    connect(ray_cluster.address)
    return ray_cluster


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "attempt"
    (workspace / "work").mkdir(parents=True)
    (workspace / "inputs").mkdir()
    (workspace / "inputs" / "x.txt").write_text("41")
    (workspace / "outputs").mkdir()
    return workspace


def _spec(workspace: Path, script: str, log: Path, **kw: object) -> ProcessSpec:
    return ProcessSpec(
        argv=[sys.executable, "-c", script, str(workspace / "inputs" / "x.txt"), str(workspace / "outputs" / "y.txt")],
        env={"PATH": os.environ["PATH"], "PYTHONUNBUFFERED": "1"},
        cwd=workspace / "work", log_path=log, **kw,  # type: ignore[arg-type]
    )


def test_a_task_pinned_to_node_b_runs_in_its_folder_and_its_outputs_and_log_come_back(
    joined: RayCluster, tmp_path: Path
) -> None:
    workspace = _workspace(tmp_path)
    script = (
        "import os, sys, ray\n"
        "x = int(open(sys.argv[1]).read())\n"
        "open(sys.argv[2], 'w').write(str(x + 1))\n"
        "print('node dir', os.environ['MILLPOND_NODE_DIR'])\n"
        "print('cwd', os.getcwd())\n"
    )
    log = tmp_path / "task.log"
    started: list[object] = []
    spec = _spec(workspace, script, log, on_start=started.append)
    result = run_on_cluster(spec, threading.Event(), RayResources(num_cpus=1, resources={"node_b": 0.01}), workspace)
    assert result.exit_code == 0 and result.error is None, log.read_text()
    assert (workspace / "outputs" / "y.txt").read_text() == "42"  # written on the node, brought back
    text = log.read_text()
    node_b = joined.nodes["b"].node_dir
    assert f"node dir {node_b}" in text
    assert f"cwd {node_b}/tasks/" in text  # the engine's folder was mapped to the node's own
    assert started == [None]  # the remote pid is not this machine's
    # The node removes its copy of this task, after the result is on its way (its worker's clean-up
    # thread: the folder may hold others', as the cluster is shared and a node stopped mid-task by
    # another test keeps what it had).
    copy = node_b / "tasks" / text.split(f"cwd {node_b}/tasks/", 1)[1].split("/", 1)[0].split()[0]
    assert gone(copy), copy


def gone(path: Path, within_s: float = 30.0) -> bool:
    """Whether ``path`` is removed within ``within_s`` (a node cleans a task's folder after its result is sent)."""
    deadline = time.monotonic() + within_s
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not path.exists()


def test_only_what_the_task_changed_comes_back_and_a_long_log_arrives_whole(
    joined: RayCluster, tmp_path: Path
) -> None:
    workspace = _workspace(tmp_path)
    (workspace / "inputs" / "x.txt").chmod(0o644)
    untouched = workspace / "inputs" / "big.bin"
    untouched.write_bytes(os.urandom(1 << 20))
    lines = 40_000  # ~1.3 MiB of log: several chunks while it runs and after it ends
    script = (
        "import sys\n"
        "x = int(open(sys.argv[1]).read())\n"
        "open(sys.argv[2], 'w').write(str(x + 1))\n"
        "open(sys.argv[1], 'w').write('changed')\n"
        f"for i in range({lines}):\n"
        "    print(f'line {i:08d} ' + 'x' * 16)\n"
        "print('the end')\n"
    )
    log = tmp_path / "task.log"
    before = untouched.stat().st_mtime_ns
    result = run_on_cluster(_spec(workspace, script, log), threading.Event(), RayResources(), workspace)
    assert result.exit_code == 0 and result.error is None, log.read_text()[-2000:]
    assert (workspace / "outputs" / "y.txt").read_text() == "42"
    assert (workspace / "inputs" / "x.txt").read_text() == "changed"  # a changed input comes back too
    assert untouched.stat().st_mtime_ns == before  # an input the task left as it was is not written again
    printed = [line for line in log.read_text().splitlines() if not line.startswith("[millpond]")]
    assert printed == [f"line {i:08d} " + "x" * 16 for i in range(lines)] + ["the end"]


def test_the_log_streams_while_the_task_runs_and_a_cancel_kills_its_process_on_the_node(
    joined: RayCluster, tmp_path: Path
) -> None:
    workspace = _workspace(tmp_path)
    pid_file = tmp_path / "pid"  # the test machine is every node: the task says its pid here
    script = (
        "import os, sys, time\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "print('started', flush=True)\n"
        "time.sleep(120)\n"
    )
    log = tmp_path / "task.log"
    cancel = threading.Event()
    outcome: list[object] = []
    thread = threading.Thread(
        target=lambda: outcome.append(
            run_on_cluster(_spec(workspace, script, log), cancel, RayResources(resources={"node_c": 0.01}), workspace)
        )
    )
    thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "started" not in (log.read_text() if log.exists() else ""):
        time.sleep(0.1)
    assert "started" in log.read_text()  # streamed back while the task still runs
    pid = int(pid_file.read_text())
    assert Path(f"/proc/{pid}").exists()
    cancel.set()
    thread.join(60)
    assert not thread.is_alive()
    assert outcome[0].error == "cancelled"  # type: ignore[attr-defined]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists(), "the task's process outlived its cancelled Ray task"


def test_a_node_lost_mid_task_ends_the_attempt_with_an_error_naming_it(joined: RayCluster, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    script = "import time\nprint('running', flush=True)\ntime.sleep(120)\n"
    log = tmp_path / "task.log"
    outcome: list[object] = []
    thread = threading.Thread(
        target=lambda: outcome.append(
            run_on_cluster(
                _spec(workspace, script, log), threading.Event(), RayResources(resources={"node_b": 0.01}), workspace
            )
        )
    )
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "running" not in (log.read_text() if log.exists() else ""):
            time.sleep(0.1)
        joined.stop_node("b")
        thread.join(120)
        assert not thread.is_alive()
        result = outcome[0]
        assert result.exit_code == -1  # type: ignore[attr-defined]
        assert "Ray node" in result.error and ("lost" in result.error or "died" in result.error), result.error  # type: ignore[attr-defined]
    finally:
        joined.start_node("b")


def test_requests_no_node_can_meet_are_named_before_submitting(joined: RayCluster) -> None:
    nodes = cluster_nodes()
    assert {"node_head", "node_b", "node_c"} <= {k for n in nodes for k in n.resources}
    assert unmet(RayResources(num_cpus=1, resources={"node_b": 0.01}), nodes) is None
    assert "CPU=64" in (unmet(RayResources(num_cpus=64), nodes) or "")
    assert "accelerator_type:A100" in (unmet(RayResources(resources={"accelerator_type:A100": 0.001}), nodes) or "")


def test_bind_sources_outside_the_workspace_are_refused(joined: RayCluster, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    elsewhere = tmp_path / "engine-only"
    elsewhere.mkdir()
    spec = _spec(workspace, "pass", tmp_path / "log", binds=[Bind(elsewhere, "/data")])
    result = run_on_cluster(spec, threading.Event(), RayResources(), workspace)
    assert result.exit_code == -1 and str(elsewhere) in (result.error or "")


def test_an_unreachable_address_is_one_error_in_bounded_time() -> None:
    started = time.monotonic()
    with pytest.raises(ClusterUnavailable, match="cannot reach the Ray cluster at 127.0.0.1:9"):
        connect("127.0.0.1:9")
    assert time.monotonic() - started < 10
    with pytest.raises(ClusterUnavailable, match="HOST:PORT"):
        connect("nowhere")

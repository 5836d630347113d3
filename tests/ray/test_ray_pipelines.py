"""Pipelines in cluster mode: `millpond run --ray ADDRESS` on a real local Ray cluster, root on real S3.

The cluster (tests/ray_cluster.py) is a head with no CPUs for tasks and two workers: b has the
only GPU (a T4, declared to Ray), c the only 6 GiB of memory. Each task reports the node it ran
on from its environment (MILLPOND_RAY_NODE_ID, MILLPOND_NODE_DIR, which the node sets), so a
test can check that a task's ordinary KFP requests placed it. Each run is a `millpond`
process, as a user would start it, joining the cluster with the session's token.
"""

# No `from __future__ import annotations`: kfp reads the components' annotations as types.
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")

from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from tests.datasets.test_s3_root import compile_pipeline, describe, run_json, task, task_log
from tests.ray_cluster import RayCluster
from tests.s3_server import S3Server

pytestmark = [pytest.mark.s3, pytest.mark.timeout(300)]

MILLPOND = str(Path(sys.executable).parent / "millpond")


# --- the pipelines -------------------------------------------------------------------------
@dsl.component(base_image="python:3.11")
def on_gpu_node(data: Output[Dataset]) -> str:
    import os

    cmdline = open("/proc/self/cmdline", "rb").read().replace(b"\0", b" ").decode()
    print("gpu task running", "forked" if "millpond.runners.forkserver" in cmdline else "own process", flush=True)
    with open(data.path, "w") as out:
        out.write(os.environ["MILLPOND_RAY_NODE_ID"])
    return os.environ["MILLPOND_RAY_NODE_ID"] + " " + os.environ["MILLPOND_NODE_DIR"]


@dsl.component(base_image="python:3.11")
def on_big_memory_node(data: Input[Dataset]) -> str:
    import os

    with open(data.path) as source:
        upstream = source.read()
    print("memory task read", upstream, flush=True)
    return os.environ["MILLPOND_RAY_NODE_ID"] + " " + upstream


@dsl.pipeline(name="ray-placed")
def placed():
    first = on_gpu_node().set_accelerator_type("T4").set_accelerator_limit(1)
    on_big_memory_node(data=first.outputs["data"]).set_memory_limit("4G")


@dsl.component(base_image="python:3.11")
def sleeper(marker: str) -> str:
    """The first attempt says where it runs and sleeps; a later one returns at once."""
    import os
    import time

    if not os.path.exists(marker):
        with open(marker + ".tmp", "w") as out:
            out.write(f"{os.getpid()} {os.environ['MILLPOND_NODE_DIR']}")
        os.rename(marker + ".tmp", marker)
        print("first attempt sleeping", flush=True)
        time.sleep(120)
    return os.environ["MILLPOND_RAY_NODE_ID"]


@dsl.pipeline(name="ray-retried")
def retried(marker: str):
    sleeper(marker=marker).set_cpu_limit("1").set_retry(num_retries=1, backoff_duration="0s")


@dsl.pipeline(name="ray-cancelled")
def cancelled(marker: str):
    sleeper(marker=marker).set_cpu_limit("1")


@dsl.pipeline(name="ray-too-big")
def too_big():
    on_gpu_node().set_cpu_limit("64")


# --- helpers -------------------------------------------------------------------------------
def _env(home: Path, server: S3Server | None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AWS_", "MILLPOND_"))}
    env["MILLPOND_HOME"] = str(home)
    if server is not None:
        env.update(server.env())
    return env


def millpond(
    args: list[Any], home: Path, server: S3Server | None = None, **kw: Any
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MILLPOND, *map(str, args)], env=_env(home, server), capture_output=True, text=True,
        stdin=subprocess.DEVNULL, timeout=240, **kw,
    )


def _start_run(
    pipeline: Any, marker: Path, cluster: RayCluster, server: S3Server, tmp_path: Path
) -> "subprocess.Popen[str]":
    """`millpond run --ray` of ``pipeline`` (its ``marker`` parameter set) as its own process, root on S3."""
    root = f"s3://{server.create_bucket()}/runs"
    return subprocess.Popen(
        [MILLPOND, "run", str(compile_pipeline(pipeline, tmp_path)), "-p", f"marker={marker}",
         "--ray", cluster.address, "--pipeline-root", root, "-o", "json"],
        env=_env(tmp_path / "home", server), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _wait_for(path: Path, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists():
            return path.read_text()
        time.sleep(0.2)
    raise AssertionError(f"{path} did not appear within {seconds:.0f} s")


def _gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return True
        time.sleep(0.1)
    return False


# --- tests ---------------------------------------------------------------------------------
def test_tasks_run_on_the_nodes_their_requests_fit_with_artifacts_through_s3_and_logs_streamed(
    ray_cluster: RayCluster, s3_server: S3Server, tmp_path: Path
) -> None:
    root = f"s3://{s3_server.create_bucket()}/runs"
    proc = millpond(
        ["run", compile_pipeline(placed, tmp_path), "--ray", ray_cluster.address, "--pipeline-root", root,
         "-o", "json"],
        tmp_path / "home", s3_server,
    )
    run = run_json(proc)
    assert proc.returncode == 0 and run["state"] == "SUCCEEDED", describe(run) + proc.stderr
    node_b, node_c = ray_cluster.nodes["b"], ray_cluster.nodes["c"]
    gpu = task(run, "on-gpu-node")
    assert gpu["outputs"]["Output"] == f"{node_b.node_id} {node_b.node_dir}"  # the T4 node
    memory = task(run, "on-big-memory-node")
    # on the 6 GiB node, reading the artifact the GPU node wrote (through the S3 root)
    assert memory["outputs"]["Output"] == f"{node_c.node_id} {node_b.node_id}"
    # the node's output reached the engine's log; the task forked from the Ray worker's warm server
    assert "gpu task running forked" in Path(gpu["log"]).read_text()
    assert f"memory task read {node_b.node_id}" in Path(memory["log"]).read_text()
    published = s3_server.filesystem().find(root.removeprefix("s3://"))
    assert any(path.endswith("/on-gpu-node/data") for path in published), published


def test_cancelling_a_run_stops_its_remote_task(ray_cluster: RayCluster, s3_server: S3Server, tmp_path: Path) -> None:
    marker = tmp_path / "started"  # every test node is this machine: the task leaves its pid here
    engine = _start_run(cancelled, marker, ray_cluster, s3_server, tmp_path)
    try:
        pid = int(_wait_for(marker, 90).split()[0])
        assert Path(f"/proc/{pid}").exists()
        engine.send_signal(signal.SIGTERM)  # as Ctrl-C or `millpond runs terminate` does
        out, err = engine.communicate(timeout=90)
    finally:
        if engine.poll() is None:
            engine.kill()
    assert engine.returncode == 130, err
    listed = millpond(["runs", "list", "-o", "json"], tmp_path / "home")
    runs = json.loads(listed.stdout)
    assert [r["state"] for r in runs] == ["CANCELED"], err
    assert _gone(pid, 20), "the task's process on the Ray node outlived the cancelled run"


def test_an_engine_killed_with_sigkill_leaves_no_task_running_on_the_node(
    ray_cluster: RayCluster, s3_server: S3Server, tmp_path: Path
) -> None:
    """Ray ends a dead driver's workers; the worker's guardian then stops the task it started."""
    marker = tmp_path / "started"
    engine = _start_run(cancelled, marker, ray_cluster, s3_server, tmp_path)
    try:
        pid = int(_wait_for(marker, 90).split()[0])
    finally:
        engine.kill()
        engine.communicate()
    assert _gone(pid, 30), "the task's process on the Ray node outlived its engine"


def test_a_node_lost_mid_task_fails_that_attempt_and_the_retry_runs_on_another_node(
    ray_cluster: RayCluster, s3_server: S3Server, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    engine = _start_run(retried, marker, ray_cluster, s3_server, tmp_path)
    lost = None
    try:
        pid_text, node_dir = _wait_for(marker, 90).split(" ", 1)
        lost = next(name for name, node in ray_cluster.nodes.items() if str(node.node_dir) == node_dir)
        assert lost != "head"  # the head has no CPUs for tasks
        ray_cluster.stop_node(lost)
        out, err = engine.communicate(timeout=180)
    finally:
        if engine.poll() is None:
            engine.kill()
        if lost is not None:
            ray_cluster.start_node(lost)
    run = json.loads(out)
    assert run["state"] == "SUCCEEDED", describe(run) + err
    item = task(run, "sleeper")
    survivor = ray_cluster.nodes["c" if lost == "b" else "b"]
    assert item["outputs"]["Output"] == survivor.node_id
    log = Path(item["log"]).read_text()
    # The first attempt's own output may not have streamed back before its node went: the lost
    # node's line is what the log must say (live streaming is test_ray_runner's to check).
    assert "was lost" in log or "died" in log, log
    assert _gone(int(pid_text), 5)


def test_a_local_root_an_unmet_request_and_an_unreachable_cluster_are_one_line_and_nothing_recorded(
    ray_cluster: RayCluster, s3_server: S3Server, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    placed_yaml = compile_pipeline(placed, tmp_path)
    cases = [
        (["run", placed_yaml, "--ray", ray_cluster.address, "--pipeline-root", tmp_path / "artifacts"],
         "is a folder of this machine only"),
        (["run", compile_pipeline(too_big, tmp_path), "--ray", ray_cluster.address,
          "--pipeline-root", f"s3://{s3_server.create_bucket()}/r"], "no node of the Ray cluster has CPU=64"),
        (["run", placed_yaml, "--ray", "127.0.0.1:9", "--pipeline-root", "s3://b/r"],
         "cannot reach the Ray cluster at 127.0.0.1:9"),
    ]
    for args, message in cases:
        proc = millpond(args, home, s3_server)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], proc.stderr
    listed = millpond(["runs", "list", "-o", "json"], home)
    assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stdout
    server = millpond(["server", "--port", "0", "--ray", "127.0.0.1:9"], home)
    assert server.returncode == 2 and server.stderr.strip().splitlines() == [
        "error: cannot reach the Ray cluster at 127.0.0.1:9: Connection refused"
    ], server.stderr


def test_without_ray_cluster_mode_says_how_to_install_it(tmp_path: Path) -> None:
    """Ray hidden the way Python documents for a module that is absent (``sys.modules[name] = None``)."""
    code = "import sys; sys.modules['ray'] = None; from millpond.cli.main import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "run", str(compile_pipeline(placed, tmp_path)), "--ray", "127.0.0.1:9"],
        env=_env(tmp_path / "home", None), capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == ["error: cluster mode needs Ray: pip install 'millpond[ray]'"]


def test_a_kfp1_workflow_runs_on_the_cluster_with_its_files_through_s3(
    ray_cluster: RayCluster, s3_server: S3Server, tmp_path: Path
) -> None:
    """kfp 1.x's fixed output paths, file passing and a loop over an output, on the nodes, root on S3."""
    corpus = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "kfp-v1"
    if not corpus.is_dir():
        pytest.skip("the kfp-v1 corpus is not here")
    root = f"s3://{s3_server.create_bucket()}/runs"
    for name in ("data_passing_in_python_components_files.yaml", "loop_parameter.yaml"):
        proc = millpond(["run", corpus / name, "--ray", ray_cluster.address, "--pipeline-root", root, "-o", "json"],
                        tmp_path / "home", s3_server)
        run = run_json(proc)
        assert proc.returncode == 0 and run["state"] == "SUCCEEDED", describe(run) + proc.stderr
        if name.startswith("data_passing"):  # split-text-lines' files reached the printers on the nodes
            for printer, lines in (("print-text-2", "one three five seven nine"),
                                   ("print-text-3", "two four six eight ten")):
                log = task_log(task(run, printer)).splitlines()
                assert log[0].startswith("[millpond] running on "), log  # on a node of the cluster
                assert " ".join(log[1:]).split() == lines.split(), log
    published = s3_server.filesystem().find(root.removeprefix("s3://"))
    assert any("/split-text-lines" in path for path in published), published

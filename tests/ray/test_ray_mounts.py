"""Datasets mounted on the Ray node itself (tests/ray_cluster.py's cluster, over a real SeaweedFS).

A pipeline task that ``mount_pvc``s a dataset, and each instance of ``arena submit pytorch
--data NAME:/PATH`` on Ray, sees the dataset through a FUSE mount made on its node, through
that node's own cache (the ProcessSpec names the dataset; ``datasets.node_mounts`` mounts it
there, under the node's MILLPOND_NODE_DIR); the mount ends with the task, also when the
task's process is killed.
"""

# No `from __future__ import annotations`: kfp reads the components' annotations as types.
import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

from kfp import dsl, kubernetes

from millpond.datasets.mounts import fuse_available
from millpond.runners.sandbox import sandbox_problem
from tests.datasets.test_s3_root import compile_pipeline, describe, run_json, task
from tests.datasets_support import cache_files, create_s3_dataset
from tests.ray.test_ray_pipelines import millpond
from tests.ray_cluster import RayCluster
from tests.training_support import arena, wait_status

pytestmark = [
    pytest.mark.s3, pytest.mark.timeout(300),
    pytest.mark.skipif(fuse_available() is not None or sandbox_problem() is not None,
                       reason=f"needs FUSE and bubblewrap: {fuse_available() or sandbox_problem()}"),
]

FILES = {"train/a.txt": b"alpha " * 5000, "README": b"digits\n"}
LEVELS = [{"mediumtype": "SSD", "quota": "64Mi"}]  # no path: on a node, under the node's own folder


@dsl.component(base_image="python:3.11")
def read_mounted(folder: str, marker: str) -> str:
    import os
    import time

    with open(os.path.join(folder, "train", "a.txt")) as handle:
        text = handle.read()
    if marker:  # the kill test: say where the process runs, and wait to be killed
        with open(marker + ".tmp", "w") as out:
            out.write(str(os.getpid()))
        os.rename(marker + ".tmp", marker)
        time.sleep(120)
    return f"{os.environ['MILLPOND_RAY_NODE_ID']} {len(text)} {sorted(os.listdir(folder))}"


@dsl.pipeline(name="ray-mounted")
def mounted(marker: str = ""):
    reader = read_mounted(folder="/data/ds", marker=marker).set_accelerator_type("T4").set_accelerator_limit(1)
    kubernetes.mount_pvc(reader, pvc_name="ds", mount_path="/data/ds")  # b has the cluster's only T4


def _cached(node_dir: Path) -> set[Path]:
    return set(cache_files(node_dir / "cache")) if (node_dir / "cache").exists() else set()


def _node_mounts(node_dir: Path) -> list[str]:
    """The FUSE mounts under a node's folder now (every test node is this machine)."""
    with open("/proc/self/mounts") as table:
        return [line.split()[1] for line in table if line.split()[1].startswith(str(node_dir))]


def _wait(condition, seconds: float, what: str) -> None:  # noqa: ANN001 - a zero-argument predicate
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(what)
        time.sleep(0.2)


def _no_mounts_left(ray_cluster: RayCluster) -> None:
    for name, node in ray_cluster.nodes.items():
        _wait(lambda n=node: not _node_mounts(n.node_dir), 20, f"a mount is left on node {name}: "
              f"{_node_mounts(node.node_dir)}")


def test_a_pipeline_task_on_node_b_reads_its_mount_pvc_through_bs_cache(
    ray_cluster: RayCluster, cli, home: Path, tmp_path: Path, s3_server
) -> None:
    nodes = ray_cluster.nodes
    before = {name: (_cached(node.node_dir)) for name, node in nodes.items()}
    create_s3_dataset(cli, home, tmp_path, s3_server, FILES, name="ds", levels=LEVELS)
    root = f"s3://{s3_server.create_bucket()}/runs"
    proc = millpond(["run", compile_pipeline(mounted, tmp_path), "--ray", ray_cluster.address,
                     "--pipeline-root", root, "-o", "json"], home, s3_server)
    run = run_json(proc)
    assert proc.returncode == 0 and run["state"] == "SUCCEEDED", describe(run) + proc.stderr
    assert task(run, "read-mounted")["outputs"]["Output"] == f"{nodes['b'].node_id} 30000 ['README', 'train']"
    filled = (_cached(nodes["b"].node_dir)) - before["b"]
    assert sum(p.stat().st_size for p in filled) == len(FILES["train/a.txt"])  # b's cache, b's folder
    for other in ("head", "c"):
        assert (_cached(nodes[other].node_dir)) == before[other], f"node {other} cached something"
    assert not _node_mounts(home)  # nothing mounted on the engine's side
    _no_mounts_left(ray_cluster)


JOB = textwrap.dedent("""\
    import os
    rank = os.environ["RANK"]
    with open("/data/input.txt") as f:
        print("rank", rank, "read", f.read().strip(), "on", os.environ["MILLPOND_RAY_NODE_ID"], flush=True)
    if rank == "0":
        os.makedirs("/data/ckpt", exist_ok=True)
        with open("/data/ckpt/model.txt", "w") as out:
            out.write("weights of rank 0")
""")


def test_an_arena_job_on_ray_reads_its_data_and_writes_a_checkpoint_that_reaches_the_bucket(
    ray_cluster: RayCluster, cli, home: Path, tmp_path: Path, s3_server, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = create_s3_dataset(cli, home, tmp_path, s3_server, {"input.txt": b"seven\n", "job.py": JOB.encode()},
                                name="work", levels=LEVELS, access="ReadWriteMany")
    submitted = arena(capsys, "submit", "pytorch", "--name", "rw", "--workers", "2", "--cpu", "1",
                      "--ray", ray_cluster.address, "--ray-placement", "STRICT_SPREAD", "--data", "work:/data",
                      sys.executable, "/data/job.py")
    assert submitted.code == 0, submitted.err
    info = wait_status(capsys, "rw", timeout=180)
    logs = {name: arena(capsys, "logs", "rw", "-i", name).out for name in ("rw-master-0", "rw-worker-0")}
    assert info["status"] == "SUCCEEDED", (info, logs, arena(capsys, "get", "rw", "-e").out)
    seen = set()
    for rank, log in enumerate(logs.values()):
        line = next(line for line in log.splitlines() if line.startswith(f"rank {rank} read"))
        assert line.startswith(f"rank {rank} read seven on "), log
        seen.add(line.rsplit(" ", 1)[1])
    assert len(seen) == 2 and seen <= {n.node_id for n in ray_cluster.nodes.values()}  # two nodes, each its mount
    assert dataset.object("ckpt/model.txt") == b"weights of rank 0"  # written on the node, in the bucket
    _no_mounts_left(ray_cluster)


def _lease_holders(node_dir: Path) -> list[int]:
    """The pids holding a lease on a mount of the node (its Ray workers)."""
    return [json.loads(p.read_text())["pid"] for p in (node_dir / "mounts" / "users").glob("*/*.json")]


@pytest.mark.parametrize("victim", ["process", "worker"])
def test_a_task_killed_mid_run_leaves_no_mount_on_its_node(
    ray_cluster: RayCluster, cli, home: Path, tmp_path: Path, s3_server, victim: str
) -> None:
    """The task's process killed -9 (the node releases the mount), or the Ray worker running the task
    (its lease dies with it: the mount's daemon unmounts itself)."""
    create_s3_dataset(cli, home, tmp_path, s3_server, FILES, name="ds", levels=LEVELS)
    marker = tmp_path / "started"
    root = f"s3://{s3_server.create_bucket()}/runs"
    import subprocess

    from tests.ray.test_ray_pipelines import MILLPOND, _env

    engine = subprocess.Popen(
        [MILLPOND, "run", str(compile_pipeline(mounted, tmp_path)), "-p", f"marker={marker}",
         "--ray", ray_cluster.address, "--pipeline-root", root, "-o", "json"],
        env=_env(home, s3_server), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        _wait(marker.exists, 90, "the task did not start")
        node_b = ray_cluster.nodes["b"]
        assert _node_mounts(node_b.node_dir), "the task's dataset is not mounted on its node"
        holders = _lease_holders(node_b.node_dir)
        assert len(holders) == 1, holders
        os.kill(int(marker.read_text()) if victim == "process" else holders[0], signal.SIGKILL)  # mid-run
        out, err = engine.communicate(timeout=120)
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait()
    assert engine.returncode != 0 and '"FAILED"' in out, (out, err)
    _no_mounts_left(ray_cluster)


def test_on_a_ray_node_the_platform_names_a_dataset_instead_of_mounting_it(cli, home: Path, tmp_path: Path) -> None:
    from millpond.pipelines.platform import PlatformError, PodInfo, prepare_platform
    from millpond.runners.base import DatasetBind
    from millpond.store.secrets import ConfigStore
    from tests.datasets_support import manifest

    source = tmp_path / "source"
    (source / "train").mkdir(parents=True)
    (tmp_path / "ds.yaml").write_text(manifest("ds", f"local://{source}", secret=False, levels=LEVELS))
    assert cli("apply", "-f", tmp_path / "ds.yaml").code == 0

    def prepare(sub_path: str):  # noqa: ANN202 - a TaskPlatform
        mount = {"constant": "ds", "mountPath": "/data", "subPath": sub_path}
        return prepare_platform(
            {"pvcMount": [mount]}, resolve=lambda binding: None, configs=ConfigStore(home),
            volumes_dir=tmp_path / "volumes", scratch_dir=tmp_path / "scratch", pod=PodInfo(name="run-1-t"),
            remote=True,
        )

    platform = prepare("train")
    assert platform.dataset_binds == [DatasetBind("ds", "default", "/data", True, "train")]
    assert platform.binds == [] and platform.datasets == ["ds"]
    assert not _node_mounts(home)  # nothing mounted on the engine's machine
    with pytest.raises(PlatformError, match="subPath '../up'"):
        prepare("../up")

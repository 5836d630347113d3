"""Datasets inside pipelines: ``mount_pvc(task, pvc_name=DATASET, ...)`` shows the dataset at the mount path."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from millpond.datasets.mounts import fuse_available, is_mounted
from millpond.runners.sandbox import sandbox_problem
from tests.conftest import PIPELINES
from tests.datasets_support import manifest

pytestmark = pytest.mark.skipif(
    fuse_available() is not None or sandbox_problem() is not None,
    reason=f"needs FUSE and bubblewrap: {fuse_available() or sandbox_problem()}",
)


def test_a_task_mounting_a_dataset_pvc_reads_the_dataset(cli, home: Path, tmp_path: Path) -> None:
    source = tmp_path / "mnist-source"
    (source / "train").mkdir(parents=True)
    (source / "train" / "hello.txt").write_text("digits")
    (source / "README").write_text("readme")
    levels = [{"mediumtype": "MEM", "path": str(tmp_path / "shm"), "quota": "64Mi"}]
    (tmp_path / "ds.yaml").write_text(manifest("mnist", f"local://{source}", secret=False, levels=levels))
    assert cli("apply", "-f", tmp_path / "ds.yaml").code == 0
    try:
        result = cli("run", PIPELINES / "dataset_volume.py", "-o", "json")
        assert result.code == 0, result.err
        run = result.json()
        assert run["state"] == "SUCCEEDED", run
        assert run["outputs"]["Output"] == "README,train|digits"
        status = cli("get", "dataset", "mnist", "-o", "json").json()["status"]
        assert status["cacheStates"]["cached"] != "0.00B"  # the task's reads went through the cache
    finally:
        folder = home / "mnt" / "default" / "mnist"
        if is_mounted(str(folder)):
            subprocess.run(["fusermount3", "-u", "-z", str(folder)], check=False)


def test_a_task_runs_a_dataflow_and_waits_for_it(cli, home: Path, tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "a.bin").write_bytes(b"a" * 1000)
    levels = [{"mediumtype": "MEM", "path": str(tmp_path / "shm"), "quota": "64Mi"}]
    (tmp_path / "ds.yaml").write_text(manifest("mnist", f"local://{source}", secret=False, levels=levels))
    assert cli("apply", "-f", tmp_path / "ds.yaml").code == 0
    result = cli("run", PIPELINES / "dataflow_task.py", "-o", "json")
    assert result.code == 0, result.err
    run = result.json()
    assert run["state"] == "SUCCEEDED", run
    assert run["outputs"]["Output"] == "warmup-step1=Complete"
    assert cli("get", "dataload", "warmup-step1", "-o", "json").json()["status"]["phase"] == "Complete"
    status = cli("get", "dataset", "mnist", "-o", "json").json()["status"]
    assert status["cacheStates"]["cachedPercentage"] == "100.0%"

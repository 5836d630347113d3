"""A task mounting a Fluid dataset (``kubernetes.mount_pvc`` of the PVC Fluid names after it) has that dataset among
its inputs: a model's lineage reaches the data its training task read."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from millpond.datasets.mounts import fuse_available, is_mounted
from millpond.runners.sandbox import sandbox_problem
from tests.conftest import PIPELINES
from tests.datasets_support import manifest
from tests.lineage.support import links, ok
from tests.server_support import Served, serving

pytestmark = pytest.mark.skipif(
    fuse_available() is not None or sandbox_problem() is not None,
    reason=f"needs FUSE and bubblewrap: {fuse_available() or sandbox_problem()}",
)


@pytest.fixture
def server(home: Path) -> Iterator[Served]:
    yield from serving()


def test_a_mounted_dataset_is_an_input_of_the_task(cli: Callable[..., Any], home: Path, server: Served,
                                                   tmp_path: Path) -> None:
    source = tmp_path / "mnist-source"
    (source / "train").mkdir(parents=True)
    (source / "train" / "hello.txt").write_text("digits")
    levels = [{"mediumtype": "MEM", "path": str(tmp_path / "shm"), "quota": "64Mi"}]
    (tmp_path / "ds.yaml").write_text(manifest("mnist", f"local://{source}", secret=False, levels=levels))
    assert cli("apply", "-f", tmp_path / "ds.yaml").code == 0
    try:
        result = cli("run", PIPELINES / "dataset_volume.py", "-o", "json")
        assert result.code == 0, result.err
        run = result.json()
        assert run["state"] == "SUCCEEDED", run
        task = next(t for t in run["tasks"] if t["name"] == "summarize")
        [read] = links(server, task_ids=[task["id"]])
        assert (read["key"], read["type"], read["run_id"]) == ("mnist", "COMPONENT_INPUT", run["run_id"])
        dataset = ok(server, f"/artifacts/{read['artifact_id']}")
        assert (dataset["type"], dataset["uri"], dataset["metadata"]["namespace"]) == (
            "Dataset", "pvc://mnist", "default")
        again = cli("run", PIPELINES / "dataset_volume.py", "--no-cache", "-o", "json").json()
        readers = links(server, artifact_ids=[dataset["artifact_id"]])
        assert sorted(link["run_id"] for link in readers) == sorted([run["run_id"], again["run_id"]])
    finally:
        folder = home / "mnt" / "default" / "mnist"
        if is_mounted(str(folder)):
            subprocess.run(["fusermount3", "-u", "-z", str(folder)], check=False)

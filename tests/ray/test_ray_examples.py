"""The seeds' stories on the local Ray cluster (tests/ray_cluster.py), run as their users run them.

Seed 004's census pipeline (examples/census_minio) goes through `millpond server` in cluster mode
(MILLPOND_RAY_ADDRESS in its environment), sent by the example's own ``submit()`` with
``kfp.Client``, root on the bucket. Seed 000's dataflow (examples/fluid_mnist/run_flow.py) runs
as written with MILLPOND_RAY_ADDRESS set. Every task's and instance's log names the Ray node it
ran on: none ran on the engine's machine.
"""

# no "from __future__ import annotations": the example's components are read by kfp

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")
kfp = pytest.importorskip("kfp")
pytest.importorskip("s3fs")

from millpond.settings import load_settings
from millpond.store.secrets import ConfigStore
from tests.cli.test_example_census import _load_example, _states
from tests.datasets import test_example_fluid_mnist as _mnist
from tests.ray_cluster import RayCluster
from tests.server_support import serving

pytestmark = [pytest.mark.s3, pytest.mark.timeout(400)]


def test_census_pipeline_runs_on_the_cluster_nodes(
    ray_cluster: RayCluster, s3_server: Any, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in {**ray_cluster.env(), "MILLPOND_RAY_ADDRESS": ray_cluster.address}.items():
        monkeypatch.setenv(key, value)  # the server's run workers inherit its environment
    example = _load_example()
    bucket = s3_server.create_bucket()
    ConfigStore(home).create("secret", example.SECRET, {
        "AWS_ENDPOINT_URL": s3_server.endpoint_url, "AWS_ACCESS_KEY_ID": s3_server.access_key,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret_key,
    })
    for key, value in s3_server.env().items():  # the engine's own access to the root
        monkeypatch.setenv(key, value)
    server = serving()
    served = next(server)
    try:
        client = kfp.Client(host=served.url)
        run_id = example.submit(served.url, bucket, experiment="census-ray", pipeline_root=f"s3://{bucket}/runs")
        run = client.wait_for_run_completion(run_id, timeout=300)
        states = _states(run)
        assert run.state == "SUCCEEDED", (states, run.error)
        assert states["download-table-data"] == "SUCCEEDED" and states["save-table-data"] == "SUCCEEDED"
        saved = s3_server.filesystem().cat_file(f"{bucket}/B01001-2020.csv").decode()
        assert saved.splitlines()[0].startswith("GEO_ID,NAME,B01001_001E")
        nodes = {ray_cluster.nodes[name].node_id[:12] for name in ("b", "c")}
        logs = sorted(load_settings().logs_dir.rglob("*.log"))
        places = [line for log in logs for line in log.read_text().splitlines()
                  if line.startswith("[millpond] running on Ray node ")]
        assert len(places) >= 3, [str(log) for log in logs]  # exists, download, save
        assert all(line.split()[5] in nodes for line in places), places
        published = s3_server.filesystem().find(f"{bucket}/runs")
        assert published, "the run's artifacts are under the bucket's root"
    finally:
        next(server, None)  # past its yield: the server and its runs stop


@pytest.mark.skipif(_mnist._missing_packages() is not None, reason=str(_mnist._missing_packages()))
@pytest.mark.skipif(_mnist._missing_isolation() is not None, reason=str(_mnist._missing_isolation()))
def test_seed_000_dataflow_trains_on_the_cluster(
    ray_cluster: RayCluster, s3_server: Any, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seed 000's notebook as written (examples/fluid_mnist/run_flow.py) with MILLPOND_RAY_ADDRESS set: its
    DataLoad warms every node's cache, and the Arena job its DataProcess script submits runs on a node."""
    for key, value in {**ray_cluster.env(), "MILLPOND_RAY_ADDRESS": ray_cluster.address,
                       "MILLPOND_GPU_FALLBACK": "cpu"}.items():
        monkeypatch.setenv(key, value)
    bucket = s3_server.create_bucket()
    result = _mnist._run_flow(home, s3_server, "--make-data", "--bucket", bucket, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    table = _mnist._step_table(result.stdout)
    for name, kind in _mnist.STEPS:
        assert table[name][:2] == [kind, "Complete"], (name, table)
    info = json.loads(_mnist._arena(home, "get", "mnist-pytorch", "-o", "json").stdout)
    assert info["status"] == "SUCCEEDED", info
    log = _mnist._arena(home, "logs", "mnist-pytorch").stdout
    nodes = {ray_cluster.nodes[name].node_id[:12] for name in ("b", "c")}
    where = log.splitlines()[0].split()
    assert where[:5] == ["[millpond]", "running", "on", "Ray", "node"] and where[5] in nodes, log
    assert "saved /data/ckpt/mnist_cnn.pt" in log, log
    # The node wrote the checkpoint through its own mount of the ReadWrite dataset; step 5, on the
    # engine's machine, found it in the UFS (its listing refreshed) and archived it.
    assert s3_server.filesystem().exists(f"{bucket}/mnist_ckpt/mnist_cnn.pt")

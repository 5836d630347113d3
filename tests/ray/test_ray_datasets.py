"""Datasets on every node of a real local Ray cluster (head + nodes b, c), over a real SeaweedFS.

A task that reads a dataset on node b fills b's cache only (its tiers and index under b's
MILLPOND_NODE_DIR); a second task on that dataset prefers b (Ray's soft node affinity, from
what b reported in the database); the dataset's status sums the nodes' caches and counts them
as the runtime's workers; ``replicas`` bounds the nodes holding a cache (a node beyond it
reads straight from the UFS); a DataLoad warms every node, or those its nodeSelector names.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("ray")

from millpond.datasets.placement import preferred_node, with_data_affinity
from millpond.runners.base import ProcessSpec
from millpond.runners.ray_cluster import RayResources, connect, run_on_cluster
from tests.datasets_support import cache_files, create_s3_dataset, payload
from tests.ray_cluster import RayCluster

pytestmark = pytest.mark.timeout(300)

FILES = {"train/a.bin": payload("a", 300_000), "train/b.bin": payload("b", 200_000), "README": b"digits\n"}
TOTAL = sum(len(v) for v in FILES.values())
LEVELS = [{"mediumtype": "SSD", "quota": "64Mi"}]  # no path: under the home, so on a node under its own folder

READER = (
    "import fsspec, hashlib, os, sys\n"
    "digest = hashlib.sha256()\n"
    "for key in sorted(sys.argv[1:]):\n"
    "    with fsspec.open('millpond://ds/' + key, 'rb') as f:\n"
    "        digest.update(f.read())\n"
    "print('node', os.environ['MILLPOND_RAY_NODE_ID'])\n"
    "print('digest', digest.hexdigest())\n"
)


def test_the_node_variables_are_the_cluster_runners() -> None:
    from millpond.datasets import config
    from millpond.runners import ray_node

    assert (config.NODE_DIR_VAR, config.NODE_ID_VAR) == (ray_node.NODE_DIR_VAR, ray_node.NODE_ID_VAR)


def _expected_digest() -> str:
    import hashlib

    digest = hashlib.sha256()
    for key in sorted(FILES):
        digest.update(FILES[key])
    return digest.hexdigest()


def _read_on_cluster(tmp_path: Path, resources: RayResources, label: str) -> dict[str, str]:
    """Run the reader as a Ray task with ``resources``; what it printed (node, digest)."""
    workspace = tmp_path / label
    (workspace / "work").mkdir(parents=True)
    log = tmp_path / f"{label}.log"
    spec = ProcessSpec(
        argv=[sys.executable, "-c", READER, *FILES],
        env={"PATH": os.environ["PATH"], "PYTHONUNBUFFERED": "1", "MILLPOND_HOME": os.environ["MILLPOND_HOME"]},
        cwd=workspace / "work", log_path=log,
    )
    result = run_on_cluster(spec, threading.Event(), resources, workspace)
    assert result.exit_code == 0 and result.error is None, (result.error, log.read_text())
    pairs = [line.split(" ", 1) for line in log.read_text().splitlines()]
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2 and pair[0] in ("node", "digest")}


def _cached(node_dir: Path) -> list[Path]:
    return cache_files(node_dir / "cache") if (node_dir / "cache").exists() else []


def _status(cli, kind: str, name: str) -> dict:
    result = cli("get", kind, name, "-o", "json")
    assert result.code == 0, result.err
    return result.json()["status"]


@pytest.fixture
def joined(ray_cluster: RayCluster) -> RayCluster:
    connect(ray_cluster.address)
    return ray_cluster


def test_a_task_fills_its_nodes_cache_only_and_the_next_task_on_the_dataset_lands_there(
    joined: RayCluster, cli, home: Path, tmp_path: Path, s3_server
) -> None:
    nodes = joined.nodes
    before = {name: set(_cached(node.node_dir)) for name, node in nodes.items()}
    create_s3_dataset(cli, home, tmp_path, s3_server, FILES, name="ds", levels=LEVELS)  # replicas: 1
    assert preferred_node("ds") is None  # no node holds it yet: Ray places the first task where it likes

    first = _read_on_cluster(tmp_path, RayResources(num_cpus=1, resources={"node_b": 0.01}), "first")
    assert first == {"node": nodes["b"].node_id, "digest": _expected_digest()}
    filled = set(_cached(nodes["b"].node_dir)) - before["b"]
    assert sum(p.stat().st_size for p in filled) == TOTAL  # b's cache, under b's folder
    assert not list(home.glob("cache/**/files/*"))  # nothing in the engine's home
    for other in ("head", "c"):
        assert set(_cached(nodes[other].node_dir)) == before[other], f"node {other} cached something"

    # The second task asks for nothing but a CPU: the dataset's data pulls it to b (soft affinity).
    assert preferred_node("ds") == nodes["b"].node_id
    resources = with_data_affinity(RayResources(num_cpus=1), [("ds", "default")])
    assert resources.node_id == nodes["b"].node_id and resources.soft
    second = _read_on_cluster(tmp_path, resources, "second")
    assert second["node"] == nodes["b"].node_id

    # Status sums the nodes' caches: b holds all of it, and the second read was all hits.
    status = _status(cli, "dataset", "ds")
    assert status["phase"] == "Bound"
    assert status["cacheStates"]["cached"] == _status_bytes(TOTAL)
    assert status["cacheStates"]["cachedPercentage"] == "100.0%"
    assert status["cacheStates"]["cacheHitRatio"] != "0.0%"  # the second read was served from b's cache
    runtime = _status(cli, "alluxioruntime", "ds")
    assert (runtime["desiredWorkerNumberScheduled"], runtime["currentWorkerNumberScheduled"],
            runtime["workerNumberReady"]) == (1, 1, 1)

    # replicas: 1 — a task made to run on c reads the data from the UFS; c holds no cache of it.
    third = _read_on_cluster(tmp_path, RayResources(num_cpus=1, resources={"node_c": 0.01}), "third")
    assert third == {"node": nodes["c"].node_id, "digest": _expected_digest()}
    assert set(_cached(nodes["c"].node_dir)) == before["c"]
    assert _status(cli, "alluxioruntime", "ds")["currentWorkerNumberScheduled"] == 1


def _status_bytes(size: int) -> str:
    from millpond.datasets.quantity import format_bytes

    return format_bytes(size)


def _dataload(cli, tmp_path: Path, name: str, extra: str = "", code: int = 0) -> dict:
    (tmp_path / f"{name}.yaml").write_text(
        "apiVersion: data.fluid.io/v1alpha1\nkind: DataLoad\n"
        f"metadata: {{name: {name}}}\nspec:\n  dataset: {{name: {name.split('-')[0]}, namespace: default}}\n{extra}"
    )
    result = cli("apply", "--wait", "-f", tmp_path / f"{name}.yaml")
    assert result.code == code, result.err
    return _status(cli, "dataload", name)


def test_a_dataload_warms_every_node_or_those_its_node_selector_names(
    joined: RayCluster, cli, home: Path, tmp_path: Path, s3_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MILLPOND_RAY_ADDRESS", joined.address)
    nodes = joined.nodes
    for name in ("every", "one"):
        create_s3_dataset(cli, home, tmp_path, s3_server, FILES, name=name, levels=LEVELS)
        text = (tmp_path / f"{name}.yaml").read_text().replace("replicas: 1", "replicas: 3")
        (tmp_path / f"{name}.yaml").write_text(text)
        assert cli("apply", "-f", tmp_path / f"{name}.yaml").code == 0

    def held(node: str, dataset: str) -> int:
        return sum(p.stat().st_size for p in _cached(nodes[node].node_dir) if f"/default/{dataset}-" in str(p))

    status = _dataload(cli, tmp_path, "every-load")
    assert status["phase"] == "Complete", status
    assert sorted(status["infos"]["nodes"].split(",")) == sorted(n.node_id for n in nodes.values())
    assert all(held(node, "every") == TOTAL for node in nodes)
    dataset = _status(cli, "dataset", "every")
    assert dataset["cacheStates"]["cached"] == _status_bytes(3 * TOTAL)  # summed over the three nodes
    assert dataset["cacheStates"]["cachedPercentage"] == "100.0%"
    runtime = _status(cli, "alluxioruntime", "every")
    assert (runtime["desiredWorkerNumberScheduled"], runtime["currentWorkerNumberScheduled"],
            runtime["workerNumberReady"]) == (3, 3, 3)

    selector = f'  nodeSelector: {{"ray.io/node-id": "{nodes["c"].node_id}"}}\n'
    status = _dataload(cli, tmp_path, "one-load", selector)
    assert status["phase"] == "Complete", status
    assert status["infos"]["nodes"] == nodes["c"].node_id
    assert held("c", "one") == TOTAL and held("head", "one") == 0 and held("b", "one") == 0
    runtime = _status(cli, "alluxioruntime", "one")
    assert (runtime["desiredWorkerNumberScheduled"], runtime["currentWorkerNumberScheduled"]) == (3, 1)
    assert preferred_node("one") == nodes["c"].node_id

    status = _dataload(cli, tmp_path, "one-nowhere", '  nodeSelector: {"zone": "nowhere"}\n', code=1)
    assert status["phase"] == "Failed"
    assert "no node of the Ray cluster matches" in status["conditions"][0]["message"]

    # Deleting a dataset removes every node's cache of it (each node its own), and the nodes' rows.
    assert cli("delete", "dataset", "every").code == 0
    assert all(held(node, "every") == 0 for node in nodes)
    assert not any(list(nodes[node].node_dir.glob("datasets/default/every-*")) for node in nodes)
    assert held("c", "one") == TOTAL  # the other dataset's cache stays


def test_node_selector_and_required_affinity_select_nodes_as_kubernetes_does() -> None:
    from millpond.datasets.node_loads import ClusterMember, selected
    from millpond.errors import UserError

    members = [
        ClusterMember("h", {"ray.io/node-id": "h", "zone": "a"}),
        ClusterMember("b", {"ray.io/node-id": "b", "zone": "a", "ssd": "yes"}),
        ClusterMember("c", {"ray.io/node-id": "c", "zone": "b"}),
    ]

    def ids(spec: dict) -> list[str]:
        return [m.node_id for m in selected(spec, members)]

    assert ids({}) == ["h", "b", "c"]
    assert ids({"nodeSelector": {"zone": "a"}}) == ["h", "b"]
    assert ids({"nodeSelector": {"zone": "a", "ssd": "yes"}}) == ["b"]
    term = {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}
    required = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    assert ids({"affinity": required}) == ["c"]
    either = [{"matchExpressions": [{"key": "ssd", "operator": "Exists"}]},
              {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]
    required["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] = either
    assert ids({"affinity": required}) == ["b", "c"]  # terms are ORed
    bad = [{"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["1"]}]}]
    required["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] = bad
    with pytest.raises(UserError, match="operator 'Gt' is not supported"):
        selected({"affinity": required}, members)


@pytest.mark.usefixtures("database")  # SQLite's write lock, and PostgreSQL's table lock
def test_claims_are_bounded_by_replicas_and_a_restarted_node_keeps_its_claim(home: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from millpond.store.node_caches import CacheReport, NodeCacheStore

    store = NodeCacheStore()
    assert store.claim("u1", "default", "ds", "n1", "/nodes/a", 2)
    assert store.claim("u1", "default", "ds", "n1", "/nodes/a", 2)  # again: the same claim
    # Two nodes race for the last slot: exactly one gets it.
    with ThreadPoolExecutor(2) as pool:
        won = list(pool.map(lambda n: store.claim("u1", "default", "ds", n, f"/nodes/{n}", 2), ["n2", "n3"]))
    assert sorted(won) == [False, True]
    assert len(store.states("u1")) == 2
    holder = next(s for s in store.states("u1") if s.node_id != "n1")
    # Restarted with a new id, on its old folder: it keeps its claim and its numbers.
    store.report("u1", "n1", CacheReport(cached=5, capacity=10, hit_bytes=1, miss_bytes=2))
    assert store.claim("u1", "default", "ds", "n1-restarted", "/nodes/a", 2)
    states = {s.node_id: s for s in store.states("u1")}
    assert set(states) == {"n1-restarted", holder.node_id} and states["n1-restarted"].cached == 5
    assert store.claim("u1", "default", "ds", "n4", "/nodes/n4", None)  # no replicas: no bound
    store.forget("ds", "default")
    assert store.states("u1") == []


@pytest.mark.usefixtures("database")  # SQLite's write lock, and PostgreSQL's table lock
def test_a_node_lost_for_good_gives_its_cache_slot_back(home: Path) -> None:
    """replicas: 1 held by a node that is gone (not among the cluster's live nodes): the driver drops its
    claim (placement and DataLoad do, before a task or a load needs a slot), and a live node can claim."""
    from millpond.store.node_caches import NodeCacheStore

    store = NodeCacheStore()
    assert store.claim("u1", "default", "ds", "lost", "/nodes/lost", 1)
    assert store.claim("u2", "default", "other", "lost", "/nodes/lost", 1)
    assert not store.claim("u1", "default", "ds", "alive", "/nodes/alive", 1)  # the slot is held
    assert store.release_lost("u1", {"alive"}) == 1
    assert store.claim("u1", "default", "ds", "alive", "/nodes/alive", 1)
    assert [s.node_id for s in store.states("u1")] == ["alive"]
    assert [s.node_id for s in store.states("u2")] == ["lost"]  # another dataset's claims are its own
    assert store.release_lost("u1", {"alive"}) == 0  # a live node's claim stays


def test_a_preferred_node_becomes_a_soft_node_affinity_of_the_ray_task() -> None:
    from millpond.runners.base import Demand
    from millpond.runners.ray_cluster import ray_resources

    placed = ray_resources(Demand(cpus=2, prefer_node="ab" * 28))
    assert (placed.node_id, placed.soft, placed.num_cpus) == ("ab" * 28, True, 2)
    strategy = placed.options()["scheduling_strategy"]
    assert strategy.node_id == "ab" * 28 and strategy.soft
    assert ray_resources(Demand(cpus=1)).node_id is None  # no dataset cached anywhere: Ray decides


def test_a_node_whose_database_does_not_answer_serves_reads_from_the_ufs_uncached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from millpond.datasets.cache.engine import DatasetCache
    from millpond.datasets.config import build_config

    broken = tmp_path / "not-a-database"
    broken.write_bytes(b"garbage" * 1000)
    node = tmp_path / "node"
    monkeypatch.setenv("MILLPOND_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MILLPOND_DATABASE_URL", f"sqlite:///{broken}")
    monkeypatch.setenv("MILLPOND_NODE_DIR", str(node))
    monkeypatch.setenv("MILLPOND_RAY_NODE_ID", "ab" * 28)
    source = tmp_path / "source"
    source.mkdir()
    (source / "x.bin").write_bytes(b"x" * 1000)
    dataset = {"metadata": {"name": "ds"}, "spec": {"mounts": [{"mountPoint": f"local://{source}", "name": "data",
                                                                "path": "/"}]}}
    config = build_config(dataset, None, "0" * 36)
    assert config.node is not None and node in config.state_dir.parents  # the node's folder, not the home
    assert all(node in tier.path.parents for tier in config.tiers)
    cache = DatasetCache(config, tmp_path / "volumes")
    try:
        assert not cache.holds_cache
        assert cache.read_file("x.bin") == b"x" * 1000
    finally:
        cache.close()
    assert _cached(node) == []

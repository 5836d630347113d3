"""Monitoring in cluster mode, on a real local Ray cluster (tests/ray_cluster.py: a head and two worker nodes):
``arena top node --ray -o json`` and the Nodes page's ``/ui-api/nodes`` of a server started for the cluster list
the cluster's nodes with their CPUs, memory and GPUs, total and allocated (use: unknown on Ray, so null)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from tests.ray_cluster import RayCluster
from tests.server_support import serving
from tests.training_support import arena

pytestmark = pytest.mark.timeout(300)


def test_top_node_json_and_the_nodes_route_list_the_clusters_nodes(
    ray_cluster: RayCluster, home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = arena(capsys, "top", "node", "--ray", ray_cluster.address, "-o", "json")
    assert shown.code == 0, shown.err
    listed = json.loads(shown.out)
    by_id = {node["node_id"]: node for node in listed["nodes"]}
    for name, node in ray_cluster.nodes.items():
        row = by_id[node.node_id]
        assert row["role"] == ("head" if name == "head" else "worker") and row["cpus"] == node.cpus
        assert row["name"] == node.node_id[:12]
    assert listed["totalGPUs"] == sum(node["gpus"] for node in listed["nodes"]) >= 1  # b declares a T4

    monkeypatch.setenv("MILLPOND_RAY_ADDRESS", ray_cluster.address)  # as millpond server --ray sets it
    for served in serving():
        with urllib.request.urlopen(served.url + "/ui-api/nodes", timeout=60) as answer:
            found = json.loads(answer.read())
    assert found["mode"] == "ray"
    nodes = {node["name"]: node for node in found["nodes"]}
    for name, node in ray_cluster.nodes.items():
        row = nodes[node.node_id[:12]]
        assert row["role"] == ("head" if name == "head" else "worker")
        assert row["cpu"]["capacity"] == node.cpus and 0 <= row["cpu"]["allocated"] <= node.cpus
        assert row["cpu"]["used"] is None and row["memory"]["used"] is None  # Ray reports no per-node use here
        assert row["memory"]["capacity"] > 0
    assert sum(node["gpu"]["capacity"] for node in found["nodes"]) == listed["totalGPUs"]

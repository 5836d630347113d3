"""``arena top node`` on a Ray cluster: each live node of the cluster, from Ray's own state.

Arena reads its nodes from Kubernetes; in cluster mode the nodes are Ray's (``ray.nodes()``),
each with its totals and what is allocated on it now (its totals less what Ray says is
available: training jobs' bundles, pipeline tasks, anyone's actors alike).
"""

from __future__ import annotations

from dataclasses import dataclass

from millpond.runners.ray_cluster import connect

HEAD_MARK = "node:__internal_head__"  # the resource Ray gives only the head node


@dataclass(frozen=True)
class RayNodeRow:
    """One node: Ray's id (its first 12 hex digits name it, as ``ray status`` does), address, role, and
    CPUs, memory (bytes) and GPUs, each total and allocated."""

    node_id: str
    ip: str
    role: str  # head | worker
    cpus: float
    cpus_allocated: float
    memory: float
    memory_allocated: float
    gpus: float
    gpus_allocated: float

    @property
    def name(self) -> str:
        return self.node_id[:12]


def ray_nodes(address: str) -> list[RayNodeRow]:
    """The live nodes of the cluster at ``address`` (the head first)."""
    import ray  # noqa: PLC0415 - ray is optional (cluster mode)
    from ray._private.state import available_resources_per_node  # Ray's DeveloperAPI, as `ray status` reads it  # noqa: PLC0415 - ray is optional (cluster mode)

    connect(address)
    available = available_resources_per_node()
    rows = []
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        node_id = str(node["NodeID"])
        total = {key: float(value) for key, value in (node.get("Resources") or {}).items()}
        free = available.get(node_id, total)

        def used(key: str, total: dict[str, float] = total, free: dict[str, float] = free) -> float:
            return max(0.0, total.get(key, 0.0) - float(free.get(key, 0.0)))

        rows.append(RayNodeRow(
            node_id=node_id, ip=str(node.get("NodeManagerAddress", "")),
            role="head" if HEAD_MARK in total else "worker",
            cpus=total.get("CPU", 0.0), cpus_allocated=used("CPU"),
            memory=total.get("memory", 0.0), memory_allocated=used("memory"),
            gpus=total.get("GPU", 0.0), gpus_allocated=used("GPU"),
        ))
    return sorted(rows, key=lambda row: (row.role != "head", row.node_id))

"""Placement follows the data (Fluid's data-affinity scheduling, on Ray): which node a task should prefer.

Fluid's webhook gives a pod that mounts a dataset a *preferred* node affinity to the nodes
whose workers cache it; the scheduler still places it elsewhere when those nodes cannot take
it. Here the nodes' caches report what they hold in the shared database
(:mod:`millpond.store.node_caches`), and a task mounting datasets prefers the live node
holding most of their bytes, through Ray's ``NodeAffinitySchedulingStrategy(soft=True)``:
Ray runs it on another node when that one is full, lost, or lacks what the task asks for.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import replace

from millpond.runners.ray_cluster import RayResources, cluster_nodes
from millpond.settings import Settings, load_settings
from millpond.store.node_caches import NodeCacheStore
from millpond.store.resources import ResourceStore


def live_nodes() -> set[str] | None:
    """The live nodes of the cluster this process joined, or None when it joined none (nothing to filter by)."""
    ray = sys.modules.get("ray")  # not imported: not joined (and importing Ray to find out costs a second)
    if ray is None or not ray.is_initialized():
        return None

    return {node.node_id for node in cluster_nodes()}


def preferred_node(
    dataset: str, namespace: str = "default", settings: Settings | None = None
) -> str | None:
    """The live node holding most of ``dataset``'s bytes, or None when no node holds a cache of it."""
    return preferred_node_of([(dataset, namespace)], settings)


def preferred_node_of(datasets: Iterable[tuple[str, str]], settings: Settings | None = None) -> str | None:
    """The node holding most bytes of all ``datasets`` (name, namespace) together; ties go to the first claim.

    A node that claimed a cache slot but holds nothing yet still counts (when ``replicas``
    bounds the cache nodes, a task on it is the one that gets cached reads).
    """
    settings = settings or load_settings()
    resources, nodes = ResourceStore(settings), NodeCacheStore(settings)
    held: dict[str, int] = {}
    order: dict[str, int] = {}
    live = live_nodes()
    for name, namespace in datasets:
        found = resources.get("Dataset", name, namespace)
        if found is None:
            continue
        if live:  # the slots of nodes lost for good go back (replicas), before a task needs one
            nodes.release_lost(found.uid, live)
        for position, state in enumerate(nodes.states(found.uid)):
            held[state.node_id] = held.get(state.node_id, 0) + state.cached
            order.setdefault(state.node_id, position)
    candidates = [node for node in held if live is None or node in live]
    if not candidates:
        return None
    return min(candidates, key=lambda node: (-held[node], order[node]))


def with_data_affinity(
    resources: RayResources, datasets: Iterable[tuple[str, str]], settings: Settings | None = None
) -> RayResources:
    """``resources`` preferring the node that holds the task's datasets (soft); unchanged when the task
    already names a node, or no node holds them."""
    if resources.node_id:
        return resources
    node = preferred_node_of(datasets, settings)
    return resources if node is None else replace(resources, node_id=node, soft=True)

"""A DataLoad in cluster mode: one load per node it is told to warm, each a Ray task pinned to its node.

Fluid's DataLoad fills the runtime's workers; here each node's cache is its worker, so the
load runs on every live node of the cluster (or those its ``nodeSelector`` and required node
``affinity`` select, matched against the nodes' Ray labels) as a Ray task with a hard node
affinity. Each task opens the dataset there, so the cache it fills is that node's (its tiers
under ``MILLPOND_NODE_DIR``) and reports itself in the shared database. A node whose cache
slot is refused (the runtime's ``replicas`` are all held) is skipped and named in the infos.
The tasks ask for no CPU: a load waits on the network, and must not queue behind the tasks
that will read what it loads.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from millpond.datasets.cache.engine import LoadResult, open_cache
from millpond.datasets.cache_removal import remove_caches
from millpond.datasets.config import NODE_ID_VAR
from millpond.errors import UserError
from millpond.runners.ray_cluster import connect
from millpond.runners.ray_node import node_dir
from millpond.store.node_caches import NodeCacheStore
from millpond.store.resources import ResourceStore

NODE_ID_LABEL = "ray.io/node-id"  # a label every Ray node has; selecting by it names one node
CLEAN_TIMEOUT_S = 60.0
CARRIED_VARS = ("MILLPOND_HOME", "MILLPOND_DATABASE_URL")  # what a node needs to find the dataset and the database


@dataclass(frozen=True)
class ClusterMember:
    node_id: str
    labels: dict[str, str]


def _members() -> list[ClusterMember]:
    import ray  # noqa: PLC0415 - Ray (~0.5 s) only in cluster mode

    found = []
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        labels = {str(k): str(v) for k, v in (node.get("Labels") or {}).items()}
        labels.setdefault(NODE_ID_LABEL, str(node["NodeID"]))
        found.append(ClusterMember(str(node["NodeID"]), labels))
    return found


def _matches(expression: dict[str, Any], labels: dict[str, str]) -> bool:
    """One Kubernetes node-selector requirement (In, NotIn, Exists, DoesNotExist) against a node's labels."""
    key, operator = str(expression.get("key")), str(expression.get("operator"))
    values = [str(v) for v in expression.get("values") or []]
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    raise UserError(f"spec.affinity: node selector operator {operator!r} is not supported "
                    "(In, NotIn, Exists, DoesNotExist)")


def selected(spec: dict[str, Any], members: list[ClusterMember]) -> list[ClusterMember]:
    """The nodes a DataLoad warms: all, narrowed by ``nodeSelector`` (every label equal) and by
    ``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`` (any term whose
    expressions all hold), as Kubernetes selects nodes for a pod."""
    selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    chosen = []
    for member in members:
        if any(member.labels.get(k) != v for k, v in selector.items()):
            continue
        if terms and not any(
            all(_matches(e, member.labels) for e in term.get("matchExpressions") or []) for term in terms
        ):
            continue
        chosen.append(member)
    return chosen


def _release_lost_claims(name: str, namespace: str, live: set[str]) -> None:
    """Nodes lost for good give their cache slots back before the load claims slots (``replicas``)."""

    found = ResourceStore().get("Dataset", name, namespace)
    if found is not None and live:
        NodeCacheStore().release_lost(found.uid, live)


def load_here(name: str, namespace: str, targets: list[str], load_metadata: bool) -> LoadResult | None:
    """On a node (a Ray task): fill this node's cache of the dataset; what it did, or None when it was skipped."""
    import ray  # noqa: PLC0415 - Ray (~0.5 s) only in cluster mode

    os.environ[NODE_ID_VAR] = str(ray.get_runtime_context().get_node_id())
    cache = open_cache(name, namespace)
    try:
        if not cache.holds_cache:
            return None
        if load_metadata:
            cache.sync()
        return cache.load(targets)
    finally:
        cache.close()


def load_on_nodes(
    address: str, spec: dict[str, Any], name: str, namespace: str, targets: list[str],
    progress: Callable[..., None],
) -> dict[str, str]:
    """Run the load on each selected node at once; the first node that fails fails the DataLoad."""
    import ray  # noqa: PLC0415 - Ray (~0.5 s) only in cluster mode
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415 - Ray only in cluster mode

    connect(address)
    members = _members()
    nodes = selected(spec, members)
    _release_lost_claims(name, namespace, {member.node_id for member in members})
    if not nodes:
        raise UserError("no node of the Ray cluster matches the DataLoad's nodeSelector/affinity")
    env = {var: os.environ[var] for var in CARRIED_VARS if os.environ.get(var)}
    remote = ray.remote(max_retries=0, num_cpus=0)(load_here)
    pending = {
        remote.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
            runtime_env={"env_vars": env},
        ).remote(name, namespace, targets, bool(spec.get("loadMetadata"))): node
        for node in nodes
    }
    done: dict[str, LoadResult | None] = {}  # by node id; None: the node's cache slot was refused
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            node = pending.pop(ready[0])
            try:
                done[node.node_id] = ray.get(ready[0])
            except ray.exceptions.RayError as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[-1][:300]
                raise UserError(f"the load on Ray node {node.node_id[:12]} failed: {first}") from None
            loaded = [r for r in done.values() if r is not None]
            progress(sum(r.bytes for r in loaded), sum(r.files for r in loaded), sum(r.bytes for r in loaded) or 1)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
    return _load_infos(done)


def _load_infos(done: dict[str, LoadResult | None]) -> dict[str, str]:
    """The DataLoad's infos: the nodes that loaded, their totals, and the nodes skipped (beyond ``replicas``)."""
    loaded = {node: r for node, r in done.items() if r is not None}
    infos = {
        "nodes": ",".join(sorted(loaded)), "files": str(sum(r.files for r in loaded.values())),
        "bytes": str(sum(r.bytes for r in loaded.values())),
        "fetchedFiles": str(sum(r.fetched_files for r in loaded.values())),
        "fetchedBytes": str(sum(r.fetched_bytes for r in loaded.values())),
    }
    skipped = sorted(node for node, r in done.items() if r is None)
    if skipped:
        infos["skippedNodes"] = ",".join(skipped)  # beyond the runtime's replicas
    return infos


def clean_here(name: str, namespace: str) -> None:
    """On a node (a Ray task): remove this node's caches of the deleted dataset."""
    remove_caches(node_dir(), name, namespace)


def clean_on_nodes(address: str, nodes: list[str], name: str, namespace: str) -> list[str]:
    """Remove the deleted dataset's caches on each of ``nodes`` that is alive; what could not be cleaned."""
    import ray  # noqa: PLC0415 - Ray (~0.5 s) only in cluster mode
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415 - Ray only in cluster mode

    connect(address)
    live = {member.node_id for member in _members()}
    problems = [f"Ray node {node[:12]} is gone: its cache of {namespace}/{name} stays in its folder"
                for node in nodes if node not in live]
    remote = ray.remote(max_retries=0, num_cpus=0)(clean_here)
    refs = {
        remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
        .remote(name, namespace): node
        for node in nodes if node in live
    }
    for ref, node in refs.items():
        try:
            ray.get(ref, timeout=CLEAN_TIMEOUT_S)
        except (ray.exceptions.RayError, TimeoutError) as exc:
            problems.append(f"Ray node {node[:12]} could not remove its cache of {namespace}/{name}: {exc}")
    return problems

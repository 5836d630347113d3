"""Each RayCluster's Ray nodes as pods would show them: what the v1 Pod view lists for KubeRay.

The cluster's supervisor writes ``nodes.json`` (``paths.nodes_file``) whenever a node starts, becomes
ready, exits or is stopped; :func:`ray_nodes` reads it back as :class:`RayNodeView` records, the
process's state checked against ``/proc`` (pid and start ticks) at the time of the read, so a node
whose supervisor died with it shows as gone. ``labels`` are those KubeRay puts on its pods
(``ray.io/cluster``, ``ray.io/group``, ``ray.io/node-type``, ``ray.io/is-ray-node``), which SDKs and
``kubectl get pods -l`` select on.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from millpond.kuberay import paths
from millpond.kuberay.kinds import CLUSTER_LABEL
from millpond.runners.processes import is_running
from millpond.settings import Settings
from millpond.store.resources import ResourceStore

RUNNING, PENDING, SUCCEEDED, FAILED = "Running", "Pending", "Succeeded", "Failed"


@dataclass(frozen=True)
class RayNodeView:
    """One Ray node of a cluster, as a pod of it: its name, group, process, state and log."""

    name: str  # CLUSTER-head-xxxxx, CLUSTER-GROUP-worker-xxxxx (KubeRay's pod names)
    cluster: str
    namespace: str
    group: str  # "headgroup" for the head, else the worker group's name
    head: bool
    index: int
    pid: int | None
    ticks: str | None  # the pid's start ticks: a reused pid is not this node
    phase: str  # Pending (waits for the machine), Running, Succeeded (stopped), Failed (exited on its own)
    ready: bool
    exit_code: int | None
    reason: str  # why it waits or how it ended
    log_path: str
    started_at: float  # time.time() of its start; 0 when it never started
    restarts: int
    node_ip: str = "127.0.0.1"

    @property
    def labels(self) -> dict[str, str]:
        return {CLUSTER_LABEL: self.cluster, "ray.io/group": self.group,
                "ray.io/node-type": "head" if self.head else "worker", "ray.io/is-ray-node": "yes",
                "app.kubernetes.io/name": "kuberay", "app.kubernetes.io/created-by": "kuberay-operator"}


def write(path: Path, views: list[RayNodeView]) -> None:
    """Replace the cluster's node records at once (a reader sees all of them or the previous ones)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps([asdict(view) for view in views]))
    os.replace(partial, path)


def _read(path: Path) -> list[RayNodeView]:
    try:
        return [RayNodeView(**item) for item in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError):
        return []


def _observed(view: RayNodeView) -> RayNodeView:
    """The record, its Running state checked against the process table now."""
    if view.phase == RUNNING and not is_running(view.pid, view.ticks):
        return RayNodeView(**{**asdict(view), "phase": FAILED, "ready": False,
                              "reason": "its process is gone (its supervisor ended without stopping it)"})
    return view


def ray_nodes(settings: Settings, namespace: str, cluster: str) -> list[RayNodeView]:
    """The Ray nodes of RayCluster ``namespace/cluster`` (none when it is not stored or never started)."""
    found = ResourceStore(settings).get("RayCluster", cluster, namespace)
    if found is None:
        return []
    return [_observed(view) for view in _read(paths.nodes_file(settings, found.uid))]


def all_ray_nodes(settings: Settings, namespace: str | None = None) -> list[RayNodeView]:
    """Every RayCluster's Ray nodes (in ``namespace``, or every namespace when None)."""
    return [_observed(view) for found in ResourceStore(settings).list("RayCluster", namespace)
            for view in _read(paths.nodes_file(settings, found.uid))]

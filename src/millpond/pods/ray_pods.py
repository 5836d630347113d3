"""A RayCluster's Ray nodes as the pods KubeRay makes: the head ``CLUSTER-head-xxxxx`` and each worker
``CLUSTER-GROUP-worker-xxxxx``, with KubeRay's labels (``ray.io/cluster``, ``ray.io/group``,
``ray.io/node-type``…) and the container of the group's pod template, owned by the RayCluster.

Read from what the cluster's supervisor records (``kuberay.node_view``). Deleting a running node's pod
stops its ``ray start`` process: the supervisor starts a worker again, as KubeRay recreates a worker
pod; a head that goes fails the cluster (no GCS fault tolerance here: see the kuberay family).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from millpond.kind_handler import KindContext
from millpond.kuberay.node_view import FAILED, RUNNING, SUCCEEDED, RayNodeView, ray_nodes
from millpond.pods.records import (
    ContainerState,
    ContainerView,
    LogFile,
    OwnerRef,
    PodView,
    ProcessRef,
    Running,
    Terminated,
    Waiting,
    pod_uid,
)
from millpond.store.resources import Resource, ResourceStore


class RayClusterPods:
    """The Ray nodes of every RayCluster."""

    def pods(self, namespace: str | None, context: KindContext) -> list[PodView]:
        return [_pod(cluster, node) for cluster in ResourceStore(context.settings).list("RayCluster", namespace)
                for node in ray_nodes(context.settings, cluster.namespace, cluster.name)]


SOURCE = RayClusterPods()


def _container_spec(cluster: Resource, node: RayNodeView) -> dict[str, Any]:
    spec = cluster.spec
    if node.head:
        template = (spec.get("headGroupSpec") or {}).get("template") or {}
    else:
        groups: list[dict[str, Any]] = [g for g in spec.get("workerGroupSpecs") or [] if isinstance(g, dict)]
        group = next((g for g in groups if g.get("groupName") == node.group), {})
        template = group.get("template") or {}
    containers = (template.get("spec") or {}).get("containers") or [{}]
    first = containers[0]
    return first if isinstance(first, dict) else {}


def _pod(cluster: Resource, node: RayNodeView) -> PodView:
    started = dt.datetime.fromtimestamp(node.started_at, dt.timezone.utc) if node.started_at else None
    state = _state(node, started)
    running = isinstance(state, Running) and node.pid is not None
    spec = _container_spec(cluster, node)
    container = ContainerView(
        name=str(spec.get("name") or ("ray-head" if node.head else "ray-worker")), image=str(spec.get("image") or ""),
        state=state, ready=node.ready, restart_count=node.restarts,
        log=LogFile(Path(node.log_path), stamped=False) if node.log_path else None,
        process=ProcessRef(node.pid, node.ticks) if running and node.pid is not None else None)
    return PodView(
        name=node.name, namespace=cluster.namespace, uid=pod_uid(cluster.uid, node.name, node.restarts),
        created_at=started or cluster.created_at, containers=(container,),
        owner=OwnerRef("ray.io/v1", "RayCluster", cluster.name, cluster.uid), labels=node.labels,
        started_at=started, restart_policy="Always")


def _state(node: RayNodeView, started: dt.datetime | None) -> ContainerState:
    if node.phase == RUNNING and started is not None:
        return Running(started)
    if node.phase in (SUCCEEDED, FAILED):
        code = node.exit_code if node.exit_code is not None else (0 if node.phase == SUCCEEDED else 1)
        return Terminated(code, "Completed" if code == 0 else "Error", started, None, node.reason)
    return Waiting("ContainerCreating" if not node.reason else "Pending", node.reason)

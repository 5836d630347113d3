"""Kueue objects for the queueing tests, stored as ``millpond apply -f`` stores them, and a polling helper."""

from __future__ import annotations

import time
from typing import Any

from millpond.store.resources import ResourceStore


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": name},
            "value": value, "description": f"{name} workloads"}


def apply_objects(*objects: dict[str, Any]) -> None:
    """Kueue objects in the resource store (cluster-scoped ones under ``default``), as applied."""
    ResourceStore().apply(list(objects))


def queues(*cluster_queues: tuple[str, int, dict[str, Any]], cpu: str = "64",
           namespace: str = "default") -> list[dict[str, Any]]:
    """A ResourceFlavor and, for each (name, GPUs, extra spec), a ClusterQueue of that GPU quota and ``cpu``
    CPUs (every namespace admitted) with a LocalQueue of the same name in ``namespace``."""
    objects: list[dict[str, Any]] = [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                      "metadata": {"name": "default-flavor"}, "spec": {}}]
    for name, gpus, extra in cluster_queues:
        objects.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
                        "spec": {"namespaceSelector": {}, "resourceGroups": [{
                            "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                            "flavors": [{"name": "default-flavor", "resources": [
                                {"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "256Gi"},
                                {"name": "nvidia.com/gpu", "nominalQuota": gpus}]}]}], **extra}})
        objects.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                        "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": name}})
    return objects


def until(check: Any, timeout: float = 60, what: str = "") -> Any:
    """Poll ``check()`` until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what or check}"
        time.sleep(0.1)

"""A ClusterQueue as people read it: quota per flavor and resource as quantities, policies, LocalQueues.

``millpond queue list|get`` prints it and the web UI's Queues page shows it, from the same
dict, so both say the same. Amounts are Kubernetes quantities a user writes (``1500m`` CPU,
``32Gi`` memory, ``4`` GPUs), not the records' milli-units.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from millpond.quantities import Format, Quantity
from millpond.scheduling.queues.model import MEMORY, ClusterQueue
from millpond.scheduling.queues.specs import QueueObjects

NOT_TRACKED = "usage and pending workloads are not shown: this millpond has no workload store yet"


def amount(resource: str, milli: int) -> str:
    """Milli-units as the quantity a user writes: memory in binary units, the rest in decimal ones."""
    unit = Format.BINARY_SI if resource in (MEMORY, "ephemeral-storage") else Format.DECIMAL_SI
    return str(Quantity(Fraction(milli, 1000), unit))


def quota_rows(queue: ClusterQueue) -> list[dict[str, Any]]:
    """One row per flavor and resource: nominal quota and the limits set, as quantities."""
    rows = []
    for group in queue.resource_groups:
        for flavor in group.flavors:
            for quota in flavor.resources:
                row: dict[str, Any] = {"flavor": flavor.flavor, "resource": quota.name,
                                       "nominalQuota": amount(quota.name, quota.nominal)}
                for key, limit in (("borrowingLimit", quota.borrowing_limit), ("lendingLimit", quota.lending_limit)):
                    if limit is not None:
                        row[key] = amount(quota.name, limit)
                rows.append(row)
    return rows


def nominal_totals(queue: ClusterQueue) -> dict[str, str]:
    """Each resource's nominal quota summed over the queue's flavors."""
    sums: dict[str, int] = {}
    for group in queue.resource_groups:
        for flavor in group.flavors:
            for quota in flavor.resources:
                sums[quota.name] = sums.get(quota.name, 0) + quota.nominal
    return {name: amount(name, total) for name, total in sums.items()}


def queue_view(queue: ClusterQueue, objects: QueueObjects) -> dict[str, Any]:
    """The ClusterQueue with the LocalQueues (``namespace/name``) that send workloads to it."""
    local = sorted(f"{namespace}/{name}" for (namespace, name), lq in objects.local_queues.items()
                   if lq.cluster_queue == queue.name)
    return {"name": queue.name, "cohort": queue.cohort or "", "queueingStrategy": queue.queueing_strategy.value,
            "preemption": {"withinClusterQueue": queue.preemption.within_cluster_queue.value,
                           "reclaimWithinCohort": queue.preemption.reclaim_within_cohort.value},
            "stopPolicy": queue.stop_policy.value, "localQueues": local, "quota": quota_rows(queue),
            "nominal": nominal_totals(queue)}


def queue_views(objects: QueueObjects) -> list[dict[str, Any]]:
    """Every ClusterQueue's view, by name."""
    return [queue_view(queue, objects) for _, queue in sorted(objects.cluster_queues.items())]

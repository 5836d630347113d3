"""Each ClusterQueue's quota beside what its workloads hold, and who waits in it: one read for every view.

``/metrics`` (Kueue's own metric names), ``millpond queue list/get`` and the UI's Queues page
show the same numbers, so they come from one place: the applied Kueue objects and the workloads
table, read without the admission lock (a view may be one cycle old, never inconsistent with
itself). Usage counts workloads that hold quota — admitted, and evicted ones not yet stopped —
as Kueue's ``cluster_queue_resource_usage`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from millpond.scheduling.queues.cycle import load_objects, workload_of
from millpond.scheduling.queues.model import ClusterQueue, Workload, WorkloadState
from millpond.settings import Settings
from millpond.store.workloads import WorkloadStore

_HOLDING = (WorkloadState.ADMITTED, WorkloadState.EVICTED)
_ACTIVE = ("Pending", "Admitted", "Evicted")


@dataclass(frozen=True)
class ResourceUsage:
    flavor: str
    resource: str
    nominal: int  # milli-units
    used: int  # milli-units, by workloads holding quota in this queue
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True)
class QueueUsage:
    name: str
    cohort: str | None
    strategy: str
    resources: tuple[ResourceUsage, ...]
    admitted: tuple[Workload, ...]  # holding quota (Evicted ones included, until they have stopped)
    pending: tuple[Workload, ...]  # in queue order: position 0 first

    @property
    def pending_count(self) -> int:
        return len(self.pending)


def _resources(queue: ClusterQueue, holders: list[Workload]) -> tuple[ResourceUsage, ...]:
    rows = []
    for group in queue.resource_groups:
        for flavor in group.flavors:
            for quota in flavor.resources:
                used = sum(w.requests.get(quota.name, 0) for w in holders if w.flavors.get(quota.name) == flavor.flavor)
                rows.append(ResourceUsage(flavor.flavor, quota.name, quota.nominal, used,
                                          quota.borrowing_limit, quota.lending_limit))
    return tuple(rows)


def queue_usage(settings: Settings, only: str | None = None) -> list[QueueUsage]:
    """Every ClusterQueue (or ``only`` that one), by name, with its usage and its pending workloads."""
    objects = load_objects(settings)
    workloads = [workload_of(r) for r in WorkloadStore(settings).list(states=_ACTIVE)]
    local_to_cluster = {key: local.cluster_queue for key, local in objects.local_queues.items()}
    result = []
    for name in sorted(objects.cluster_queues):
        if only is not None and name != only:
            continue
        queue = objects.cluster_queues[name]
        holders = [w for w in workloads if w.state in _HOLDING and w.cluster_queue == name]
        waiting = [w for w in workloads if w.state == WorkloadState.PENDING
                   and local_to_cluster.get((w.namespace, w.queue)) == name]
        waiting.sort(key=lambda w: (w.position if w.position is not None else len(waiting), w.created))
        result.append(QueueUsage(name=name, cohort=queue.cohort, strategy=queue.queueing_strategy.value,
                                 resources=_resources(queue, holders), admitted=tuple(holders),
                                 pending=tuple(waiting)))
    return result

"""A ClusterQueue as people read it: quota and usage per flavor and resource, who holds it, who waits and why.

``millpond queue list|get`` prints it and the web UI's Queues page shows it, from the same
dict, so both say the same. Amounts are Kubernetes quantities a user writes (``1500m`` CPU,
``32Gi`` memory, ``4`` GPUs: ``render.amount``), not the records' milli-units.

Usage is what the workloads holding quota in the queue (admitted, or evicted and not stopped
yet) were assigned, per flavor; a pending workload belongs to the ClusterQueue its LocalQueue
points at, shown with the reason and position the last admission cycle wrote.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from millpond.scheduling.queues.cycle import reclaim_dead, workload_of
from millpond.scheduling.queues.model import ClusterQueue, Workload, WorkloadState
from millpond.scheduling.queues.objects import stored_objects
from millpond.scheduling.queues.render import amount, who
from millpond.scheduling.queues.specs import QueueObjects
from millpond.store.resources import ResourceStore
from millpond.store.workloads import WorkloadStore

if TYPE_CHECKING:
    from millpond.settings import Settings

HOLDING = (WorkloadState.ADMITTED, WorkloadState.EVICTED)  # they hold quota until they have stopped


def _usage(holding: list[Workload]) -> dict[tuple[str, str], int]:
    """(flavor, resource) -> milli-units assigned to ``holding``, the workloads holding quota in a queue."""
    used: dict[tuple[str, str], int] = {}
    for workload in holding:
        for resource, flavor in workload.flavors.items():
            used[(flavor, resource)] = used.get((flavor, resource), 0) + workload.requests.get(resource, 0)
    return used


def quota_rows(queue: ClusterQueue, used: dict[tuple[str, str], int]) -> list[dict[str, Any]]:
    """One row per flavor and resource: nominal quota, the limits set and what is in use, as quantities."""
    rows = []
    for group in queue.resource_groups:
        for flavor in group.flavors:
            for quota in flavor.resources:
                row: dict[str, Any] = {"flavor": flavor.flavor, "resource": quota.name,
                                       "nominalQuota": amount(quota.name, quota.nominal),
                                       "used": amount(quota.name, used.get((flavor.flavor, quota.name), 0))}
                for key, limit in (("borrowingLimit", quota.borrowing_limit), ("lendingLimit", quota.lending_limit)):
                    if limit is not None:
                        row[key] = amount(quota.name, limit)
                rows.append(row)
    return rows


def _totals(queue: ClusterQueue, used: dict[tuple[str, str], int]) -> dict[str, dict[str, str]]:
    """Each resource's nominal quota and usage summed over the queue's flavors."""
    sums: dict[str, list[int]] = {}
    for group in queue.resource_groups:
        for flavor in group.flavors:
            for quota in flavor.resources:
                total = sums.setdefault(quota.name, [0, 0])
                total[0] += quota.nominal
                total[1] += used.get((flavor.flavor, quota.name), 0)
    return {name: {"nominal": amount(name, nominal), "used": amount(name, in_use)}
            for name, (nominal, in_use) in sums.items()}


def _workload(workload: Workload) -> dict[str, Any]:
    shown: dict[str, Any] = {"workload": who(workload), "kind": workload.kind.value,
                             "namespace": workload.namespace, "name": workload.name, "user": workload.user,
                             "localQueue": workload.queue, "priority": workload.priority,
                             "requests": {key: amount(key, value) for key, value in sorted(workload.requests.items())
                                          if key != "pods"}}
    if workload.state is WorkloadState.PENDING:
        shown.update(position=workload.position, reason=workload.reason)
    else:
        shown.update(state=workload.state.value, flavors=dict(workload.flavors))
    return shown


def members(queue: ClusterQueue, objects: QueueObjects,
            workloads: Iterable[Workload]) -> tuple[list[Workload], list[Workload]]:
    """The workloads holding quota in ``queue``, and those waiting for it in queue order (position 0 first).

    One answer for every view: ``queue list/get``, the Queues page and ``/metrics``."""
    local = {key for key, lq in objects.local_queues.items() if lq.cluster_queue == queue.name}
    holding, pending = [], []
    for workload in workloads:
        if workload.state in HOLDING and workload.cluster_queue == queue.name:
            holding.append(workload)
        elif workload.state is WorkloadState.PENDING and (workload.namespace, workload.queue) in local:
            pending.append(workload)
    pending.sort(key=lambda w: (w.position is None, w.position or 0, w.created))
    return holding, pending


def usage_of(holding: list[Workload]) -> dict[tuple[str, str], int]:
    """(flavor, resource) -> milli-units assigned to the workloads holding quota in a queue."""
    return _usage(holding)


def queue_view(queue: ClusterQueue, objects: QueueObjects, workloads: Iterable[Workload]) -> dict[str, Any]:
    """The ClusterQueue with its LocalQueues (``namespace/name``), usage, holders and pending workloads."""
    local = {key for key, lq in objects.local_queues.items() if lq.cluster_queue == queue.name}
    holding, pending = members(queue, objects, workloads)
    used = _usage(holding)
    return {"name": queue.name, "cohort": queue.cohort or "", "queueingStrategy": queue.queueing_strategy.value,
            "preemption": {"withinClusterQueue": queue.preemption.within_cluster_queue.value,
                           "reclaimWithinCohort": queue.preemption.reclaim_within_cohort.value},
            "stopPolicy": queue.stop_policy.value, "localQueues": sorted(f"{ns}/{name}" for ns, name in local),
            "quota": quota_rows(queue, used), "totals": _totals(queue, used),
            "admittedWorkloads": len(holding), "pendingWorkloads": len(pending),
            "admitted": [_workload(w) for w in holding], "pending": [_workload(w) for w in pending]}


def queue_views(objects: QueueObjects, workloads: Iterable[Workload]) -> list[dict[str, Any]]:
    """Every ClusterQueue's view, by name."""
    live = list(workloads)
    return [queue_view(queue, objects, live) for _, queue in sorted(objects.cluster_queues.items())]


def live_workloads(settings: Settings) -> list[Workload]:
    """Every workload not finished, from the metadata database's workload table, after the quota of
    holders that are gone was reclaimed (``cycle.reclaim_dead``): a read never counts a dead workload."""
    reclaim_dead(settings)
    states = [state.value for state in (WorkloadState.PENDING, *HOLDING)]
    return [workload_of(record) for record in WorkloadStore(settings).list(states=states)]


def current(settings: Settings) -> tuple[QueueObjects, list[Workload]]:
    """The queueing objects applied and the live workloads, as ``queue list`` and the Queues page show them."""
    return stored_objects(ResourceStore(settings)), live_workloads(settings)


Usage = dict[tuple[str, str], int]  # (flavor, resource) -> milli-units


def _flavors_usage(used: Usage, nominal: Usage | None) -> list[dict[str, Any]]:
    """Kueue's ``status.flavorsUsage``: per flavor, each resource's total in use (and, for a ClusterQueue,
    how much of it is borrowed beyond the nominal quota)."""
    flavors: dict[str, list[dict[str, Any]]] = {}
    for (flavor, resource), total in sorted(used.items()):
        entry: dict[str, Any] = {"name": resource, "total": amount(resource, total)}
        if nominal is not None:
            entry["borrowed"] = amount(resource, max(0, total - nominal.get((flavor, resource), 0)))
        flavors.setdefault(flavor, []).append(entry)
    return [{"name": flavor, "resources": resources} for flavor, resources in flavors.items()]


def statuses(objects: QueueObjects, workloads: Iterable[Workload]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Kueue's status of every ClusterQueue (key ``("ClusterQueue", "", name)``) and LocalQueue
    (``("LocalQueue", namespace, name)``): pending, reserving and admitted workloads, flavors' usage."""
    live = list(workloads)
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    for name, queue in objects.cluster_queues.items():
        holding = [w for w in live if w.state in HOLDING and w.cluster_queue == name]
        used = _usage(holding)
        nominal = {(flavor.flavor, quota.name): quota.nominal for group in queue.resource_groups
                   for flavor in group.flavors for quota in flavor.resources}
        found[("ClusterQueue", "", name)] = {
            "pendingWorkloads": sum(1 for w in live if w.state is WorkloadState.PENDING
                                    and getattr(objects.local_queues.get((w.namespace, w.queue)), "cluster_queue",
                                                None) == name),
            "reservingWorkloads": len(holding),
            "admittedWorkloads": sum(1 for w in holding if w.state is WorkloadState.ADMITTED),
            "flavorsUsage": _flavors_usage(used, nominal)}
    found.update(local_statuses(((namespace, name, local.cluster_queue)
                                 for (namespace, name), local in objects.local_queues.items()), live))
    return found


def local_statuses(queues: Iterable[tuple[str, str, str]], workloads: Iterable[Workload],
                   ) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Kueue's status of the LocalQueues given as (namespace, name, ClusterQueue): what a LocalQueue's status
    needs is its workloads only, so a read of some LocalQueues loads no other queueing object."""
    by_queue: dict[tuple[str, str], list[Workload]] = {}
    for workload in workloads:
        by_queue.setdefault((workload.namespace, workload.queue), []).append(workload)
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    for namespace, name, cluster_queue in queues:
        mine = by_queue.get((namespace, name), [])
        holding = [w for w in mine if w.state in HOLDING and w.cluster_queue == cluster_queue]
        found[("LocalQueue", namespace, name)] = {
            "pendingWorkloads": sum(1 for w in mine if w.state is WorkloadState.PENDING),
            "reservingWorkloads": len(holding),
            "admittedWorkloads": sum(1 for w in holding if w.state is WorkloadState.ADMITTED),
            "flavorsUsage": _flavors_usage(_usage(holding), None)}
    return found

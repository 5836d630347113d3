"""A Job labelled ``kueue.x-k8s.io/queue-name`` as one Kueue workload, seen from its controller (the holder).

As Kueue's batch/Job integration does: the workload has one pod set of ``min(parallelism,
completions)`` pods, each asking what the pod template asks (its requests are the total); its
priority is the ``kueue.x-k8s.io/priority-class`` label's WorkloadPriorityClass; the Job stays
suspended until the workload is admitted, and an evicted workload (preempted, its queue stopped)
suspends the Job again, its pods stopped, until it is admitted again. The controller never blocks
here: :meth:`JobWorkload.poll` runs an admission cycle at most every ``cycle.CYCLE_INTERVAL`` and says
where the workload stands.

Partial admission (``kueue.x-k8s.io/job-min-parallelism``): while the whole pod set waits, Kueue looks
for the most pods, down to that minimum, that it can admit now (a binary search over the count) and
admits the workload with that many; the Job then runs at most that many pods at once. Here the
search asks the admission decision itself (``admission.decide``, pure) over the objects and
workloads as stored, with this workload's count changed, nothing written; the workload found to fit
is submitted again with that count and its old place in the queue (its creation time), and the next
cycle admits it. Simplified: the Job's shown ``spec.parallelism`` stays the one applied (Kueue writes
the admitted count there); its pods at once are the admitted count.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from millpond.errors import MillpondError, UserError
from millpond.scheduling.ledger import Request
from millpond.scheduling.queues import cycle
from millpond.scheduling.queues.admission import PODS, decide
from millpond.scheduling.queues.model import Snapshot, WorkloadKind, WorkloadState
from millpond.scheduling.queues.submission import requests
from millpond.settings import Settings
from millpond.store.workloads import WorkloadStore


@dataclass(frozen=True)
class Standing:
    """Where the workload stands: admitted, or not (with Kueue's reason), or evicted (with its message)."""

    admitted: bool
    reason: str = ""
    message: str = ""
    evicted: bool = False
    pods: int = 0  # admitted: how many pods at once (fewer than asked after a partial admission)


class JobWorkload:
    """The workload of one queued Job; its holder is the controller process."""

    def __init__(self, settings: Settings, *, name: str, namespace: str, user: str, queue: str, priority: str,
                 pods: int, per_pod: Request, min_pods: int | None = None) -> None:
        self.settings = settings
        self.store = WorkloadStore(settings)
        self.name, self.namespace, self.user, self.queue, self.priority = name, namespace, user, queue, priority
        self.wanted = pods
        self.pods = pods  # the count of the workload submitted (fewer after a partial admission)
        self.min_pods = min(min_pods, pods) if min_pods else None
        self.per_pod = per_pod
        self.id = ""
        self.next_cycle = 0.0
        self.next_search = 0.0

    def requests(self, pods: int) -> dict[str, int]:
        return requests(self.per_pod.cpu_millis * pods, self.per_pod.memory_bytes * pods, self.per_pod.gpus * pods)

    def _submit(self, created: float | None = None) -> str:
        """Record the workload PENDING with ``self.pods`` pods (``created``: the place in the queue it keeps)."""
        priority = cycle.priority_of(cycle.load_objects(self.settings), self.priority or None)
        return self.store.submit(
            kind=WorkloadKind.JOB.value, name=self.name, namespace=self.namespace, user=self.user, queue=self.queue,
            requests={PODS: self.pods * 1000, **self.requests(self.pods)}, priority=priority,
            priority_class=self.priority or None, pod_count=self.pods, holder=cycle.own_holder(), created=created).id

    def poll(self) -> Standing:
        """Submit the workload if not yet done, run a cycle when one is due, and say where it stands."""
        if not self.id:
            try:
                self.pods = self.wanted
                self.id = self._submit()
            except UserError as exc:  # its priority class is missing: Kueue cannot build the workload
                return Standing(False, "WorkloadPriorityClassNotFound", str(exc))
        if time.monotonic() >= self.next_cycle:
            cycle.run_cycle(self.settings)
            self.next_cycle = time.monotonic() + cycle.CYCLE_INTERVAL
        record = self.store.get(self.id)
        if record is None or record.state == WorkloadState.FINISHED.value:
            self.id = ""  # finished under it (its queue's objects reset): submitted again next time
            return Standing(False, "Pending", "the workload ended; submitting it again")
        if record.state == WorkloadState.ADMITTED.value:
            return Standing(True, "Admitted", f"admitted by ClusterQueue {record.cluster_queue}", pods=self.pods)
        if record.state == WorkloadState.EVICTED.value:
            return Standing(False, "Evicted", record.reason or "evicted", evicted=True)
        place = "" if record.position is None or "doesn't exist" in record.reason else \
            f" ({record.position} ahead of it in its ClusterQueue)"
        if self.min_pods is not None and self.pods > self.min_pods and time.monotonic() >= self.next_search:
            self.next_search = time.monotonic() + 2 * cycle.CYCLE_INTERVAL
            fewer = self._most_that_fit(record.created)
            if fewer is not None:
                return Standing(False, "Pending", f"partial admission: {fewer} of {self.wanted} pods fit its quota; "
                                f"submitted again with {fewer}")
        return Standing(False, "Pending", f"{record.reason}{place}")

    def _fits(self, pods: int) -> bool:
        """Whether an admission cycle now would admit this workload with ``pods`` pods (nothing written)."""
        objects = cycle.load_objects(self.settings)
        states = [WorkloadState.PENDING.value, WorkloadState.ADMITTED.value, WorkloadState.EVICTED.value]
        workloads = []
        for record in self.store.list(states=states):
            workload = cycle.workload_of(record)
            if record.id == self.id:
                workload = dataclasses.replace(workload, pod_count=pods,
                                               requests={PODS: pods * 1000, **self.requests(pods)})
            workloads.append(workload)
        snapshot = Snapshot(cluster_queues=objects.cluster_queues, local_queues=objects.local_queues,
                            cohorts=objects.cohorts, flavors=objects.flavors, workloads=tuple(workloads))
        return any(admission.workload_id == self.id for admission in decide(snapshot, time.time()).admitted)

    def _most_that_fit(self, created: float) -> int | None:
        """Kueue's partial admission: the most pods from ``min_pods`` to fewer than asked that fit now (a binary
        search, as Kueue's), the workload submitted again with that many in its place; None if none fits."""
        assert self.min_pods is not None
        low, high, best = self.min_pods, self.pods - 1, None
        while low <= high:
            middle = (low + high) // 2
            if self._fits(middle):
                best, low = middle, middle + 1
            else:
                high = middle - 1
        if best is None:
            return None
        self.store.finish(self.id, f"partial admission: submitted again with {best} pods")
        self.pods = best
        self.id = self._submit(created)
        self.next_cycle = 0.0
        return best

    def requeue(self) -> None:
        """Its pods stopped after an eviction: back to its place in its queue."""
        if self.id:
            cycle.release(self.settings, self.id, stopped=True)

    def finish(self, reason: str) -> None:
        if self.id:
            try:
                cycle.release(self.settings, self.id, reason=reason)
            except MillpondError:
                pass  # already finished by a cycle that found it done
            self.id = ""

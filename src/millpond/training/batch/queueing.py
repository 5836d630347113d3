"""A Job labelled ``kueue.x-k8s.io/queue-name`` as one Kueue workload, seen from its controller (the holder).

As Kueue's batch/Job integration does: the workload has one pod set of ``min(parallelism,
completions)`` pods, each asking what the pod template asks (its requests are the total); its
priority is the ``kueue.x-k8s.io/priority-class`` label's WorkloadPriorityClass; the Job stays
suspended until the workload is admitted, and an evicted workload (preempted, its queue stopped)
suspends the Job again, its pods stopped, until it is admitted again. The controller never blocks
here: :meth:`JobWorkload.poll` runs an admission cycle at most every ``cycle.CYCLE_INTERVAL`` and says
where the workload stands.

Simplified: ``kueue.x-k8s.io/job-min-parallelism`` (partial admission) is kept on the Job but the
workload is admitted whole; Kueue would admit fewer pods, down to that number, when quota is short.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from millpond.errors import MillpondError, UserError
from millpond.scheduling.ledger import Request
from millpond.scheduling.queues import cycle
from millpond.scheduling.queues.model import WorkloadKind, WorkloadState
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


class JobWorkload:
    """The workload of one queued Job; its holder is the controller process."""

    def __init__(self, settings: Settings, *, name: str, namespace: str, user: str, queue: str, priority: str,
                 pods: int, per_pod: Request) -> None:
        self.settings = settings
        self.store = WorkloadStore(settings)
        self.name, self.namespace, self.user, self.queue, self.priority = name, namespace, user, queue, priority
        self.pods = pods
        self.per_pod = per_pod
        self.id = ""
        self.next_cycle = 0.0

    def poll(self) -> Standing:
        """Submit the workload if not yet done, run a cycle when one is due, and say where it stands."""
        if not self.id:
            try:
                self.id = cycle.submit(
                    self.settings, kind=WorkloadKind.JOB.value, name=self.name, namespace=self.namespace,
                    user=self.user, queue=self.queue, pod_count=self.pods, priority_class=self.priority or None,
                    requests=requests(self.per_pod.cpu_millis * self.pods, self.per_pod.memory_bytes * self.pods,
                                      self.per_pod.gpus * self.pods)).id
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
            return Standing(True, "Admitted", f"admitted by ClusterQueue {record.cluster_queue}")
        if record.state == WorkloadState.EVICTED.value:
            return Standing(False, "Evicted", record.reason or "evicted", evicted=True)
        place = "" if record.position is None or "doesn't exist" in record.reason else \
            f" ({record.position} ahead of it in its ClusterQueue)"
        return Standing(False, "Pending", f"{record.reason}{place}")

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

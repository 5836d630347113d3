"""A training job as one Kueue workload: all its instances are admitted together, as Kueue admits a job's pods.

The workload's requests are the job's total over every instance (``JobSpec.total``: what the
supervisor then takes from the machine's ledger), its project is the job's namespace, its
priority the value of the WorkloadPriorityClass it names (0 when it names none), and its place
in FIFO order the moment its supervisor submits it (as Kueue's Workload is created by its job
controller once the job exists). A job without a queue is no workload: it takes the ledger alone, as Kueue leaves a job
without the ``kueue.x-k8s.io/queue-name`` label alone (``manageJobsWithoutQueueName: false``).

:class:`QueuedJob` is what the supervisor holds: submit and wait (saying why and where it
waits), watch for eviction while the job runs, go back to the queue after an eviction, finish.
The supervisor process is the workload's holder: if it is killed, the next admission cycle
anywhere finishes the workload and gives its quota to the next one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from millpond.errors import UserError
from millpond.scheduling.queues import cycle
from millpond.scheduling.queues.model import Workload, WorkloadKind, WorkloadState
from millpond.scheduling.queues.submission import ANONYMOUS, priority_class, requests
from millpond.settings import Settings, load_settings
from millpond.store.training import JobRecord
from millpond.store.workloads import WorkloadStore
from millpond.training.spec import JobSpec

RETRY_S = 1.0  # how often a job whose WorkloadPriorityClass is missing looks for it again


def job_workload(job: JobRecord, spec: JobSpec, holder: str = "") -> Workload | None:
    """The workload ``job`` is, as the model's record, or None when it names no queue."""
    if not spec.queue:
        return None
    total = spec.total
    shared = sum(share.memory_bytes for share in total.shares)  # --gpumemory: gpushare's aliyun.com/gpu-mem
    found = priority_class(spec.priority) if spec.priority else None
    return Workload(
        id=job.uid, kind=WorkloadKind.JOB, name=job.name, namespace=job.namespace, user=spec.user or ANONYMOUS,
        queue=spec.queue, requests=requests(total.cpu_millis, total.memory_bytes, total.gpus, shared),
        priority=found.value if found else 0, priority_class=spec.priority or None,
        pod_count=spec.instance_count, created=job.created_at.timestamp(), holder=holder,
    )


# (reason, message, place): Kueue's reason for the job's status, its message, and how many are ahead ("" if unknown)
Waiting = Callable[[str, str, str], None]


class QueuedJob:
    """The workload of one queued job, seen from its supervisor (the holder)."""

    def __init__(self, job: JobRecord, spec: JobSpec, settings: Settings | None = None) -> None:
        self.settings = settings or load_settings()
        self.store = WorkloadStore(self.settings)
        self.model = job_workload(job, spec)
        if self.model is None:
            raise ValueError(f"job {job.namespace}/{job.name} names no queue")
        self.id = ""

    def _submit(self) -> None:
        """Record the workload PENDING (UserError, nothing stored, while its priority class is missing)."""
        model = self.model
        assert model is not None
        self.id = cycle.submit(self.settings, kind=model.kind.value, name=model.name, namespace=model.namespace,
                               user=model.user, queue=model.queue, requests=model.requests,
                               priority_class=model.priority_class, pod_count=model.pod_count).id

    def admit(self, stopping: threading.Event, waiting: Waiting) -> bool:
        """Wait until the job's workload is admitted (False when ``stopping`` is set first), telling
        ``waiting`` why it waits each time the reason or its place changes."""
        while not self.id:
            try:
                self._submit()
            except UserError as exc:  # Kueue cannot build the Workload: the job waits, saying so
                waiting("WorkloadPriorityClassNotFound", str(exc), "")
                if stopping.wait(RETRY_S):
                    return False

        def pending(reason: str, position: int | None) -> None:
            waiting("Pending", reason, "" if position is None else f"{position} ahead of it in its ClusterQueue")

        return cycle.wait_for_admission(self.store, self.id, on_pending=pending, cancel=stopping) is not None

    def evicted(self) -> str | None:
        """Kueue's message when the workload was told to stop (preempted, its queue drained), else None."""
        record = self.store.get(self.id) if self.id else None
        if record is None or record.state != WorkloadState.EVICTED.value:
            return None
        return record.reason or "evicted"

    def requeue(self) -> None:
        """Its processes stopped after an eviction: back to its place in its queue (quota freed, next one in)."""
        cycle.release(self.settings, self.id, stopped=True)

    def finish(self, reason: str) -> None:
        if self.id:
            cycle.release(self.settings, self.id, reason=reason)

"""A training job as one Kueue workload: all its instances are admitted together, as Kueue admits a job's pods.

The workload's requests are the job's total over every instance (``JobSpec.total``: what the
supervisor then takes from the machine's ledger), its project is the job's namespace, and its
priority is the value of the WorkloadPriorityClass it names (0 when it names none). A job
without a queue is no workload: it takes the ledger alone, as Kueue leaves a job without the
``kueue.x-k8s.io/queue-name`` label alone (``manageJobsWithoutQueueName: false``).
"""

from __future__ import annotations

from millpond.scheduling.queues.model import Workload, WorkloadKind
from millpond.scheduling.queues.submission import ANONYMOUS, priority_class, requests
from millpond.store.training import JobRecord
from millpond.training.spec import JobSpec


def job_workload(job: JobRecord, spec: JobSpec, holder: str = "") -> Workload | None:
    """The workload ``job`` is (its id: the job's uid), or None when it names no queue."""
    if not spec.queue:
        return None
    total = spec.total
    found = priority_class(spec.priority) if spec.priority else None
    return Workload(
        id=job.uid, kind=WorkloadKind.JOB, name=job.name, namespace=job.namespace, user=spec.user or ANONYMOUS,
        queue=spec.queue, requests=requests(total.cpu_millis, total.memory_bytes, total.gpus),
        priority=found.value if found else 0, priority_class=spec.priority or None,
        pod_count=spec.instance_count, created=job.created_at.timestamp(), holder=holder,
    )

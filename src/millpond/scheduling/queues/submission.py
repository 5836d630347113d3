"""What every front end checks and records when it makes a workload: queue, priority class, user, requests.

A training job (``arena submit``, a Kubeflow manifest, the SDK) and a pipeline task (``millpond
run``, ``POST /runs``) name the same three things Kueue reads from a job's labels:

- its LocalQueue (``--queue``, the ``kueue.x-k8s.io/queue-name`` label). An unknown queue is
  accepted: the workload waits, saying so, as Kueue leaves such a job suspended with a
  reason; a queue may be created later;
- its WorkloadPriorityClass (``-p/--priority``, the ``kueue.x-k8s.io/priority-class`` label).
  ``arena submit -p NAME`` refuses a name that does not exist at once, as Arena's own submit
  does (it looks the PriorityClass up before it creates anything); a *manifest* naming one is
  accepted and waits (Kueue's controller cannot build the Workload and reports
  ``WorkloadPriorityClassNotFound``; its webhook does not refuse the job);
- who submitted it: the OS user for the command line and the SDK, the API caller for the
  server (``kubeflow-userid``, as KFP's multi-user mode reads it).

Requests are the workload's total in milli-units (``model.milli``), whatever asked for them.
"""

from __future__ import annotations

import getpass
import re

from millpond.errors import UserError
from millpond.scheduling.queues import specs
from millpond.scheduling.queues.model import CPU, GPU, GPU_MEMORY, MEMORY, WorkloadPriorityClass
from millpond.store.resources import ResourceStore

ANONYMOUS = "anonymous"  # KFP's name for a caller no proxy identified
PRIORITY_KIND = "WorkloadPriorityClass"
CLUSTER_NAMESPACE = "default"  # where the resource store keeps cluster-scoped objects (as training runtimes)
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")  # a DNS-1123 subdomain


def os_user() -> str:
    """Who runs this process, as the OS names them (``getpass``: $LOGNAME/$USER, else the password database)."""
    try:
        return getpass.getuser() or ANONYMOUS
    except (KeyError, OSError):  # a uid with no name (a container's arbitrary uid)
        return ANONYMOUS


def check_queue_name(name: str, flag: str = "--queue") -> str:
    """A LocalQueue's name as Kubernetes allows it (it need not exist: the workload waits for it)."""
    if name and (len(name) > 253 or not _NAME.match(name)):
        raise UserError(f"{flag} {name!r} is not a valid queue name: lower case letters, digits, '-' and '.'")
    return name


def priority_class(name: str, store: ResourceStore | None = None) -> WorkloadPriorityClass | None:
    """The applied WorkloadPriorityClass ``name``, or None."""
    found = (store or ResourceStore()).get(PRIORITY_KIND, name, CLUSTER_NAMESPACE)
    if found is None:
        return None
    try:
        return specs.priority_class(name, found.manifest)
    except UserError:  # stored before it was checked: as good as absent
        return None


def check_priority(name: str, flag: str = "--priority", store: ResourceStore | None = None) -> str:
    """``name`` when it is "" or an applied WorkloadPriorityClass; else one UserError line, nothing stored."""
    if not name:
        return name
    if len(name) > 253 or not _NAME.match(name):
        raise UserError(f"{flag} {name!r} is not a valid priority class name: lower case letters, digits, '-', '.'")
    if priority_class(name, store) is None:
        raise UserError(f"{flag} {name}: no WorkloadPriorityClass {name} "
                        "(millpond get workloadpriorityclasses; apply one with millpond apply -f)")
    return name


def requests(cpu_millis: int = 0, memory_bytes: int = 0, gpus: int = 0, gpu_memory_bytes: int = 0) -> dict[str, int]:
    """A total request in milli-units (``model.milli``), zeros left out: CPU millicores, memory bytes, whole
    GPUs and GPU shares' memory (``aliyun.com/gpu-mem``, gpushare's GiB, rounded up to a thousandth)."""
    amounts = {CPU: cpu_millis, MEMORY: memory_bytes * 1000, GPU: gpus * 1000,
               GPU_MEMORY: -(-gpu_memory_bytes * 1000 // 2**30)}
    return {name: amount for name, amount in amounts.items() if amount}


def eviction_reason(message: str) -> str:
    """Kueue's reason for an eviction (the Evicted condition's), from the message admission wrote."""
    if message.startswith("Preempted"):
        return "Preempted"
    if message.startswith("ClusterQueue"):
        return "ClusterQueueStopped"
    if message.startswith("LocalQueue"):
        return "LocalQueueStopped"
    return "Evicted"

"""Kueue's objects and workloads as typed records: what manifests become and what admission reads.

The vocabulary is Kueue's (``kueue.x-k8s.io/v1beta2``, ``v1beta1`` still served), so a Kueue
user recognises every field: a ClusterQueue holds quotas per ResourceFlavor in
``resourceGroups``, borrows unused quota from the other queues of its Cohort up to its
``borrowingLimit`` and lends at most ``lendingLimit`` of its own; a LocalQueue is how a
namespace (here: a project) reaches a ClusterQueue; a WorkloadPriorityClass gives a workload
its priority. A Cohort (v1beta2) may itself hold quota and have a parent, so a project's
cohort can cap what its users' ClusterQueues take together.

Amounts are integers in *milli-units* of the resource's Kubernetes unit, whatever the resource:
``cpu: 500m`` is 500, ``memory: 1Gi`` is 1073741824000, ``nvidia.com/gpu: 1`` is 1000. One unit
for all keeps the arithmetic exact (``quantities`` parses) and lets a fractional GPU (``0.5``) be
a plain integer. :func:`milli` converts.

The records are the boundary between the parts: ``queues.manifests`` makes them from YAML,
``queues.admission`` decides from a :class:`Snapshot` of them, and the workload store keeps
:class:`Workload` rows. Nothing here does I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from millpond.quantities import parse_quantity

GROUP = "kueue.x-k8s.io"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # a job's LocalQueue, on the job's metadata.labels
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"  # its WorkloadPriorityClass

CPU, MEMORY, GPU = "cpu", "memory", "nvidia.com/gpu"
GPU_MEMORY = "aliyun.com/gpu-mem"  # Arena's gpushare resource (GiB of one GPU's memory): ``--gpumemory``


def milli(quantity: object, what: str = "") -> int:
    """A Kubernetes quantity (``500m``, ``2``, ``1Gi``) as an integer count of milli-units."""
    return parse_quantity(quantity, what).milli_value()


# --- the queueing objects ------------------------------------------------------------------
@dataclass(frozen=True)
class ResourceQuota:
    """One resource's quota within one flavor of a ClusterQueue (or Cohort)."""

    name: str  # "cpu", "memory", "nvidia.com/gpu", ...
    nominal: int  # milli-units
    borrowing_limit: int | None = None  # None: may borrow all its cohort lends
    lending_limit: int | None = None  # None: lends all its unused nominal quota


@dataclass(frozen=True)
class FlavorQuotas:
    flavor: str  # a ResourceFlavor's name
    resources: tuple[ResourceQuota, ...]


@dataclass(frozen=True)
class ResourceGroup:
    """Resources that are assigned a flavor together (``coveredResources``), flavors in order of preference."""

    covered: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


class QueueingStrategy(str, enum.Enum):
    STRICT_FIFO = "StrictFIFO"  # the head blocks the queue while it does not fit
    BEST_EFFORT_FIFO = "BestEffortFIFO"  # a workload that does not fit lets the next ones try


class PreemptionPolicy(str, enum.Enum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"  # withinClusterQueue only
    ANY = "Any"  # reclaimWithinCohort only


@dataclass(frozen=True)
class Preemption:
    """ClusterQueue ``spec.preemption``, with Kueue's defaults."""

    within_cluster_queue: PreemptionPolicy = PreemptionPolicy.NEVER
    reclaim_within_cohort: PreemptionPolicy = PreemptionPolicy.NEVER
    borrow_within_cohort: PreemptionPolicy = PreemptionPolicy.NEVER  # policy of borrowWithinCohort
    borrow_max_priority_threshold: int | None = None  # borrowWithinCohort.maxPriorityThreshold


@dataclass(frozen=True)
class FlavorFungibility:
    """What to do when a flavor needs borrowing or preemption: use it (Kueue's default) or try the next."""

    when_can_borrow: str = "MayStopSearch"  # v1beta2 spelling; v1beta1 "Borrow" means the same
    when_can_preempt: str = "TryNextFlavor"  # v1beta1 "Preempt" is v1beta2 "MayStopSearch"


class StopPolicy(str, enum.Enum):
    NONE = "None"
    HOLD = "Hold"  # admit nothing new
    HOLD_AND_DRAIN = "HoldAndDrain"  # and evict what is admitted


@dataclass(frozen=True)
class LabelSelector:
    """A namespaceSelector: ``None`` on the queue matches no namespace, an empty selector matches all."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    # (key, operator In|NotIn|Exists|DoesNotExist, values)
    match_expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    resource_groups: tuple[ResourceGroup, ...]
    cohort: str | None = None  # v1beta2 spec.cohortName, v1beta1 spec.cohort
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    preemption: Preemption = Preemption()
    # Kueue's default (null) admits no namespace; ``{}`` (an empty LabelSelector) admits all
    namespace_selector: LabelSelector | None = None
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    stop_policy: StopPolicy = StopPolicy.NONE


@dataclass(frozen=True)
class Cohort:
    """A v1beta2 Cohort object: quota of its own, and a parent (cohorts form a tree)."""

    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()


@dataclass(frozen=True)
class LocalQueue:
    name: str
    namespace: str
    cluster_queue: str
    stop_policy: StopPolicy = StopPolicy.NONE


@dataclass(frozen=True)
class ResourceFlavor:
    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)  # on Ray: the nodes it stands for


@dataclass(frozen=True)
class WorkloadPriorityClass:
    name: str
    value: int
    description: str = ""


# --- workloads ------------------------------------------------------------------------------
class WorkloadKind(str, enum.Enum):
    JOB = "job"  # a training job: all its instances are admitted together
    TASK = "task"  # a pipeline task


class WorkloadState(str, enum.Enum):
    PENDING = "Pending"  # waits for quota: ``reason`` says why, ``position`` where it stands
    ADMITTED = "Admitted"  # holds quota in ``cluster_queue``, with ``flavors`` assigned
    EVICTED = "Evicted"  # told to stop (preempted, its queue drained): quota held until it has stopped
    FINISHED = "Finished"  # done (or deleted, or its holder died): holds nothing


@dataclass(frozen=True)
class Workload:
    """One unit of admission. ``requests`` is the total of all its pods (instances), in milli-units."""

    id: str
    kind: WorkloadKind
    name: str  # the job's name, or the run id and task name
    namespace: str  # the project: the job's namespace, the run's experiment
    user: str  # who submitted it: the OS user, or the API caller
    queue: str  # its LocalQueue's name (in ``namespace``)
    requests: Mapping[str, int]
    priority: int = 0
    priority_class: str | None = None
    pod_count: int = 1
    created: float = 0.0  # epoch seconds: the FIFO order (a requeued workload keeps its place, as in Kueue)
    state: WorkloadState = WorkloadState.PENDING
    cluster_queue: str | None = None  # once admitted
    flavors: Mapping[str, str] = field(default_factory=dict)  # resource -> flavor, once admitted
    reason: str = ""  # why it waits, why it was evicted
    requeues: int = 0
    holder: str = ""  # the process that runs it: "PID:TICKS@MACHINE" (runners.processes)
    admitted_at: float = 0.0  # epoch seconds of its admission: preemption takes the most recently admitted first
    position: int | None = None  # while pending: its 0-based place in its ClusterQueue, as the last cycle saw it


@dataclass(frozen=True)
class Snapshot:
    """Everything one admission decision reads: the objects and every workload not FINISHED."""

    cluster_queues: Mapping[str, ClusterQueue]
    local_queues: Mapping[tuple[str, str], LocalQueue]  # (namespace, name)
    cohorts: Mapping[str, Cohort]
    flavors: Mapping[str, ResourceFlavor]
    workloads: tuple[Workload, ...]
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # for namespaceSelector


@dataclass(frozen=True)
class Admission:
    workload_id: str
    cluster_queue: str
    flavors: Mapping[str, str]  # resource -> flavor
    borrowing: bool = False


@dataclass(frozen=True)
class Eviction:
    workload_id: str
    reason: str  # "Preempted to accommodate a workload (UID: …) in the ClusterQueue" (Kueue's words)
    by: str  # the workload the room is made for


@dataclass(frozen=True)
class Pending:
    workload_id: str
    reason: str  # one line a user acts on: which quota, how much is free, who holds it
    position: int  # 0-based place in its ClusterQueue's order


@dataclass(frozen=True)
class Decision:
    """What one admission cycle does: who gets in, who is told to make room, why the rest wait."""

    admitted: tuple[Admission, ...] = ()
    evicted: tuple[Eviction, ...] = ()
    pending: tuple[Pending, ...] = ()

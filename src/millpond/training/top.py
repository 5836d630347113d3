"""``arena top job`` and ``arena top node``: GPUs asked for and handed out, as Arena counts them.

Arena reads both from the cluster: a job's requested GPUs from its pods' specs, a node's
allocated GPUs from the pods bound to it. Here the one node is this machine, its GPUs are what
the machine-wide ledger may hand out (``Ledger.capacity``; ``MILLPOND_FAKE_GPUS`` in tests), and
what is allocated is what the ledger's live grants hold — training jobs and pipeline tasks alike,
so ``top node`` shows a pipeline task holding a GPU even though ``top job`` cannot. GPU shares
(``--gpumemory``) are not counted as allocated GPUs (as Arena counts whole ones); ``top node -s``
shows each GPU's memory held by shares, as gpushare's ``kubectl inspect gpushare`` does.

Beside what is allocated, ``measure`` gives what is used (``scheduling.usage``: each job's
instances' sessions from ``/proc``, the machine from psutil, GPU memory per process from NVML),
for ``-o wide``/``-o json`` and ``top node -d``.
"""

from __future__ import annotations

from dataclasses import dataclass

from millpond.scheduling import gpu_metrics, usage
from millpond.scheduling.gpu_metrics import GpuMetric
from millpond.scheduling.ledger import GrantRecord, Ledger
from millpond.scheduling.sharing import GpuState
from millpond.store.training import JobRecord, JobStore
from millpond.training import views


@dataclass(frozen=True)
class JobRow:
    """One line of ``arena top job``: NAME STATUS TRAINER AGE GPU(Requested) GPU(Allocated) NODE."""

    namespace: str
    name: str
    status: str
    trainer: str
    age: str
    requested: int
    allocated: int
    node: str  # the chief instance's address, N/A before it started (Arena: the chief's host IP)


@dataclass(frozen=True)
class HolderRow:
    """One holder of a grant in the ledger (``arena top node -d``'s instances)."""

    namespace: str
    name: str
    kind: str  # job | task
    gpus_requested: int
    gpus: tuple[int, ...]
    holds: str  # what the grant holds in words: ``GPU 0, 2 CPUs``
    share_gpus: tuple[int, ...] = ()  # the GPUs its shares are on


@dataclass(frozen=True)
class NodeView:
    """This machine as Arena's node: its GPUs, how many are held, and by whom."""

    name: str
    ip: str
    role: str
    status: str
    gpu_total: int
    gpu_allocated: int
    holders: tuple[HolderRow, ...]
    gpu_indices: tuple[int, ...] = ()  # the GPUs the ledger may hand out, by CUDA index
    gpus: tuple[GpuState, ...] = ()  # each GPU: its memory, what shares hold of it, or its whole holder

    @property
    def shared(self) -> bool:
        """Whether a share holds part of a GPU now."""
        return any(gpu.shared_by for gpu in self.gpus)

    @property
    def percent(self) -> float:
        return 100.0 * self.gpu_allocated / self.gpu_total if self.gpu_total else 0.0


def job_row(job: JobRecord, store: JobStore) -> JobRow:
    chief = next((i for i in store.instances(job.uid) if i.role in ("master", "chief", "launcher")), None)
    node = views.LOCAL_IP if chief is not None and chief.started_at is not None else "N/A"
    return JobRow(job.namespace, job.name, job.status, job.trainer.upper(),
                  views.short_duration(views.duration_s(job)), views.requested_gpus(job),
                  views.allocated_gpus(job), node)


def totals(rows: list[JobRow]) -> tuple[int, int]:
    """(allocated, requested) GPUs of the RUNNING jobs: what Arena sums under the table."""
    running = [row for row in rows if row.status == "RUNNING"]
    return sum(row.allocated for row in running), sum(row.requested for row in running)


def _holder(grant: GrantRecord) -> HolderRow:
    namespace, _, name = grant.holder.name.partition("/")
    if not name:  # a holder named without a namespace
        namespace, name = "", namespace
    return HolderRow(namespace, name, grant.holder.kind, grant.request.gpus, grant.gpus, grant.summary,
                     tuple(dict.fromkeys(grant.share_gpus)))


def node_view(ledger: Ledger | None = None) -> NodeView:
    """The machine now: the ledger's capacity and its live grants (the dead holders' are reclaimed)."""
    ledger = ledger or Ledger()
    grants = ledger.grants()
    states = ledger.gpu_states()
    return NodeView(
        name=views.node_name(), ip=views.LOCAL_IP, role="<none>", status="Ready",
        gpu_total=len(ledger.capacity.gpus), gpu_allocated=sum(len(grant.gpus) for grant in grants),
        holders=tuple(_holder(grant) for grant in grants), gpu_indices=tuple(ledger.capacity.gpus),
        gpus=tuple(states),
    )


# --- used beside allocated (arena top job -o wide/json, top node -d/-o json) ---------------------------

@dataclass(frozen=True)
class UsageView:
    """One workload's (or the node's) CPU, memory and GPU: allocated by the ledger, used as measured.

    ``cpu_used`` is cores over the sample; the ``gpu_*_used`` figures are None where no GPU metrics
    could be read (no NVML, no nvidia-smi): unknown, not zero.
    """

    cpu_allocated: float
    cpu_used: float
    memory_allocated: int
    memory_used: int
    gpus_allocated: int
    gpu_memory_used: int | None
    gpu_duty_cycle: float | None  # the mean over the GPUs held

    def as_json(self) -> dict[str, object]:
        return {"cpuAllocated": self.cpu_allocated, "cpuUsed": round(self.cpu_used, 3),
                "memoryAllocated": self.memory_allocated, "memoryUsed": self.memory_used,
                "gpuAllocated": self.gpus_allocated, "gpuMemoryUsed": self.gpu_memory_used,
                "gpuDutyCycle": self.gpu_duty_cycle}


@dataclass(frozen=True)
class NodeUsage:
    """The node: capacity (what the ledger may hand out), allocated and used, and the machine's own totals."""

    cpu_capacity: float
    memory_capacity: int
    gpu_capacity: int
    used: UsageView  # allocated = every live grant; used = the whole machine's (psutil), not only millpond's
    memory_total: int
    cpu_cores: int

    def as_json(self) -> dict[str, object]:
        return {"cpuCapacity": self.cpu_capacity, "memoryCapacity": self.memory_capacity,
                "gpuCapacity": self.gpu_capacity, "cpuCores": self.cpu_cores, "memoryTotal": self.memory_total,
                **self.used.as_json()}


def _duty(metrics: dict[int, GpuMetric], gpus: tuple[int, ...]) -> float | None:
    seen = [metrics[index].duty_cycle for index in gpus if index in metrics]
    return sum(seen) / len(seen) if seen else None


def measure(jobs: list[JobRecord], store: JobStore, ledger: Ledger | None = None,
            sample_s: float = usage.SAMPLE_S) -> tuple[dict[str, UsageView], NodeUsage]:
    """Each job's (by uid) and the node's allocated and used resources, over one sample.

    A job's allocation is its ledger grant (holder ``job NAMESPACE/NAME``); its use is the sum over
    its running instances' sessions, and its GPU memory the NVML figure of those processes.
    """
    ledger = ledger or Ledger()
    grants = ledger.grants()
    by_holder = {(g.holder.kind, g.holder.name): g for g in grants}
    groups = {job.uid: [(i.pid, i.pid_start) for i in store.instances(job.uid) if i.finished_at is None]
              for job in jobs if job.status in ("PENDING", "RUNNING")}
    measured, machine_now = usage.sample(groups, sample_s)
    metrics = gpu_metrics.read()
    views_by_uid = {}
    for job in jobs:
        grant = by_holder.get(("job", f"{job.namespace}/{job.name}"))
        got = measured.get(job.uid)
        held = grant.gpus if grant is not None else ()
        views_by_uid[job.uid] = UsageView(
            cpu_allocated=grant.request.cpu_millis / 1000 if grant else 0.0,
            cpu_used=got.cpu_cores if got else 0.0,
            memory_allocated=grant.request.memory_bytes if grant else 0,
            memory_used=got.usage.memory_bytes if got else 0,
            gpus_allocated=len(held),
            gpu_memory_used=gpu_metrics.process_memory(metrics, got.usage.pids if got else frozenset()),
            gpu_duty_cycle=_duty(metrics, held),
        )
    cap = ledger.capacity
    held_all = tuple(index for g in grants for index in g.gpus)
    node = NodeUsage(
        cpu_capacity=cap.cpu_millis / 1000, memory_capacity=cap.memory_bytes, gpu_capacity=len(cap.gpus),
        memory_total=machine_now.memory_total, cpu_cores=machine_now.cpu_cores,
        used=UsageView(
            cpu_allocated=sum(g.request.cpu_millis for g in grants) / 1000, cpu_used=machine_now.cpu_cores_used,
            memory_allocated=sum(g.request.memory_bytes for g in grants), memory_used=machine_now.memory_used,
            gpus_allocated=len(held_all),
            gpu_memory_used=int(sum(m.memory_used for m in metrics.values())) if metrics else None,
            gpu_duty_cycle=_duty(metrics, tuple(cap.gpus)),
        ),
    )
    return views_by_uid, node

"""``arena top job`` and ``arena top node``: GPUs asked for and handed out, as Arena counts them.

Arena reads both from the cluster: a job's requested GPUs from its pods' specs, a node's
allocated GPUs from the pods bound to it. Here the one node is this machine, its GPUs are what
the machine-wide ledger may hand out (``Ledger.capacity``; ``MILLPOND_FAKE_GPUS`` in tests), and
what is allocated is what the ledger's live grants hold — training jobs and pipeline tasks alike,
so ``top node`` shows a pipeline task holding a GPU even though ``top job`` cannot. GPU shares
(``--gpumemory``) are not counted as allocated GPUs (as Arena counts whole ones); ``top node -s``
shows each GPU's memory held by shares, as gpushare's ``kubectl inspect gpushare`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

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

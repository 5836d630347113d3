"""The one door from training jobs to the machine-wide ledger of CPU, memory and GPUs.

The ledger (``millpond.scheduling.ledger``) is shared by every millpond process of a home, so
a job and pipeline tasks never hand out the same GPU. A job asks for all its instances at once
(Kueue's all-or-nothing admission), as the holder kind ``job``.
"""

from __future__ import annotations

from dataclasses import dataclass

from millpond.scheduling.ledger import Holder, Ledger, Request


@dataclass(frozen=True)
class Granted:
    """What the job holds: the ledger's grant id and the GPU indices it got."""

    id: str
    gpus: tuple[int, ...]
    share_gpus: tuple[int, ...] = ()  # the GPU of each instance's share (--gpumemory), in instances() order


class Allocator:
    """The machine-wide ledger, seen from a training job."""

    def __init__(self) -> None:
        self._ledger = Ledger()

    def impossible(self, wanted: Request, namespace: str = "", pods: int = 1) -> str | None:
        """Why the job can never run here: beyond the machine, or beyond ``namespace``'s ResourceQuota."""
        return self._ledger.impossible(wanted) or self._ledger.never_within_quota(wanted, namespace, pods)

    def try_acquire(self, wanted: Request, name: str, pid: int, start: str | None, *, namespace: str = "",
                    pods: int = 1) -> Granted | None:
        """The job's grant, charged against ``namespace``'s ResourceQuotas as ``pods`` pods; None: it waits."""
        grant = self._ledger.try_acquire(wanted, Holder("job", name, pid, start, namespace, pods))
        return None if grant is None else Granted(grant.id, tuple(grant.gpus), tuple(grant.share_gpus))

    def release(self, grant_id: str) -> None:
        self._ledger.release(grant_id)

    def gpu_memory(self, index: int) -> int:
        """GPU ``index``'s memory in bytes (0 when unknown): what a share's fraction is of."""
        return self._ledger.capacity.memory_of(index)

    def why_waiting(self, wanted: Request, namespace: str = "", pods: int = 1) -> str:
        return self._ledger.why_waiting(wanted, namespace, pods)

    def fallback_warning(self, wanted: Request) -> str | None:
        """``gpu-fallback cpu``: why the GPUs asked for run on CPU, or None."""
        return self._ledger.fallback_warning(wanted)


def allocator() -> Allocator:
    return Allocator()

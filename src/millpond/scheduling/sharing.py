"""GPU sharing: where fractional requests (Arena's ``--gpumemory``/``--gpucore``) go on this machine's GPUs.

A share asks for part of ONE GPU: ``memory_bytes`` of its memory and, optionally,
``core_percent`` of its compute. Admission is by memory (and cores when asked), as Alibaba's
gpushare scheduler extender does: a GPU held whole by a grant takes no share, and a GPU with a
share on it is not handed out whole. Shares are packed (binpack, as gpushare's
``allocateGPUID``): each goes to the GPU with the least free memory that still fits it, the
lowest index on a tie, so whole GPUs stay free for whole-GPU requests as long as possible.

Pure functions over plain records: the ledger (``scheduling.ledger``) calls them under its lock
with what it holds; tests call them directly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

GIB = 2**30


@dataclass(frozen=True)
class GpuShare:
    """Part of one GPU: bytes of its memory, and percent of its compute (0: not asked, not counted)."""

    memory_bytes: int
    core_percent: int = 0

    @property
    def words(self) -> str:
        """``6.0 GiB`` or ``6.0 GiB, 30% of cores``."""
        cores = f", {self.core_percent}% of cores" if self.core_percent else ""
        return f"{self.memory_bytes / GIB:.1f} GiB{cores}"


@dataclass(frozen=True)
class GpuState:
    """One GPU as the ledger sees it now: its memory, what shares hold of it, or held whole."""

    index: int
    memory_total: int
    memory_shared: int = 0
    core_shared: int = 0
    whole_by: str = ""  # the holder of a whole-GPU grant on it, "" when none
    shared_by: tuple[str, ...] = ()  # the holders of its shares

    @property
    def memory_free(self) -> int:
        return self.memory_total - self.memory_shared

    @property
    def core_free(self) -> int:
        return 100 - self.core_shared

    def fits(self, share: GpuShare) -> bool:
        return (not self.whole_by and share.memory_bytes <= self.memory_free
                and share.core_percent <= self.core_free)

    def plus(self, share: GpuShare, holder: str) -> GpuState:
        return GpuState(self.index, self.memory_total, self.memory_shared + share.memory_bytes,
                        self.core_shared + share.core_percent, self.whole_by, (*self.shared_by, holder))

    @property
    def words(self) -> str:
        """``GPU 0: 4.0 of 16.0 GiB free (shared by job a, job b)`` — for a waiting workload's reason."""
        if self.whole_by:
            return f"GPU {self.index}: held whole by {self.whole_by}"
        if not self.memory_total:
            return f"GPU {self.index}: its memory is unknown"
        cores = f", {self.core_free}% of cores" if self.core_shared else ""
        holders = f" (shared by {', '.join(dict.fromkeys(self.shared_by))})" if self.shared_by else ""
        return (f"GPU {self.index}: {max(0, self.memory_free) / GIB:.1f} of {self.memory_total / GIB:.1f} GiB "
                f"free{cores}{holders}")


def states(indices: tuple[int, ...], memory: tuple[int, ...], whole: dict[int, str],
           shares: Iterable[tuple[int, GpuShare, str]]) -> list[GpuState]:
    """Every GPU's state: ``whole`` maps an index held whole to its holder; ``shares`` are (index, share, holder)."""
    by_index = {index: GpuState(index, memory[n] if n < len(memory) else 0, whole_by=whole.get(index, ""))
                for n, index in enumerate(indices)}
    for index, share, holder in shares:
        if index in by_index:
            by_index[index] = by_index[index].plus(share, holder)
    return list(by_index.values())


def place(shares: tuple[GpuShare, ...], gpus: list[GpuState], holder: str = "") -> tuple[int, ...] | None:
    """The GPU index of each share (in ``shares``' order), all placed together, or None when they do not fit.

    Larger shares are placed first (first-fit decreasing packs better), each on the fitting GPU
    with the least free memory (binpack); a job's shares may land on the same GPU.
    """
    current = {gpu.index: gpu for gpu in gpus}
    placed: dict[int, int] = {}
    order = sorted(range(len(shares)), key=lambda n: -shares[n].memory_bytes)
    for n in order:
        fitting = [gpu for gpu in current.values() if gpu.fits(shares[n])]
        if not fitting:
            return None
        best = min(fitting, key=lambda gpu: (gpu.memory_free, gpu.index))
        current[best.index] = best.plus(shares[n], holder)
        placed[n] = best.index
    return tuple(placed[n] for n in range(len(shares)))

"""What this machine has to hand out: CPUs, memory and GPUs — the one place that counts them.

Counted as the Kubernetes node's allocatable would be for a pod started here: the CPUs this
process may run on (its affinity, bounded by a cgroup CPU quota), the memory it may use (a
cgroup limit, else MemTotal), and the GPUs it may see (``CUDA_VISIBLE_DEVICES`` when set, else
what the NVIDIA driver lists). GPUs are named by the index ``CUDA_VISIBLE_DEVICES`` takes, so a
grant's indices can be handed to a child process as they are.

Each GPU's memory (what ``--gpumemory`` shares are admitted against) is ``memory.total`` as
``nvidia-smi`` reports it; 0 where it cannot be read, and then no share fits that GPU.

``MILLPOND_FAKE_GPUS=N`` (read by ``millpond.settings``) is for tests only: it declares N GPUs
(indices 0..N-1) to the scheduler, whatever the machine has, so the scheduling of GPU requests
can be tested on a machine without one; ``NxSIZE`` (``1x16Gi``) gives each of them SIZE of
memory for GPU sharing. Nothing is emulated — a process given fake index 0 sees no device, and
no memory limit is enforced on it. (``MILLPOND_GPUS`` is its older name, still read.)
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_CGROUP = Path("/sys/fs/cgroup")
_NO_DEVICES = ("", "-1", "none", "void", "NoDevFiles")


@dataclass(frozen=True)
class Capacity:
    """All of the machine a ledger may hand out at once."""

    cpu_millis: int
    memory_bytes: int
    gpus: tuple[int, ...]
    gpu_memory: tuple[int, ...] = ()  # bytes of each of ``gpus``, in the same order; 0: unknown

    def memory_of(self, index: int) -> int:
        """The memory of GPU ``index`` in bytes (0 when unknown)."""
        position = self.gpus.index(index)
        return self.gpu_memory[position] if position < len(self.gpu_memory) else 0


def cpu_millis() -> int:
    """Millicores this process may use: its CPU affinity, bounded by a cgroup quota (rounded up)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = _cpu_quota()
    if quota is not None:
        cpus = min(cpus, max(1, math.ceil(quota)))
    return max(1, cpus) * 1000


def _cpu_quota() -> float | None:
    """CPUs a cgroup quota allows (v2 ``cpu.max``, v1 ``cfs_quota_us``), or None when unlimited."""
    try:
        quota, period = (_CGROUP / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((_CGROUP / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((_CGROUP / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def memory_bytes() -> int:
    """Bytes this process may use: the cgroup memory limit when one is set, else the machine's memory."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 0
    limits = []
    for path in (_CGROUP / "memory.max", _CGROUP / "memory" / "memory.limit_in_bytes"):
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            limits.append(int(text))  # v1's "no limit" is a huge number: min() below ignores it
    limited = min([*limits, total] if total else limits, default=0)
    return limited or 2**63 - 1


def gpu_indices(fake: int | None = None) -> tuple[int, ...]:
    """The GPUs this process may hand out, by the index CUDA_VISIBLE_DEVICES takes (``fake``: the
    test-only MILLPOND_FAKE_GPUS count from the settings)."""
    if fake is not None:
        return tuple(range(fake))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return _visible(visible)
    return tuple(range(_driver_gpu_count()))


def _visible(text: str) -> tuple[int, ...]:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: indices or GPU-UUIDs, up to the first that is neither."""
    if text.strip() in _NO_DEVICES:
        return ()
    uuids: dict[str, int] | None = None
    found: list[int] = []
    for item in (part.strip() for part in text.split(",")):
        if item.isdigit():
            found.append(int(item))
            continue
        if item.startswith("GPU-"):
            uuids = _gpu_uuids() if uuids is None else uuids
            match = next((index for uuid, index in uuids.items() if uuid.startswith(item)), None)
            if match is not None:
                found.append(match)
                continue
        break  # CUDA stops at the first entry it cannot read
    return tuple(dict.fromkeys(found))


def _gpu_uuids() -> dict[str, int]:
    listing = nvidia_smi("--query-gpu=uuid,index", "--format=csv,noheader")
    uuids = {}
    for line in listing.splitlines():
        uuid, _, index = line.partition(",")
        if index.strip().isdigit():
            uuids[uuid.strip()] = int(index)
    return uuids


def _driver_gpu_count() -> int:
    proc = Path("/proc/driver/nvidia/gpus")
    if proc.is_dir():
        return len(list(proc.iterdir()))
    return sum(1 for line in nvidia_smi("-L").splitlines() if line.startswith("GPU "))


def nvidia_smi(*args: str, timeout: float = 10) -> str:
    """nvidia-smi's output, or "" where it is missing, fails or runs past ``timeout`` (then it is killed)."""
    if not shutil.which("nvidia-smi"):
        return ""
    try:
        done = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def gpu_memory(indices: tuple[int, ...]) -> tuple[int, ...]:
    """Each GPU's total memory in bytes, as nvidia-smi reports it (MiB); 0 for one it does not report."""
    if not indices:
        return ()
    totals: dict[int, int] = {}
    for line in nvidia_smi("--query-gpu=index,memory.total", "--format=csv,noheader,nounits").splitlines():
        index, _, mib = (cell.strip() for cell in line.partition(","))
        if index.isdigit() and mib.isdigit():
            totals[int(index)] = int(mib) * 2**20
    return tuple(totals.get(index, 0) for index in indices)


def capacity(fake_gpus: int | None = None, fake_gpu_memory: int | None = None) -> Capacity:
    """The machine now; ``fake_gpus``/``fake_gpu_memory``: the test-only MILLPOND_FAKE_GPUS inventory."""
    gpus = gpu_indices(fake_gpus)
    if fake_gpus is not None:
        memory = tuple(fake_gpu_memory or 0 for _ in gpus)
    else:
        memory = gpu_memory(gpus)
    return Capacity(cpu_millis=cpu_millis(), memory_bytes=memory_bytes(), gpus=gpus, gpu_memory=memory)

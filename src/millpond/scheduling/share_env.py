"""The environment a process holding a GPU share starts with: which GPU, and how its share is enforced.

Two kinds of isolation, and millpond says which one a process got (``MILLPOND_GPU_ISOLATION``):

- ``mps`` (hard, as far as MPS goes): when an MPS control daemon runs (its pipe directory,
  ``CUDA_MPS_PIPE_DIRECTORY`` or ``/tmp/nvidia-mps``, holds its ``control`` pipe or a live
  ``nvidia-cuda-mps-control.pid``), every CUDA process here is an MPS client, and MPS reads
  ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` (``0=6G``: device ordinal as the client sees it, after
  ``CUDA_VISIBLE_DEVICES``) and ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` (the ``--gpucore`` percent)
  when the client starts: an allocation past the limit fails in the process that made it, and
  its kernels get at most that share of the SMs. Caveat from NVIDIA's docs: a daemon started
  with ``CUDA_VISIBLE_DEVICES`` set renumbers the devices its clients see.
- ``cooperative`` (no daemon): nothing stops a process from taking the whole GPU. It gets its
  limit in ``MILLPOND_GPU_MEMORY_LIMIT`` (bytes) and ``MILLPOND_GPU_MEMORY_FRACTION`` (of the
  GPU's memory), plus gpushare's ``ALIYUN_COM_GPU_MEM_CONTAINER``/``ALIYUN_COM_GPU_MEM_DEV``
  (GiB) that code written for Arena's gpushare reads; the job applies it at start, e.g. with
  ``millpond.training.gpu_share.apply()`` (``torch.cuda.set_per_process_memory_fraction``).

A fake GPU (the test-only ``MILLPOND_FAKE_GPUS``) has no device behind it: the variables are set
all the same, so tests see what a real job would get.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

from millpond.runners.processes import ProcessIdentity
from millpond.scheduling.sharing import GpuShare

MPS_PIPE_DEFAULT = "/tmp/nvidia-mps"
LIMIT_VAR = "MILLPOND_GPU_MEMORY_LIMIT"
FRACTION_VAR = "MILLPOND_GPU_MEMORY_FRACTION"
CORE_VAR = "MILLPOND_GPU_CORE_PERCENT"
ISOLATION_VAR = "MILLPOND_GPU_ISOLATION"
GIB = 2**30
MIB = 2**20


def mps_running(environ: Mapping[str, str] | None = None) -> bool:
    """Whether an MPS control daemon serves this machine's CUDA clients (its pipe directory says so)."""
    environ = os.environ if environ is None else environ
    pipe = Path(environ.get("CUDA_MPS_PIPE_DIRECTORY") or MPS_PIPE_DEFAULT)
    try:
        pid_text = (pipe / "nvidia-cuda-mps-control.pid").read_text().strip()
    except OSError:
        pid_text = ""
    if pid_text.isdigit():
        return ProcessIdentity.of(int(pid_text)).is_running()
    return (pipe / "control").exists()


def _limit(memory_bytes: int) -> str:
    """MPS's size notation: whole GiB as ``6G``, else MiB (rounded down) as ``6144M``."""
    return f"{memory_bytes // GIB}G" if memory_bytes % GIB == 0 else f"{memory_bytes // MIB}M"


def share_env(gpus: tuple[int, ...], share: GpuShare, totals: tuple[int, ...], mps: bool) -> dict[str, str]:
    """The variables of a process whose share ``share`` is on each of ``gpus`` (``totals``: their memory).

    An MPI launcher's ranks share one environment, so a process may see several GPUs, each with
    the same share of it.
    """
    known = [total for total in totals if total > 0]
    fraction = min(share.memory_bytes / total for total in known) if known else 1.0
    env = {
        "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus)),
        LIMIT_VAR: str(share.memory_bytes),
        FRACTION_VAR: f"{math.floor(min(1.0, fraction) * 10_000) / 10_000:.4f}",  # rounded down: never over
        ISOLATION_VAR: "mps" if mps else "cooperative",
        "ALIYUN_COM_GPU_MEM_CONTAINER": str(share.memory_bytes // GIB),
        "ALIYUN_COM_GPU_MEM_DEV": str(min(known) // GIB if known else 0),
    }
    if share.core_percent:
        env[CORE_VAR] = str(share.core_percent)
    if mps:
        env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = ",".join(
            f"{ordinal}={_limit(share.memory_bytes)}" for ordinal in range(len(gpus)))
        if share.core_percent:
            env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(share.core_percent)
    return env

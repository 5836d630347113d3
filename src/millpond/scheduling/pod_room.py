"""How many instances and processes this machine can ever hold at once: the bound every count a user
gives (workers, replicas, MPI slots, torchrun's processes per node) is checked against before anything starts.

CPU, memory and GPUs asked for are the ledger's business (``Ledger.impossible``); a count is not: an
instance that asks for nothing still is a process, and 100000 of them never fit one machine, whatever
they ask. Kubernetes bounds each node by kubelet's ``--max-pods`` (default 110) and each pod's
processes by the node's pid limit; here the node is this machine, so:

- instances (pods): at most ``MAX_PODS`` (110, kubelet's default; ``MILLPOND_MAX_PODS`` changes it),
  and on a Ray cluster that many per node;
- processes (an instance's, or an MPI launcher's ranks): at most what the machine could run at once:
  the smallest of the user's process limit (``RLIMIT_NPROC``), the kernel's ``pid_max`` and
  ``threads-max``, and the memory over ``MIN_PROCESS_BYTES`` (the least a process of a training
  program occupies).
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

from millpond.scheduling import machine

MAX_PODS = 110  # kubelet's --max-pods default
MAX_PODS_VAR = "MILLPOND_MAX_PODS"
MIN_PROCESS_BYTES = 32 * 2**20  # an interpreter running a training loop occupies more than this


def max_pods() -> int:
    """Instances one node (this machine) holds at most: ``MILLPOND_MAX_PODS``, else kubelet's 110."""
    text = os.environ.get(MAX_PODS_VAR, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else MAX_PODS


def _kernel_limit(name: str) -> int | None:
    try:
        return int(Path("/proc/sys/kernel", name).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def max_processes() -> int:
    """Processes this machine could run at once for one job (see the module's docstring)."""
    limits = [max(1, machine.memory_bytes() // MIN_PROCESS_BYTES)]
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY and soft > 0:
        limits.append(soft)
    for name in ("pid_max", "threads-max"):
        value = _kernel_limit(name)
        if value:
            limits.append(value)
    return min(limits)


def too_many(instances: int, processes: int, *, nodes: int = 1, what: str = "instances") -> str | None:
    """Why ``instances`` (on ``nodes`` nodes) running ``processes`` in all can never be held, in one line, or None."""
    pods = max_pods() * max(1, nodes)
    where = "this machine" if nodes <= 1 else f"the cluster's {nodes} nodes"
    if instances > pods:
        return (f"asks for {instances} {what} but {where} holds at most {pods} "
                f"(kubelet's max-pods, {max_pods()} per node; {MAX_PODS_VAR} changes it)")
    room = max_processes()
    if nodes <= 1 and processes > room:
        return (f"runs {processes} processes but this machine can run at most {room} at once "
                f"(its memory, process and pid limits)")
    return None

"""GPU shares onto planned instances: each instance holding a share sees its GPU and its limits.

The planners (``launch``, ``launch_mpi``, ``launch_tf``) hand out whole GPUs; a job of
``--gpumemory`` instances has none, and its grant instead names the GPU of each instance's share,
in ``JobSpec.instances()`` order (``JobSpec.total``). Here each such instance gets
``scheduling.share_env``'s variables (its GPU, the memory limit, MPS's when a daemon runs). An
MPI launcher runs its workers' ranks in one environment: it gets every worker's GPU, each with
the (common) share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from millpond.scheduling.share_env import share_env
from millpond.scheduling.sharing import GpuShare
from millpond.training.planned import Planned
from millpond.training.spec import JobSpec


def instance_shares(spec: JobSpec, share_gpus: tuple[int, ...]) -> dict[tuple[str, int], tuple[int, GpuShare]]:
    """(role, index) -> (its GPU, its share), for every instance holding a share."""
    gpus = iter(share_gpus)
    found = {}
    for replica, index in spec.instances():
        for share in replica.resources.shares:
            found[(replica.role, index)] = (next(gpus), share)
    return found


def with_shares(spec: JobSpec, planned: list[Planned], share_gpus: tuple[int, ...],
                memory_of: Callable[[int], int], mps: bool) -> list[Planned]:
    """``planned`` with each share holder's GPU and variables (unchanged when the job has no share)."""
    if not share_gpus:
        return planned
    shares = instance_shares(spec, share_gpus)
    result = []
    for item in planned:
        own = shares.get((item.role, item.index))
        held = [own] if own else [shares[(q.role, q.index)] for q in planned
                                  if q.started_by == item.name and (q.role, q.index) in shares]
        if not held:
            result.append(item)
            continue
        gpus = tuple(dict.fromkeys(gpu for gpu, _ in held))
        env = {**item.env, **share_env(gpus, held[0][1], tuple(memory_of(gpu) for gpu in gpus), mps)}
        result.append(replace(item, env=env, gpus=gpus if own else item.gpus))
    return result

"""What each instance of a job runs, and with which environment, as the operators set it.

PyTorch (training-operator's ``pytorch/envvar.go``): every instance gets ``MASTER_ADDR``,
``MASTER_PORT`` (the master's), ``WORLD_SIZE`` (instances × processes per instance), ``RANK``
(the master 0, worker ``i`` ``i + 1``), ``PYTHONUNBUFFERED``, and the variables torchrun reads:
``PET_MASTER_ADDR``, ``PET_MASTER_PORT``, ``PET_NNODES`` (instances), ``PET_NODE_RANK`` (the
instance's rank), ``PET_NPROC_PER_NODE``. On one machine the master is ``127.0.0.1`` and its
port a free one. With ``--nproc-per-node`` the instance runs torchrun (``--no-python``, so
Arena's ``sh -c LINE`` stays the program), which reads the ``PET_*`` variables.

GPUs: an instance gets ``CUDA_VISIBLE_DEVICES`` listing the GPUs the ledger granted it
(its share of the job's grant, in order), and the empty string when it has none, so a
CPU job never grabs a GPU by accident.

MPI and TF have their own planners (``launch_mpi``, ``launch_tf``), registered in ``PLANNERS``.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from millpond.errors import TaskFailure
from millpond.training.launch_mpi import plan_mpi
from millpond.training.launch_ray import plan_ray
from millpond.training.launch_tf import plan_tf
from millpond.training.planned import LOCAL_ADDR, Planned, free_port
from millpond.training.spec import JobSpec, ReplicaSpec, Trainer

__all__ = ["LOCAL_ADDR", "PLANNERS", "Planned", "free_port", "plan", "torchrun"]


def _rank(replica: ReplicaSpec, index: int, has_master: bool) -> int:
    """The master is rank 0 and worker i rank i + 1; with no master (a Worker-only PyTorchJob), worker i is i."""
    return index + 1 if replica.role == "worker" and has_master else index


def plan(spec: JobSpec, gpus: tuple[int, ...], port: int, folder: Path) -> list[Planned]:
    """Every instance of ``spec`` with its environment; ``gpus`` are the job's granted GPUs, shared in order.

    One planner per trainer (``PLANNERS``): pytorch's here, mpi's (a launcher running mpirun over
    a hostfile) and tf's (``TF_CONFIG`` per replica) in their modules. ``folder`` is the job's
    own folder, where a planner's files (the MPI hostfile) go.
    """
    planner = PLANNERS.get(spec.trainer)
    if planner is None:
        raise TaskFailure(f"{spec.trainer.value} jobs cannot be launched by this version of millpond")
    return planner(spec, gpus, port, folder)


def _pytorch(spec: JobSpec, gpus: tuple[int, ...], port: int, folder: Path) -> list[Planned]:
    """The PyTorchJob controller's variables (see the module's docstring), torchrun with --nproc-per-node."""
    total = spec.instance_count
    nproc = spec.nproc_per_node or 1
    planned = []
    offset = 0
    has_master = any(replica.role == "master" for replica in spec.replicas)
    for replica, index in spec.instances():
        rank = _rank(replica, index, has_master)
        share = tuple(gpus[offset:offset + replica.resources.gpus])
        offset += replica.resources.gpus
        env = {
            "PYTHONUNBUFFERED": "0",
            "MASTER_ADDR": LOCAL_ADDR, "MASTER_PORT": str(port),
            "PET_MASTER_ADDR": LOCAL_ADDR, "PET_MASTER_PORT": str(port),
            "WORLD_SIZE": str(total * nproc), "RANK": str(rank),
            "PET_NNODES": str(total), "PET_NODE_RANK": str(rank), "PET_NPROC_PER_NODE": str(nproc),
            "CUDA_VISIBLE_DEVICES": ",".join(map(str, share)),
        }
        env.update(dict(spec.env))
        env.update(dict(replica.env))
        argv = tuple(replica.command)
        if spec.nproc_per_node:
            argv = (*torchrun(), "--no-python", *argv)
        planned.append(Planned(f"{spec.name}-{replica.role}-{index}", replica.role, index, rank, argv, env, share))
    return planned


Planner = Callable[[JobSpec, tuple[int, ...], int, Path], list[Planned]]
PLANNERS: dict[Trainer, Planner] = {
    Trainer.PYTORCH: _pytorch, Trainer.MPI: plan_mpi, Trainer.TF: plan_tf, Trainer.RAY: plan_ray,
}


def torchrun() -> tuple[str, ...]:
    """torchrun as found on PATH, else the one of the interpreter running millpond."""
    found = shutil.which("torchrun")
    return (found,) if found else (sys.executable, "-m", "torch.distributed.run")

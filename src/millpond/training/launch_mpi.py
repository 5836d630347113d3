"""An MPIJob on one machine: a launcher running Debian's OpenMPI ``mpirun`` over a hostfile of local slots.

As the MPIJob operator (v2beta1) does: the hostfile lists every worker with ``slots=`` its
slots per worker (a manifest's ``slotsPerWorker``, else ``--gpus`` or 1), and the launcher gets
``OMPI_MCA_orte_default_hostfile`` (the hostfile), ``OMPI_MCA_orte_keep_fqdn_hostnames=true``
and ``OMPI_MCA_orte_set_default_slots``. On one machine every worker is ``localhost``, so the
hostfile is one line, ``localhost slots=WORKERS×SLOTS``, and the workers are the MPI ranks
mpirun starts (rank ``r`` belongs to worker ``r // slots``): they are instances of the job
(``arena get`` lists them, ``arena logs -i NAME-worker-1`` shows their output) but not
processes the supervisor starts.

The launcher's command runs as given, always, as the MPI Operator runs the launcher pod's command:
it is the user's ``mpirun``/``mpiexec``/``horovodrun`` (Arena's usual ``arena submit mpi ... mpirun
python train.py``) or a script that calls one (seed 001's ``./launch-example.sh 4 8``), and the
hostfile and variables above are in place for it to reach the workers. (millpond once put any other
command under its own ``mpirun``; a script calling mpirun then died with "mpirun does not support
recursive calls". A command without mpirun now runs once, on the launcher, as on Kubernetes.) The
operator's remote-shell agent (``OMPI_MCA_plm_rsh_agent``, its ``kubectl exec`` script) is not
needed: every slot is ``localhost``, which mpirun starts without a remote shell. mpirun tags
each rank's output (``OMPI_MCA_orte_tag_output``) so the supervisor can route it to the worker's
log; as root mpirun needs ``OMPI_ALLOW_RUN_AS_ROOT`` and its confirmation, set here. The
launcher's ``CUDA_VISIBLE_DEVICES`` lists every GPU granted to the workers: ranks pick theirs by
``OMPI_COMM_WORLD_LOCAL_RANK``, as on a node with several slots.
"""

from __future__ import annotations

from pathlib import Path

from millpond.training.planned import Planned
from millpond.training.spec import JobSpec


def slots_per_worker(spec: JobSpec) -> int:
    """An MPIJob's ``slotsPerWorker`` when it says, else one slot per GPU of a worker, else 1."""
    if spec.slots_per_worker:
        return spec.slots_per_worker
    worker = next(r for r in spec.replicas if r.role == "worker")
    return worker.resources.gpus or 1


def plan_mpi(spec: JobSpec, gpus: tuple[int, ...], port: int, folder: Path) -> list[Planned]:
    """The launcher (mpirun) and its workers (the ranks, started by mpirun)."""
    launcher = next(r for r in spec.replicas if r.role == "launcher")
    worker = next(r for r in spec.replicas if r.role == "worker")
    slots = slots_per_worker(spec)
    hostfile = folder / "hostfile"
    launcher_name = f"{spec.name}-launcher-0"
    workers = [f"{spec.name}-worker-{index}" for index in range(worker.replicas)]
    env = {
        "OMPI_MCA_orte_default_hostfile": str(hostfile),
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_set_default_slots": str(slots),
        "OMPI_MCA_orte_tag_output": "1",
        "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "PYTHONUNBUFFERED": "1",
        "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus)),
    }
    env.update(dict(spec.env))
    env.update(dict(launcher.env))
    argv = tuple(launcher.command)  # as given: the user's mpirun, or a script that calls it
    planned = [Planned(launcher_name, "launcher", 0, 0, argv, env, (),
                       rank_logs=tuple(workers[rank // slots] for rank in range(len(workers) * slots)),
                       files=((hostfile, f"localhost slots={len(workers) * slots}\n"),))]
    per_worker = worker.resources.gpus
    for index, name in enumerate(workers):
        share = tuple(gpus[index * per_worker:(index + 1) * per_worker])
        planned.append(Planned(name, "worker", index, index * slots, (), {}, share, started_by=launcher_name))
    return planned

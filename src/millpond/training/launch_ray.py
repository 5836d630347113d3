"""``arena submit ray`` (Arena's rayjob): one driver process that joins an existing Ray cluster.

Arena's RayJob asks KubeRay to create a RayCluster and run the entrypoint against it; here the
cluster already runs (``--ray HOST:PORT`` or ``MILLPOND_RAY_ADDRESS``), so the job is its driver
only: the command runs on the submitting machine with ``RAY_ADDRESS`` set to the cluster's
address, so the script's ``ray.init()`` (or ``ray.init(address="auto")``) joins it and its
tasks and actors run on the cluster's nodes. Its output is the job's log (``arena logs``); its
exit is the job's end; the job's supervisor, statuses and ``--retry`` are a local job's. The
driver is a Ray driver, so the submitting machine must reach every node (on a real cluster: it
is a node itself, started with ``ray start --address=HEAD --num-cpus=0``).
"""

from __future__ import annotations

from pathlib import Path

from millpond.training.planned import Planned
from millpond.training.spec import JobSpec

DRIVER = "driver"


def plan_ray(spec: JobSpec, gpus: tuple[int, ...], port: int, folder: Path) -> list[Planned]:
    """The job's one driver, with ``RAY_ADDRESS`` (the cluster's) and its share of the job's GPUs."""
    replica, index = spec.instances()[0]
    env = {
        "PYTHONUNBUFFERED": "1", "RAY_ADDRESS": spec.ray_address,
        "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus)),
    }
    env.update(dict(spec.env))
    env.update(dict(replica.env))
    return [Planned(f"{spec.name}-{DRIVER}-{index}", replica.role, index, 0, tuple(replica.command), env, gpus)]

"""Cluster mode for pipelines: what a run must satisfy before it is recorded, and the budget Ray keeps.

On a Ray cluster the engine stays where the run was submitted and each task runs on a node
Ray picks (``millpond.runners.ray_cluster``). So before anything is recorded: Ray must be
installed and the cluster must answer; the pipeline root must be somewhere every node reaches
(``s3://``, ``gs://``, ``minio://``, or a folder named in ``MILLPOND_SHARED_ROOTS``); and every
task's CPU, memory and accelerator requests must fit at least one live node's totals. Each is
one ``error:`` line (exit 2, nothing recorded).

While the run goes, Ray queues a task until a node has room, so the engine's own budget is no
longer this machine's ledger but the cluster's totals: a request no node can ever meet fails
the task; anything else is handed to Ray at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from millpond.errors import UserError
from millpond.pipelines.resources import ResourceRequest, task_request
from millpond.quantities import QuantityError
from millpond.runners.base import Demand
from millpond.runners.ray_cluster import cluster_nodes, connect, ray_resources, require_ray, unmet
from millpond.scheduling import Grant, Holder
from millpond.settings import Settings
from millpond.store.artifacts import is_remote


class ClusterRootError(UserError):
    """A pipeline root that the cluster's nodes cannot all reach."""


def demand(request: ResourceRequest) -> Demand:
    return Demand(
        cpus=request.cpu, memory_bytes=int(request.memory), gpus=request.accelerators, accelerator=request.accelerator
    )


def check_root(root: str, settings: Settings) -> None:
    if is_remote(root):
        return
    folder = Path(root).resolve()
    for shared in settings.shared_roots:
        base = Path(shared).resolve()
        if folder == base or base in folder.parents:
            return
    raise ClusterRootError(
        f"pipeline root {root} is a folder of this machine only: in cluster mode (Ray at {settings.ray_address}) "
        "use an s3:// root every node reaches, or declare the folder shared with MILLPOND_SHARED_ROOTS"
    )


def check_cluster(settings: Settings, root: str, spec: dict[str, Any]) -> None:
    """Everything cluster mode needs before a run is recorded; one UserError naming the first problem."""
    assert settings.ray_address
    require_ray()
    check_root(root, settings)
    connect(settings.ray_address)
    nodes = cluster_nodes()
    for label, executor in sorted(spec.get("deploymentSpec", {}).get("executors", {}).items()):
        container = executor.get("container")
        if not container:
            continue
        try:
            request = task_request(container)
        except QuantityError:
            continue  # the task fails with the field's name when it runs, as locally
        problem = unmet(ray_resources(demand(request)), nodes)
        if problem:
            raise UserError(f"executor {label}: {problem}")


_NOTHING = Grant(id="", gpus=())


class ClusterBudget:
    """The engine's budget in cluster mode: Ray places and queues; only the impossible is refused here."""

    gpus = 0  # GPUs are Ray's to hand out: the engine sets no CUDA_VISIBLE_DEVICES

    def impossible(self, request: ResourceRequest) -> str | None:
        return unmet(ray_resources(demand(request)), cluster_nodes())

    def acquire(self, request: ResourceRequest, holder: Holder) -> Grant | None:
        return _NOTHING

    def release(self, grant: Grant) -> None:
        pass

    def why_waiting(self, request: ResourceRequest) -> str:
        return "waiting for a Ray node with room"

    def fallback_warning(self, request: ResourceRequest) -> str | None:
        return None

"""Cluster mode for pipelines: what a run must satisfy before it is recorded, and the budget Ray keeps.

On a Ray cluster the engine stays where the run was submitted and each task runs on a node
Ray picks (``millpond.runners.ray_cluster``). So before anything is recorded: Ray must be
installed and the cluster must answer; the pipeline root must be somewhere every node reaches
(``s3://``, ``gs://``, ``minio://``, or a folder named in ``MILLPOND_SHARED_ROOTS``); and every
task's CPU, memory and accelerator requests must fit at least one live node's totals; and the
folders a run's tasks share on one machine (kfp's pipeline workspace, a PVC volume folder) must
be declared shared too. Each is one ``error:`` line (exit 2, nothing recorded).

While the run goes, Ray queues a task until a node has room, so the engine's own budget is no
longer this machine's ledger but the cluster's totals: a request no node can ever meet fails
the task; anything else is handed to Ray at once.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from millpond.errors import UserError
from millpond.pipelines.bindings import WORKSPACE_PATH
from millpond.pipelines.platform import is_create_pvc, volume_not_shared
from millpond.pipelines.resources import ResourceRequest, task_request
from millpond.quantities import QuantityError
from millpond.runners.base import Demand
from millpond.runners.ray_cluster import ClusterNode, cluster_nodes, connect, ray_resources, require_ray, unmet
from millpond.scheduling import Grant, Holder
from millpond.settings import Settings
from millpond.store.artifacts import is_remote
from millpond.store.resources import read_manifest


class ClusterRootError(UserError):
    """A pipeline root that the cluster's nodes cannot all reach."""


def demand(request: ResourceRequest) -> Demand:
    return Demand(
        cpus=request.cpu, memory_bytes=int(request.memory), gpus=request.accelerators, accelerator=request.accelerator
    )


def check_root(root: str, settings: Settings) -> None:
    if is_remote(root) or settings.is_shared(Path(root)):
        return
    raise ClusterRootError(
        f"pipeline root {root} is a folder of this machine only: in cluster mode (Ray at {settings.ray_address}) "
        "use an s3:// root every node reaches, or declare the folder shared with MILLPOND_SHARED_ROOTS"
    )


def check_cluster(
    settings: Settings, root: str, spec: dict[str, Any], platform_spec: dict[str, Any] | None = None
) -> None:
    """Everything cluster mode needs before a run is recorded; one UserError naming the first problem."""
    assert settings.ray_address
    require_ray()
    check_root(root, settings)
    check_shared_folders(settings, spec, platform_spec)
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


def check_shared_folders(settings: Settings, spec: dict[str, Any], platform_spec: dict[str, Any] | None) -> None:
    """Folders of this machine that tasks of the run share, refused unless every node has them
    (MILLPOND_SHARED_ROOTS): kfp's pipeline workspace, an importer's local file, and PVCs that are
    volume folders (a dataset's PVC is mounted on the node; a name or URI known only at run time
    fails its task instead).

    Neither is carried to the node as a task's private folders are: what one task writes there
    another reads, while both may run at once on different nodes (and a workspace is sized in GiB).
    """
    kubernetes = (platform_spec or {}).get("platforms", {}).get("kubernetes", {})
    workspaces = settings.home / "workspaces"
    if "workspace" in (kubernetes.get("pipelineConfig") or {}) and not settings.is_shared(workspaces):
        raise SharedFolderError(
            f"the pipeline's workspace ({WORKSPACE_PATH}, kfp's PipelineConfig) is a folder of this machine "
            f"({workspaces}) that the run's tasks share: in cluster mode declare it shared (the same folder on "
            "every Ray node) with MILLPOND_SHARED_ROOTS, or pass files between tasks as artifacts"
        )
    for label, executor in sorted(spec.get("deploymentSpec", {}).get("executors", {}).items()):
        constant = (executor.get("importer") or {}).get("artifactUri", {}).get("constant")
        problem = unshared_file(str(constant), settings) if constant is not None else None
        if problem:
            raise SharedFolderError(f"executor {_printable(label)}: {problem}")
    if settings.is_shared(settings.volumes_dir):
        return
    executors = (kubernetes.get("deploymentSpec") or {}).get("executors") or {}
    for label, config in sorted(executors.items()):
        for entry in config.get("pvcMount") or []:
            volume = _engine_volume(settings, spec, entry)
            if volume is not None:
                target = _printable(str(entry.get("mountPath") or ""))
                problem = volume_not_shared(target, volume, settings.volumes_dir)
                raise SharedFolderError(f"executor {_printable(label)}: {problem}")


def unshared_file(uri: str, settings: Settings) -> str | None:
    """Why the Ray nodes cannot read the imported artifact ``uri`` (a path of this machine), or None."""
    if "://" in uri or settings.is_shared(Path(uri)):
        return None  # a store every node reaches (s3://, …), or one the importer itself refuses
    return (
        f"importer: {_printable(uri)} is a file of this machine that the Ray nodes do not reach: in cluster "
        "mode import it from s3:// (where the pipeline root is) or from a folder declared shared with "
        "MILLPOND_SHARED_ROOTS"
    )


def _printable(text: str) -> str:
    """``text`` as it is, or quoted when it holds a line break or other control character (one line)."""
    return text if text.isprintable() else repr(text)


class SharedFolderError(UserError):
    """A folder of this machine that the tasks of a run share, in cluster mode, not declared shared."""


def _engine_volume(settings: Settings, spec: dict[str, Any], entry: dict[str, Any]) -> str | None:
    """How to name the PVC of ``entry`` when it is sure to be a volume folder; None when it is a
    dataset or only known at run time."""
    binding = entry.get("pvcNameParameter") or {}
    name = binding.get("runtimeValue", {}).get("constant") if binding else entry.get("constant")
    if isinstance(name, str) and name and "{{" not in name:
        return None if read_manifest(settings, "Dataset", name) is not None else f"volume {name!r}"
    producer = (binding.get("taskOutputParameter") or entry.get("taskOutputParameter") or {}).get("producerTask")
    if producer and _creates_pvc(spec, str(producer)):
        return f"the volume that task {_printable(str(producer))} (CreatePVC) makes"
    return None


def _creates_pvc(spec: dict[str, Any], task_name: str) -> bool:
    """Whether a task named ``task_name`` (in any DAG of ``spec``) is kfp-kubernetes' CreatePVC."""
    dags = [spec.get("root", {}).get("dag", {})] + [c.get("dag", {}) for c in spec.get("components", {}).values()]
    executors = spec.get("deploymentSpec", {}).get("executors", {})
    for dag in dags:
        task = (dag.get("tasks") or {}).get(task_name)
        if not task:
            continue
        component = spec.get("components", {}).get(task.get("componentRef", {}).get("name", ""), {})
        image = executors.get(component.get("executorLabel", ""), {}).get("container", {}).get("image", "")
        if is_create_pvc(str(image)):
            return True
    return False


_NOTHING = Grant(id="", gpus=())


class ClusterBudget:
    """The engine's budget in cluster mode: Ray places and queues; only the impossible is refused here."""

    gpus = 0  # GPUs are Ray's to hand out: the engine sets no CUDA_VISIBLE_DEVICES
    NODES_FRESH_S = 5.0  # how long the node table read for one task's check serves the next ones

    def __init__(self) -> None:
        self._nodes: list[ClusterNode] = []
        self._read_at = -math.inf

    def impossible(self, request: ResourceRequest) -> str | None:
        """Why no node could ever run it. The node table is read at most every ``NODES_FRESH_S`` (reading
        it cost ~3 ms a task on a 200-task fan-out); a request it refuses is checked against a fresh one."""
        wanted = ray_resources(demand(request))
        if time.monotonic() - self._read_at > self.NODES_FRESH_S:
            self._nodes, self._read_at = cluster_nodes(), time.monotonic()
        why = unmet(wanted, self._nodes)
        if why is not None:  # a node may have joined since: never refuse on a stale table
            self._nodes, self._read_at = cluster_nodes(), time.monotonic()
            why = unmet(wanted, self._nodes)
        return why

    def acquire(self, request: ResourceRequest, holder: Holder) -> Grant | None:
        return _NOTHING

    def release(self, grant: Grant) -> None:
        pass

    def why_waiting(self, request: ResourceRequest) -> str:
        return "waiting for a Ray node with room"

    def fallback_warning(self, request: ResourceRequest) -> str | None:
        return None

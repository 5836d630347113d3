"""What a training job is, whichever way it was asked for: Arena's flags, a Kubeflow manifest, the SDK.

Every front end (``arena submit``, ``millpond apply -f`` of a PyTorchJob/MPIJob/TFJob/TrainJob,
``TrainingClient.submit``) builds one ``JobSpec``; the supervisor runs it. Replicas are the
operators' model: a PyTorchJob has a Master and Workers, an MPIJob a Launcher and Workers, a
TFJob a Chief, Workers and PS. Arena's ``--workers N`` for pytorch counts the master (N
instances in all), as Arena's PyTorchJob does; for mpi it counts the workers (plus a launcher);
for tf it counts the workers (``--chief``/``--ps N`` add the others).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from millpond.scheduling.ledger import GpuShare, Request


class Trainer(str, Enum):
    """The kind of job, named as Arena names it (``arena get`` prints ``TRAINER``)."""

    PYTORCH = "pytorchjob"
    MPI = "mpijob"
    TF = "tfjob"
    RAY = "rayjob"  # a driver joining an existing Ray cluster (launch_ray)


class JobStatus(str, Enum):
    """Arena's statuses (``arena list``): a job waits QUEUING for resources, then PENDING while it starts."""

    QUEUING = "QUEUING"
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    @property
    def finished(self) -> bool:
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED)


class CleanTaskPolicy(str, Enum):
    """What happens to the other instances when the job ends (Kubeflow's ``cleanPodPolicy``)."""

    RUNNING = "Running"  # the default: instances still running are stopped
    ALL = "All"
    NONE = "None"


@dataclass(frozen=True)
class DataBinding:
    """``--data NAME:PATH``: millpond dataset NAME (a Fluid Dataset of the same namespace) seen at PATH."""

    dataset: str
    path: str


@dataclass(frozen=True)
class HostBinding:
    """``--data-dir HOST:PATH``: a host folder seen at PATH."""

    host: str
    path: str


@dataclass(frozen=True)
class ContainerImage:
    """What a replica's pod template says of its image, kept for running the instance in it
    (``training.images`` decides whether it does, once per job and image).

    ``args``: the container's ``args`` when it gave no ``command`` (``args_only``: the image's entrypoint
    runs them; on the host such an instance fails, saying so). ``memory_bytes``/``cpus``: its
    ``resources.limits`` (what a runtime enforces; 0 for none); ``shm_bytes``: an ``emptyDir`` of medium
    ``Memory`` mounted at ``/dev/shm`` (Arena's ``--share-memory``); ``runtime``: the pod template's
    ``millpond.io/runtime`` annotation ("" when it has none: the job's, then the settings', decide).
    """

    image: str
    pull_policy: str = ""  # "": Kubernetes' default for the tag (Always for :latest, else IfNotPresent)
    pull_secrets: tuple[str, ...] = ()  # the pod spec's imagePullSecrets, by name (Secrets of the job's namespace)
    args_only: bool = False
    args: tuple[str, ...] = ()
    memory_bytes: int = 0
    cpus: float = 0.0
    shm_bytes: int = 0
    runtime: str = ""


@dataclass(frozen=True)
class ReplicaSpec:
    """A group of identical instances: ``role`` is the operator's replica type, lower case
    (``master``, ``worker``, ``launcher``, ``chief``, ``ps``, ``evaluator``, ``node`` for TrainJob)."""

    role: str
    replicas: int
    command: tuple[str, ...]  # argv; Arena's command line is run as ("sh", "-c", LINE)
    resources: Request = Request()  # what ONE instance asks for: millicores, bytes, whole GPUs or a GPU share
    env: tuple[tuple[str, str], ...] = ()  # replica-specific variables, after the job's
    image: ContainerImage | None = None  # its pod template's image (None: none given, it runs on the host)


@dataclass(frozen=True)
class JobSpec:
    """One training job, as the supervisor runs it; stored whole (JSON) with the job."""

    name: str
    namespace: str
    trainer: Trainer
    replicas: tuple[ReplicaSpec, ...]
    image: str = ""  # the first replica's image (each replica's own is ``ReplicaSpec.image``)
    working_dir: str = ""  # "" = a fresh folder per job under the home
    env: tuple[tuple[str, str], ...] = ()
    data: tuple[DataBinding, ...] = ()
    data_dirs: tuple[HostBinding, ...] = ()
    retry: int = 0  # restarts of the whole job after a failure (Arena's --retry, Kubeflow's backoffLimit)
    running_timeout_s: int | None = None  # --running-timeout / activeDeadlineSeconds
    ttl_after_finished_s: int | None = None
    clean_task_policy: CleanTaskPolicy = CleanTaskPolicy.RUNNING
    nproc_per_node: int | None = None  # pytorch: run torchrun with this many processes per instance
    slots_per_worker: int | None = None  # mpi: an MPIJob's slotsPerWorker (ranks = workers × slots); None: --gpus or 1
    priority: str = ""  # a WorkloadPriorityClass (-p, the kueue.x-k8s.io/priority-class label)
    queue: str = ""  # a LocalQueue (--queue, the kueue.x-k8s.io/queue-name label): "" is not managed by Kueue
    user: str = ""  # who submitted it: the OS user, or the API caller ("" in specs stored before it was recorded)
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    share_memory: int = 0  # bytes of /dev/shm asked for (--share-memory); recorded
    # Cluster mode: the Ray cluster (HOST:PORT) its instances run on, "" for this machine, and the
    # placement group's strategy there (PACK: one node when they fit, else spread; STRICT_SPREAD...)
    ray_address: str = ""
    ray_placement: str = "PACK"
    source: str = "arena"  # arena | manifest | sdk: how it was submitted (what `get -o yaml` can show back)
    manifest: dict[str, Any] = field(default_factory=dict, compare=False)  # the applied manifest, if any

    @property
    def instances_on_ray(self) -> bool:
        """Whether the instances run as Ray tasks on ``ray_address`` (a rayjob's driver runs here and joins it)."""
        return bool(self.ray_address) and self.trainer is not Trainer.RAY

    @property
    def instance_count(self) -> int:
        return sum(replica.replicas for replica in self.replicas)

    @property
    def total(self) -> Request:
        """What all instances ask for together: the job starts only when all of it is free at once."""
        cpu = memory = gpus = 0
        shares: list[GpuShare] = []
        for replica in self.replicas:
            cpu += replica.resources.cpu_millis * replica.replicas
            memory += replica.resources.memory_bytes * replica.replicas
            gpus += replica.resources.gpus * replica.replicas
            shares += list(replica.resources.shares) * replica.replicas  # in instances() order
        return Request(cpu, memory, gpus, tuple(shares))

    def instances(self) -> list[tuple[ReplicaSpec, int]]:
        """Every instance as (its replica group, its index in the group), in the operators' order."""
        return [(replica, index) for replica in self.replicas for index in range(replica.replicas)]


def spec_to_json(spec: JobSpec) -> dict[str, Any]:
    """The spec as stored (a JSON column): plain lists and strings, read back by ``spec_from_json``."""
    data = asdict(spec)
    data["trainer"] = spec.trainer.value
    data["clean_task_policy"] = spec.clean_task_policy.value
    if spec.slots_per_worker is None:  # only an MPIJob manifest sets it: other specs are stored as before it existed
        del data["slots_per_worker"]
    if not spec.ray_address:  # a job on this machine is stored as before cluster mode existed
        del data["ray_address"], data["ray_placement"]
    if not spec.user:  # a spec read back from before users were recorded is written as it was
        del data["user"]
    for replica in data["replicas"]:
        if replica["image"] is None:  # a replica without an image is stored as before images were kept
            del replica["image"]
        if not replica["resources"]["shares"]:  # a job without GPU shares is stored as before they existed
            del replica["resources"]["shares"]
    return data


def _request(data: dict[str, Any] | None) -> Request:
    data = dict(data or {})
    shares = tuple(GpuShare(**share) for share in data.pop("shares", None) or ())
    return Request(**data, shares=shares)


def _image(data: dict[str, Any] | None) -> ContainerImage | None:
    if not data:
        return None
    return ContainerImage(**{**data, "pull_secrets": tuple(data.get("pull_secrets") or ()),
                             "args": tuple(data.get("args") or ())})


def _pairs(items: Any) -> tuple[tuple[str, str], ...]:
    return tuple((str(key), str(value)) for key, value in items or ())


def spec_from_json(data: dict[str, Any]) -> JobSpec:
    replicas = tuple(
        ReplicaSpec(
            role=r["role"], replicas=int(r["replicas"]), command=tuple(r["command"]),
            resources=_request(r.get("resources")), env=_pairs(r.get("env")), image=_image(r.get("image")),
        )
        for r in data["replicas"]
    )
    return JobSpec(
        name=data["name"], namespace=data["namespace"], trainer=Trainer(data["trainer"]), replicas=replicas,
        image=data.get("image", ""), working_dir=data.get("working_dir", ""), env=_pairs(data.get("env")),
        data=tuple(DataBinding(**d) for d in data.get("data") or ()),
        data_dirs=tuple(HostBinding(**d) for d in data.get("data_dirs") or ()),
        retry=int(data.get("retry") or 0), running_timeout_s=data.get("running_timeout_s"),
        ttl_after_finished_s=data.get("ttl_after_finished_s"),
        clean_task_policy=CleanTaskPolicy(data.get("clean_task_policy") or "Running"),
        nproc_per_node=data.get("nproc_per_node"), slots_per_worker=data.get("slots_per_worker"),
        priority=data.get("priority", ""), queue=data.get("queue", ""), user=data.get("user", ""),
        labels=_pairs(data.get("labels")), annotations=_pairs(data.get("annotations")),
        share_memory=int(data.get("share_memory") or 0), ray_address=data.get("ray_address", ""),
        ray_placement=data.get("ray_placement") or "PACK", source=data.get("source", "arena"),
        manifest=dict(data.get("manifest") or {}),
    )

"""Kubeflow's training manifests (``millpond apply -f``) checked and turned into ``JobSpec``s.

``kubeflow.org/v1`` PyTorchJob, TFJob and MPIJob (and the MPI Operator's ``v2beta1`` MPIJob)
become one replica group per replica type, in the operator's order; Trainer v2's TrainJob and
its runtimes are read in ``trainjobs``. Every document is checked against the JSON Schema
derived from its CRD (``datasets.schema_check``: one line naming the field), then what no CRD
can say (``pod_template``). A kind whose trainer has no planner in ``launch.PLANNERS`` yet is
refused with one line; it applies as soon as one is registered.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from millpond.datasets.fields import field_path, show
from millpond.datasets.schema_check import check_schema_file
from millpond.documents import plain_value
from millpond.errors import UserError
from millpond.scheduling.queues.model import PRIORITY_LABEL, QUEUE_LABEL
from millpond.scheduling.queues.submission import check_queue_name
from millpond.store.secrets import check_name
from millpond.training.builder import RAY_ADDRESS_VAR
from millpond.training.kinds import KINDS, TrainingKind, check_api_version
from millpond.training.launch import PLANNERS
from millpond.training.pod_template import read_pod
from millpond.training.spec import CleanTaskPolicy, DataBinding, HostBinding, JobSpec, ReplicaSpec, Trainer

_USER_METADATA = ("name", "namespace", "labels", "annotations", "generateName")
_SERVER_METADATA = frozenset({"uid", "creationTimestamp", "resourceVersion", "generation", "managedFields",
                              "selfLink", "finalizers", "ownerReferences", "deletionTimestamp"})
# Replica types in the operator's order (the first is rank 0's), and the field that holds them.
REPLICAS = {
    "PyTorchJob": ("pytorchReplicaSpecs", ("Master", "Worker")),
    "TFJob": ("tfReplicaSpecs", ("Chief", "Master", "Worker", "PS", "Evaluator")),
    "MPIJob": ("mpiReplicaSpecs", ("Launcher", "Worker")),
}
# Fields that only mean something on a cluster: accepted, recorded, named in one info line.
_CLUSTER_ONLY = ("elasticPolicy", "suspend", "managedBy", "launcherCreationPolicy", "sshAuthMountPath",
                 "mpiImplementation", "successPolicy", "enableDynamicWorker",
                 "podTemplateOverrides", "podSpecOverrides")

RuntimeLookup = Callable[[str, str, str], "dict[str, Any] | None"]  # (kind, name, namespace) -> manifest


@dataclass
class TrainingManifest:
    """One checked document: a job (``spec`` set) or a runtime (recorded, runs nothing)."""

    info: TrainingKind
    body: dict[str, Any]
    spec: JobSpec | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"]["namespace"])


def _envelope(doc: dict[str, Any], info: TrainingKind) -> dict[str, Any]:
    api_version = check_api_version(info, doc.get("apiVersion"))
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict) or not metadata.get("name"):
        raise UserError(f"{info.kind}: metadata.name: required field is missing (generateName is not supported)")
    name = str(metadata["name"])
    namespace = "" if info.cluster_scoped else str(metadata.get("namespace") or "default")
    for key, value in (("name", name), ("namespace", namespace)):
        if value or key == "name":
            try:
                check_name(info.kind if key == "name" else "namespace", value)
            except UserError as exc:
                named = f"{info.kind} {name}" if name.isprintable() else info.kind  # a line break: exc shows it
                raise UserError(f"{named}: metadata.{key}: {exc}") from None
    for key, value in metadata.items():
        if key not in _USER_METADATA and key not in _SERVER_METADATA:
            raise UserError(f'{info.kind} {name}: unknown field "metadata.{key}"')
        if key in ("labels", "annotations") and not (
            isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        ):
            raise UserError(f"{info.kind} {name}: metadata.{key}: expected a map of strings")
    kept: dict[str, Any] = {"name": name, "namespace": namespace}
    kept.update({key: metadata[key] for key in ("labels", "annotations") if key in metadata})
    return {"apiVersion": api_version, "kind": info.kind, "metadata": kept, "spec": doc.get("spec") or {}}


def check_document(doc: Any, source: str, number: int, runtimes: RuntimeLookup) -> TrainingManifest:
    """One training document checked and converted; UserError names the file, object and field."""
    where = f"{source}: document {number}"
    doc = plain_value(doc, where)
    info = KINDS[doc["kind"]]
    try:
        body = _envelope(doc, info)
        label = f"{info.kind} {body['metadata']['name']}"
        try:
            check_schema_file(info.schema_file(body["apiVersion"]), {**doc, "spec": body["spec"]})
            manifest = _convert(info, body, runtimes)
        except UserError as exc:
            raise UserError(f"{label}: {exc}") from None
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    return manifest


def _convert(info: TrainingKind, body: dict[str, Any], runtimes: RuntimeLookup) -> TrainingManifest:
    from millpond.training import trainjobs

    if info.trainer is None:
        return TrainingManifest(info, body, notes=trainjobs.runtime_notes(body))
    if info.kind == "TrainJob":
        spec, notes = trainjobs.trainjob_spec(body, runtimes)
    else:
        spec, notes = replica_job_spec(info, body)
    if spec.trainer not in PLANNERS:
        raise UserError(f"{info.kind} is not runnable yet: this millpond has no {spec.trainer.value} launcher")
    spec, notes = _on_ray(spec, notes)
    return TrainingManifest(info, body, spec, notes)


def _on_ray(spec: JobSpec, notes: list[str]) -> tuple[JobSpec, list[str]]:
    """With ``$MILLPOND_RAY_ADDRESS`` set, a pytorch job (PyTorchJob, a torch TrainJob) runs on the Ray
    cluster as ``arena submit pytorch`` does (PACK placement); an MPIJob or TFJob, whose launchers assume
    one machine, and a job binding a hostPath folder run here, saying why, rather than being refused."""
    address = os.environ.get(RAY_ADDRESS_VAR, "").strip()
    if not address:
        return spec, notes
    if spec.trainer is not Trainer.PYTORCH:
        return spec, [*notes, f"runs on this machine, not on the Ray cluster at {address} "
                              f"({spec.trainer.value} launchers assume one machine)"]
    if spec.data_dirs:
        return spec, [*notes, f"runs on this machine, not on the Ray cluster at {address} "
                              "(a hostPath volume is a folder of this machine)"]
    return replace(spec, ray_address=address, ray_placement="PACK"), notes


def cluster_only_notes(spec: dict[str, Any]) -> list[str]:
    found = [name for name in _CLUSTER_ONLY if _dig(spec, name.split(".")) is not None]
    return [f"only meaningful on a cluster, recorded: {', '.join(found)}"] if found else []


def _dig(value: Any, path: list[str]) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def replica_job_spec(info: TrainingKind, body: dict[str, Any]) -> tuple[JobSpec, list[str]]:
    """A v1 (or v2beta1 MPIJob) job: one replica group per replica type, in the operator's order."""
    spec = body["spec"]
    holder, order = REPLICAS[info.kind]
    groups: dict[str, Any] = spec.get(holder) or {}
    for key in groups:
        if key not in order:
            raise UserError(f"{field_path(['spec', holder, key])}: unknown replica type {show(key)} "
                            f"(a {info.kind} has {', '.join(order)})")
    if not groups:
        raise UserError(f"{field_path(['spec', holder])}: a job needs at least one replica type")
    replicas, images, notes = [], [], cluster_only_notes(spec)
    data: list[DataBinding] = []
    data_dirs: list[HostBinding] = []
    working_dirs = set()
    nproc = _nproc(info, spec)
    total = sum(int(group.get("replicas", 1)) for group in groups.values())
    for role in order:
        group = groups.get(role)
        if group is None:
            continue
        where: list[str | int] = ["spec", holder, role, "template", "spec"]
        container = read_pod((group.get("template") or {}).get("spec") or {}, info.container, where)
        count = int(group.get("replicas", 1))
        if count < 0:
            raise UserError(f"{field_path(['spec', holder, role, 'replicas'])}: {count} is below the minimum 0")
        env = container.env
        if nproc is not None:
            env = (("PET_NPROC_PER_NODE", str(nproc)), ("WORLD_SIZE", str(total * nproc)), *env)
        replicas.append(ReplicaSpec(role.lower(), count, container.argv, container.resources, env))
        images.append(container.image)
        data += [d for d in container.data if d not in data]
        data_dirs += [d for d in container.data_dirs if d not in data_dirs]
        working_dirs.add(container.working_dir)
        notes += container.notes
    if info.kind == "PyTorchJob" and int((groups.get("Master") or {}).get("replicas", 1)) > 1:
        raise UserError(f"{field_path(['spec', holder, 'Master', 'replicas'])}: a PyTorchJob has one master")
    run_policy = dict(spec.get("runPolicy") or {})
    if "cleanPodPolicy" in spec:  # MPIJob v1 also has it at the top
        run_policy.setdefault("cleanPodPolicy", spec["cleanPodPolicy"])
    job = _job_spec(body, info.trainer or Trainer.PYTORCH, tuple(replicas), images, run_policy,
                    data, data_dirs, working_dirs)
    slots = spec.get("slotsPerWorker")
    if info.kind == "MPIJob" and slots is not None:
        if int(slots) < 1:
            raise UserError(f"spec.slotsPerWorker: {show(slots)} is below the minimum 1")
        job = replace(job, slots_per_worker=int(slots))
    return job, notes


def _nproc(info: TrainingKind, spec: dict[str, Any]) -> int | None:
    """A PyTorchJob's processes per instance (``nprocPerNode``, or the elastic policy's); ``auto`` is 1 on CPU."""
    if info.kind != "PyTorchJob":
        return None
    value = spec.get("nprocPerNode", (spec.get("elasticPolicy") or {}).get("nProcPerNode"))
    if value is None or value == "auto":
        return None
    if not str(value).isdigit() or int(value) < 1:
        raise UserError(f"spec.nprocPerNode: {show(value)} is not a positive number or auto")
    return int(value)


def _job_spec(body: dict[str, Any], trainer: Trainer, replicas: tuple[ReplicaSpec, ...], images: list[str],
              run_policy: dict[str, Any], data: list[DataBinding], data_dirs: list[HostBinding],
              working_dirs: set[str]) -> JobSpec:
    """What every job kind shares: metadata, runPolicy (clean-up, retries, deadline, TTL, queue).

    Kueue's labels name the job's LocalQueue and WorkloadPriorityClass; a priority class label
    wins over ``schedulingPolicy.priorityClass`` (a Kubernetes PriorityClass), as Kueue takes a
    workload's priority from the label first. ``schedulingPolicy.queue`` is Volcano's queue, not
    Kueue's: recorded in the manifest, it leaves the job outside Kueue (as Kueue ignores it).
    """
    metadata = body["metadata"]
    labels = metadata.get("labels") or {}
    scheduling = run_policy.get("schedulingPolicy") or {}
    if len(working_dirs - {""}) > 1:
        raise UserError("workingDir: the replicas' containers name different working folders; give them one")
    clean = run_policy.get("cleanPodPolicy") or "Running"
    return JobSpec(
        name=metadata["name"], namespace=metadata["namespace"], trainer=trainer, replicas=replicas,
        image=next((image for image in images if image), ""), working_dir=next(iter(working_dirs - {""}), ""),
        data=tuple(data), data_dirs=tuple(data_dirs), retry=int(run_policy.get("backoffLimit") or 0),
        running_timeout_s=run_policy.get("activeDeadlineSeconds"),
        ttl_after_finished_s=run_policy.get("ttlSecondsAfterFinished"),
        clean_task_policy=CleanTaskPolicy(clean),
        priority=str(labels.get(PRIORITY_LABEL) or scheduling.get("priorityClass") or ""),
        queue=check_queue_name(str(labels.get(QUEUE_LABEL) or ""), f"metadata.labels[{QUEUE_LABEL}]"),
        labels=tuple(sorted(labels.items())), annotations=tuple(sorted((metadata.get("annotations") or {}).items())),
        source="manifest", manifest=body,
    )

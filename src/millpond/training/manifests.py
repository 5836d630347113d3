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
from typing import Any

from millpond.datasets.fields import field_path, show
from millpond.datasets.schema_check import check_schema_file
from millpond.documents import plain_value
from millpond.errors import UserError
from millpond.manifest_envelope import ManifestBody, check_metadata
from millpond.training import trainjobs
from millpond.training.builder import RAY_ADDRESS_VAR
from millpond.training.job_fields import RuntimeLookup, cluster_only_notes, job_spec
from millpond.training.kinds import KINDS, TrainingKind, check_api_version
from millpond.training.launch import PLANNERS
from millpond.training.pod_template import read_pod
from millpond.training.spec import DataBinding, HostBinding, JobSpec, ReplicaSpec, Trainer

__all__ = ["REPLICAS", "RuntimeLookup", "TrainingManifest", "check_document", "cluster_only_notes",
           "replica_job_spec"]

# Replica types in the operator's order (the first is rank 0's), and the field that holds them.
REPLICAS = {
    "PyTorchJob": ("pytorchReplicaSpecs", ("Master", "Worker")),
    "TFJob": ("tfReplicaSpecs", ("Chief", "Master", "Worker", "PS", "Evaluator")),
    "MPIJob": ("mpiReplicaSpecs", ("Launcher", "Worker")),
}


@dataclass
class TrainingManifest(ManifestBody):
    """One checked document: a job (``spec`` set) or a runtime (recorded, runs nothing; a cluster-scoped one's
    namespace is "")."""

    info: TrainingKind
    body: dict[str, Any]
    spec: JobSpec | None = None
    notes: list[str] = field(default_factory=list)


def _body(doc: dict[str, Any], info: TrainingKind) -> dict[str, Any]:
    """What is stored: the shared envelope (a job may carry ``generateName`` beside its name, dropped)."""
    api_version = check_api_version(info, doc.get("apiVersion"))
    kept = check_metadata(info.kind, doc.get("metadata"), namespaced=not info.cluster_scoped, generate_name=True)
    metadata = {"name": kept.pop("name"), "namespace": kept.pop("namespace", ""), **kept}
    return {"apiVersion": api_version, "kind": info.kind, "metadata": metadata, "spec": doc.get("spec") or {}}


def check_document(doc: Any, source: str, number: int, runtimes: RuntimeLookup) -> TrainingManifest:
    """One training document checked and converted; UserError names the file, object and field."""
    where = f"{source}: document {number}"
    doc = plain_value(doc, where)
    info = KINDS[doc["kind"]]
    try:
        body = _body(doc, info)
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
        template = group.get("template") or {}
        container = read_pod(template.get("spec") or {}, info.container, where,
                             (template.get("metadata") or {}).get("annotations"))
        count = int(group.get("replicas", 1))
        if count < 0:
            raise UserError(f"{field_path(['spec', holder, role, 'replicas'])}: {count} is below the minimum 0")
        env = container.env
        if nproc is not None:
            env = (("PET_NPROC_PER_NODE", str(nproc)), ("WORLD_SIZE", str(total * nproc)), *env)
        replicas.append(ReplicaSpec(role.lower(), count, container.argv, container.resources, env,
                                    container.image_spec))
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
    job = job_spec(body, info.trainer or Trainer.PYTORCH, tuple(replicas), images, run_policy,
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

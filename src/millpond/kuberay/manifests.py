"""A KubeRay document checked for ``apply``: schema, KubeRay's webhook rules, and what this machine can hold.

The first problem is one line naming the file, the document, the object and the field; nothing is
stored. A RayService or RayCronJob is refused (``kinds.REFUSED``). ``metadata.generateName`` with no
name gets a name as Kubernetes makes one (the prefix and five characters), as ``kubectl create``
of KubeRay's samples does. The cluster (a RayCluster's spec, a RayJob's rayClusterSpec) is read by
``specs.cluster_spec`` and measured against the machine (``specs.capacity_refusal``: counts and
CPUs no wait could ever satisfy); a request larger than what is free now waits instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from millpond.documents import plain_value
from millpond.errors import UserError
from millpond.kind_handler import SchemaCheck
from millpond.kuberay.job_specs import JobSpec, job_spec
from millpond.kuberay.kinds import GROUP, KINDS, RayKind, check_api_version, refusal
from millpond.kuberay.nodes import pod_suffix
from millpond.kuberay.specs import ClusterSpec, capacity_refusal, cluster_spec
from millpond.manifest_envelope import ManifestBody, check_metadata, is_document_of
from millpond.scheduling import machine, pod_room


@dataclass
class RayManifest(ManifestBody):
    info: RayKind
    body: dict[str, Any]
    cluster: ClusterSpec | None
    job: JobSpec | None
    notes: tuple[str, ...] = ()


def is_ray_document(doc: object) -> bool:
    """A document of a KubeRay kind, applied here or refused here (rather than called an unknown kind)."""
    return (is_document_of(doc, KINDS, refusal) and isinstance(doc, dict)
            and str(doc.get("apiVersion", "")).startswith(f"{GROUP}/"))


def _metadata(info: RayKind, doc: dict[str, Any]) -> dict[str, Any]:
    metadata = doc.get("metadata")
    if isinstance(metadata, dict) and not metadata.get("name") and isinstance(metadata.get("generateName"), str):
        metadata = {**metadata, "name": f"{metadata['generateName']}{pod_suffix()}"}
    return check_metadata(info.kind, metadata, namespaced=True, generate_name=True)


def check_document(doc: Any, source: str, number: int, validate: SchemaCheck) -> RayManifest:
    where = f"{source}: document {number}"
    refused = refusal(doc)
    if refused is not None:
        raise UserError(f"{where}: {refused}")
    doc = plain_value(doc, where)
    info = KINDS[doc["kind"]]
    try:
        check_api_version(info, doc.get("apiVersion"))
        metadata = _metadata(info, doc)
        label = f"{info.kind} {metadata['name']}"
        try:
            validate(info.schema_file(), {**doc, "metadata": metadata})
            body = {"apiVersion": doc["apiVersion"], "kind": info.kind, "metadata": metadata,
                    "spec": doc.get("spec") or {}}
            cluster, job = None, None
            if info.kind == "RayCluster":
                cluster = cluster_spec(body["spec"], ["spec"])
            else:
                job = job_spec(body["spec"])
                cluster = job.cluster
            if cluster is not None:
                why = capacity_refusal(cluster, machine.memory_bytes(), pod_room.max_pods(), pod_room.max_processes())
                if why:
                    raise UserError(f"can never run on this machine: {why}")
        except UserError as exc:
            raise UserError(f"{label}: {exc}") from None
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    notes = (*(cluster.notes if cluster else ()), *(job.notes if job else ()))
    return RayManifest(info, body, cluster, job, notes)

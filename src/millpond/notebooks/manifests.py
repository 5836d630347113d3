"""A Notebook document checked for ``apply``: schema, the controller's rules, and what this machine can hold.

The first problem is one line naming the file, the document, the notebook and the field; nothing is
stored. The name is a DNS-1123 label, not only a subdomain: the notebook controller names a
StatefulSet, a Service and the pod label ``statefulset`` after it. As the controller does, the first
container of ``spec.template.spec`` is the notebook's (its ``image`` and ``env`` are read; its
``resources`` limits, else requests, of ``cpu``, ``memory``, ``nvidia.com/gpu`` and the GPU-share
resources, through ``training.pod_template.resources``). A request no wait could satisfy on this
machine (more CPUs, memory or GPUs than it has) is refused; one that does not fit now waits.

The image runs when the runtime policy lets it (``notebooks.in_image``; its other fields are read
there, at start). Its ``volumes``, ``volumeMounts``, ``env[].valueFrom`` and ``envFrom`` are read by
``notebooks.volumes`` (checked here, resolved when the server starts). Simplified: sidecar containers
and scheduling fields are accepted and recorded only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from millpond.documents import plain_value
from millpond.errors import UserError
from millpond.kind_handler import SchemaCheck
from millpond.manifest_envelope import ManifestBody, check_metadata, is_document_of
from millpond.names import label_problem
from millpond.notebooks import in_image
from millpond.notebooks.kinds import GROUP, NOTEBOOK, schema_file
from millpond.notebooks.volumes import MountPlan, read_mounts
from millpond.scheduling.ledger import Ledger, Request
from millpond.settings import Settings
from millpond.training.pod_template import GPU, env_pairs, resources


@dataclass(frozen=True)
class NotebookSpec:
    """What runs for a Notebook: its container's name, image, environment, requests and mounts (with the
    environment it takes from Secrets and ConfigMaps)."""

    container: str
    image: str
    env: tuple[tuple[str, str], ...]
    request: Request
    mounts: MountPlan = MountPlan()


@dataclass
class NotebookManifest(ManifestBody):
    body: dict[str, Any]
    spec: NotebookSpec


def is_notebook_document(doc: object) -> bool:
    return (is_document_of(doc, {NOTEBOOK.kind}, lambda _: None) and isinstance(doc, dict)
            and str(doc.get("apiVersion", "")).startswith(f"{GROUP}/"))


def notebook_spec(spec: dict[str, Any]) -> NotebookSpec:
    """The notebook's container read from ``spec.template.spec`` (the controller's: the first container)."""
    pod = (spec.get("template") or {}).get("spec") or {}
    containers = pod.get("containers") or []
    if not containers:
        raise UserError("spec.template.spec.containers: at least one container is required")
    container = containers[0]
    where: list[str | int] = ["spec", "template", "spec", "containers", 0]
    plain = [item for item in container.get("env") or () if item.get("valueFrom") is None]  # the rest: mounts
    return NotebookSpec(container=str(container.get("name") or ""), image=str(container.get("image") or ""),
                        env=env_pairs(plain, [*where, "env"]),
                        request=resources(container.get("resources"), [*where, "resources"]),
                        mounts=read_mounts(pod, container, where))


def check_document(doc: Any, source: str, number: int, validate: SchemaCheck, settings: Settings) -> NotebookManifest:
    where = f"{source}: document {number}"
    doc = plain_value(doc, where)
    try:
        schema = schema_file(str(doc.get("apiVersion") or ""))
        metadata = check_metadata(NOTEBOOK.kind, doc.get("metadata"), namespaced=True)
        label = f"Notebook {metadata['name']}"
        problem = label_problem(metadata["name"])
        if problem:
            raise UserError(f"{label}: metadata.name: invalid Notebook name {metadata['name']!r}: {problem} "
                            "(it names the notebook's StatefulSet and Service)")
        try:
            validate(schema, {**doc, "metadata": metadata})
            body = {"apiVersion": doc["apiVersion"], "kind": NOTEBOOK.kind, "metadata": metadata,
                    "spec": doc.get("spec") or {}}
            spec = notebook_spec(body["spec"])
            in_image.check(metadata, body["spec"])
            why = Ledger(settings).impossible(spec.request, GPU)
            if why:
                raise UserError(f"spec.template.spec.containers[0].resources: can never run on this machine: {why}")
        except UserError as exc:
            raise UserError(f"{label}: {exc}") from None
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    return NotebookManifest(body, spec)

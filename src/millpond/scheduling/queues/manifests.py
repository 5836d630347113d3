"""Kueue's queueing manifests (``millpond apply -f``) checked, as Kueue's API server and webhooks would.

Each document goes through the same steps as a Fluid or Kubeflow one: its apiVersion (``v1beta2``
or ``v1beta1``), its metadata (a name, and a namespace for a LocalQueue only: the others are
cluster-scoped), the JSON Schema derived from its CRD, then Kueue's own rules (``checks``) and
the conversion to ``queues.model`` records (``specs``), so what is stored is known to mean
something. The first problem is one line naming the file, document, object and field.

The schema validator is passed in (``datasets.schema_check.check_schema_file`` at the CLI and
the server): it sits in a layer above this one, and one validator names fields one way.

What Kueue offers but cannot mean anything here is refused in one line: the kinds of
``kinds.REFUSED``, a ClusterQueue's admission checks (no controller would ever pass them: the
queue would admit nothing), a ResourceFlavor's ``topologyName``. What is accepted and recorded
but changes nothing on one machine (fair sharing, taints and tolerations, concurrent admission)
is named in an info line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from millpond.documents import plain_value
from millpond.errors import UserError
from millpond.kind_handler import SchemaCheck
from millpond.manifest_envelope import ManifestBody, check_metadata, is_document_of
from millpond.scheduling.queues import checks, specs
from millpond.scheduling.queues.kinds import KINDS, REFUSED, QueueKind, check_api_version, refusal

__all__ = ["QueueManifest", "SchemaCheck", "check_document", "is_queue_document"]

# Recorded, but without effect on one machine or a Ray cluster: (kind, field under spec).
_NO_EFFECT = {
    "ClusterQueue": ("fairSharing", "admissionScope", "concurrentAdmissionPolicy"),
    "LocalQueue": ("fairSharing",),
    "Cohort": ("fairSharing",),
    "ResourceFlavor": ("nodeTaints", "tolerations"),
}
_ADMISSION_CHECKS = ("spec.{field}: admission checks are run by controllers of a Kubernetes cluster "
                     "(MultiKueue, ProvisioningRequest); here none would ever pass and the queue would admit nothing")


@dataclass
class QueueManifest(ManifestBody):
    """One checked document, ready for the resource store (a LocalQueue's namespace; "" for the others)."""

    info: QueueKind
    body: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def is_queue_document(doc: object) -> bool:
    """A document of a Kueue kind, applied here or refused here (rather than called an unknown kind)."""
    return is_document_of(doc, KINDS, refusal)


def _body(doc: dict[str, Any], info: QueueKind) -> dict[str, Any]:
    """What is stored: the shared envelope, with a WorkloadPriorityClass's value where Kueue keeps it."""
    api_version = check_api_version(info, doc.get("apiVersion"))
    kept = check_metadata(info.kind, doc.get("metadata"), namespaced=not info.cluster_scoped)
    body = {"apiVersion": api_version, "kind": info.kind, "metadata": kept}
    if info.kind == "WorkloadPriorityClass":  # value and description sit at the top, as in PriorityClass
        body.update({key: doc[key] for key in ("value", "description") if key in doc})
    else:
        body["spec"] = doc.get("spec") or {}
    return body


def _rules(info: QueueKind, body: dict[str, Any]) -> list[str]:
    """Kueue's rules beyond the schema and millpond's refusals; the info notes of what has no effect here."""
    spec = body.get("spec") or {}
    name = body["metadata"]["name"]
    if info.kind == "ClusterQueue":
        for key in ("admissionChecks", "admissionChecksStrategy"):
            if spec.get(key):
                raise UserError(_ADMISSION_CHECKS.format(field=key))
        checks.cluster_queue(spec)
        specs.cluster_queue(name, spec)
    elif info.kind == "Cohort":
        checks.cohort(spec)
        specs.cohort(name, spec)
    elif info.kind == "ResourceFlavor":
        if spec.get("topologyName"):
            raise UserError(f"spec.topologyName: {REFUSED['Topology']}")
        specs.resource_flavor(name, spec)
    elif info.kind == "LocalQueue":
        if not spec.get("clusterQueue"):  # immutable: a queue created without one could never be mended
            raise UserError("spec.clusterQueue: required field is missing")
        specs.local_queue(name, body["metadata"]["namespace"], spec)
    else:
        specs.priority_class(name, body)
    ignored = [key for key in _NO_EFFECT.get(info.kind, ()) if spec.get(key) not in (None, {}, [])]
    if "preference" in (spec.get("flavorFungibility") or {}):
        ignored.append("flavorFungibility.preference")
    return [f"recorded, no effect here: {', '.join(f'spec.{key}' for key in ignored)}"] if ignored else []


def check_document(doc: Any, source: str, number: int, validate: SchemaCheck) -> QueueManifest:
    """One Kueue document checked; UserError (one line) names the file, document, object and field."""
    where = f"{source}: document {number}"
    refused = refusal(doc)
    if refused is not None:
        raise UserError(f"{where}: {refused}")
    doc = plain_value(doc, where)
    if not is_queue_document(doc):
        raise UserError(f"{where}: kind: {doc.get('kind')!r} is not one of Kueue's {', '.join(KINDS)}")
    info = KINDS[doc["kind"]]
    try:
        body = _body(doc, info)
        label = f"{info.kind} {body['metadata']['name']}"
        try:
            validate(info.schema_file(body["apiVersion"]), doc)
            notes = _rules(info, body)
        except UserError as exc:
            raise UserError(f"{label}: {exc}") from None
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    return QueueManifest(info, body, notes)

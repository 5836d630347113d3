"""KServe's serving manifests (``millpond apply -f``) checked, as KServe's API server and webhook would.

Each document goes through the same steps as a Fluid, Kubeflow or Kueue one: its apiVersion
(``serving.kserve.io/v1beta1`` for an InferenceService, ``v1alpha1`` for the runtimes), its
metadata (a name; a namespace unless cluster-scoped), the JSON Schema derived from its CRD, then
KServe's webhook rules and the conversion to a :class:`~millpond.serving.spec.PredictorSpec`,
so what is stored is known to mean something, and replicas this machine can never hold
(``capacity.count_refusal``). The first problem is one line naming the file,
document, object and field.

An InferenceService millpond cannot start here (an xgboost model, a custom container with only
an image, an ``oci://`` model) is accepted, as KServe accepts it; its status says why (Ready
False), and an info line says so at apply. KServe's kinds that cannot mean anything here
(``kinds.REFUSED``: InferenceGraph, TrainedModel, LLMInferenceService, …) are refused in one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from millpond.documents import plain_value
from millpond.errors import UserError
from millpond.kind_handler import SchemaCheck
from millpond.manifest_envelope import ManifestBody, check_metadata, is_document_of
from millpond.serving.capacity import count_refusal
from millpond.serving.kinds import KINDS, ServingKind, check_api_version, refusal
from millpond.serving.spec import PredictorSpec, predictor_spec

__all__ = ["SchemaCheck", "ServingManifest", "check_document", "is_serving_document"]


@dataclass
class ServingManifest(ManifestBody):
    """One checked document, ready for the resource store; ``predictor`` for an InferenceService (the
    namespace is "" for a ClusterServingRuntime)."""

    info: ServingKind
    body: dict[str, Any]
    predictor: PredictorSpec | None = None
    notes: list[str] = field(default_factory=list)


def is_serving_document(doc: object) -> bool:
    """A document of a KServe kind, applied here or refused here (rather than called an unknown kind)."""
    return is_document_of(doc, KINDS, refusal)


def _body(doc: dict[str, Any], info: ServingKind) -> dict[str, Any]:
    """What is stored: the shared envelope, an InferenceService's name held to KServe's DNS-label rule."""
    api_version = check_api_version(info, doc.get("apiVersion"))
    metadata = check_metadata(info.kind, doc.get("metadata"), namespaced=not info.cluster_scoped)
    name = metadata["name"]
    if info.kind == "InferenceService" and (not name[0].isalpha() or "." in name or len(name) > 63):
        # KServe: the name is a DNS label of the service's host name, led by a letter.
        raise UserError(f"{info.kind}: metadata.name: {name!r}: an InferenceService name must consist of lower "
                        "case alphanumeric characters or '-', start with a letter and be at most 63 characters")
    return {"apiVersion": api_version, "kind": info.kind, "metadata": metadata, "spec": doc.get("spec") or {}}


def _notes(predictor: PredictorSpec, body: dict[str, Any]) -> list[str]:
    """Info lines: why it will not start here, and the parts recorded but not run or read."""
    notes = []
    if predictor.unservable is not None:
        notes.append(f"accepted, not served here: {predictor.unservable}")
    raw = body["spec"]["predictor"]
    component = raw.get(predictor.implementation)
    parts = [f"spec.{part}" for part in ("transformer", "explainer") if getattr(predictor, part)]
    parts += ["spec.predictor.storageUris"] if raw.get("storageUris") else []
    parts += [f"spec.predictor.{predictor.implementation}.storage (a storage-config Secret's key)"
              ] if isinstance(component, dict) and component.get("storage") else []
    if parts:
        notes.append(f"recorded, not run or read here: {', '.join(parts)} (requests go to the predictor, "
                     "whose model is read from its storageUri)")
    return notes


def check_document(doc: Any, source: str, number: int, validate: SchemaCheck) -> ServingManifest:
    """One KServe document checked; UserError (one line) names the file, document, object and field."""
    where = f"{source}: document {number}"
    refused = refusal(doc)
    if refused is not None:
        raise UserError(f"{where}: {refused}")
    doc = plain_value(doc, where)
    if not is_serving_document(doc):
        raise UserError(f"{where}: kind: {doc.get('kind')!r} is not one of KServe's {', '.join(KINDS)}")
    info = KINDS[doc["kind"]]
    try:
        body = _body(doc, info)
        label = f"{info.kind} {body['metadata']['name']}"
        try:
            validate(info.schema_file, doc)
            if info.kind != "InferenceService":
                return ServingManifest(info, body)
            predictor = predictor_spec(body)
            too_many = count_refusal(predictor)
            if too_many is not None:
                raise UserError(too_many)
        except UserError as exc:
            raise UserError(f"{label}: {exc}") from None
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    return ServingManifest(info, body, predictor, _notes(predictor, body))

"""SeldonDeployment manifests (``millpond apply -f``) checked as Seldon's API server and webhook would.

The same steps as every kind's: the apiVersion (``machinelearning.seldon.io/v1``, ``v1alpha2`` or ``v1alpha3``),
the metadata (a name, a namespace), the JSON Schema derived from Seldon's CRD, then Seldon's webhook rules
(``graph.check_predictors``) and the reading of each predictor as millpond serves it (``graph.read_predictors``,
with ``capacity.count_refusal``: replicas this machine can never hold). The first problem is one line naming
the file, document, object and field; nothing is stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from millpond.documents import plain_value
from millpond.errors import UserError
from millpond.kind_handler import SchemaCheck
from millpond.manifest_envelope import ManifestBody, check_metadata
from millpond.serving.capacity import count_refusal
from millpond.serving.seldon.graph import SeldonPredictor, check_predictors, read_predictors
from millpond.serving.seldon.kinds import KIND, schema_file


@dataclass
class SeldonManifest(ManifestBody):
    """One checked SeldonDeployment, ready for the resource store, with its predictors as served."""

    body: dict[str, Any]
    predictors: list[SeldonPredictor]
    notes: list[str] = field(default_factory=list)


def is_seldon_document(doc: object) -> bool:
    return isinstance(doc, dict) and doc.get("kind") == KIND


def _notes(predictors: list[SeldonPredictor], spec: dict[str, Any]) -> list[str]:
    """Info lines: what will not run here, and what is recorded but not acted on."""
    notes = [f"predictor {p.name}: accepted, not served here: {p.unservable}" for p in predictors if p.unservable]
    notes += [f"predictor {p.name}: a shadow: it runs, and gets no copy of the traffic here" for p in predictors
              if p.shadow]
    recorded = [f"spec.{key}" for key in ("serverType", "transport") if spec.get(key)]
    recorded += sorted({f"spec.predictors[].{key}" for p in spec.get("predictors") or [] for key in
                        ("explainer", "svcOrchSpec", "engineResources") if p.get(key)})
    recorded += sorted({"spec.predictors[].componentSpecs[].hpaSpec" for p in spec.get("predictors") or []
                        for c in p.get("componentSpecs") or [] if (c or {}).get("hpaSpec")})
    if recorded:
        notes.append(f"recorded, not run or read here: {', '.join(recorded)}")
    return notes


def check_document(doc: Any, source: str, number: int, validate: SchemaCheck) -> SeldonManifest:
    """One SeldonDeployment checked; UserError (one line) names the file, document, object and field."""
    where = f"{source}: document {number}"
    doc = plain_value(doc, where)
    try:
        schema = schema_file(doc.get("apiVersion"))
        metadata = check_metadata(KIND, doc.get("metadata"), namespaced=True)
        label = f"{KIND} {metadata['name']}"
        spec: dict[str, Any] = doc.get("spec") or {}
        body = {"apiVersion": str(doc["apiVersion"]), "kind": KIND, "metadata": metadata, "spec": spec}
        try:
            validate(schema, doc)
            check_predictors(spec)
            predictors = read_predictors(body)
            for predictor in predictors:
                units = [(f" unit {u.name}", u.spec) for u in predictor.graph_units]
                for who, served in [("", predictor.spec), *units]:
                    too_many = count_refusal(served)
                    if too_many is not None:
                        raise UserError(f"predictor {predictor.name}{who}: {too_many}")
        except UserError as exc:
            raise UserError(f"{label}: {exc}") from None
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    return SeldonManifest(body, predictors, _notes(predictors, spec))

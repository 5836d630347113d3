"""An Experiment document checked for ``apply``: envelope, schema, Katib's defaults and webhook rules.

The first problem is one line naming the file, the document, the Experiment and the field; nothing is
stored. The body stored is the defaulted one (``kubectl get experiment -o yaml`` shows what Katib's
mutating webhook would have written). Trials and Suggestions are made by an Experiment's controller: an
apply of one is refused with the reason, as millpond cannot run one without its Experiment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from millpond.documents import plain_value
from millpond.errors import UserError
from millpond.katib import webhook
from millpond.katib.kinds import API_VERSION, EXPERIMENT, GROUP, KINDS, SUGGESTION, TRIAL, schema_file
from millpond.kind_handler import SchemaCheck, SecretLookup
from millpond.manifest_envelope import ManifestBody, check_metadata, is_document_of
from millpond.store.resources import ResourceStore


@dataclass
class ExperimentManifest(ManifestBody):
    body: dict[str, Any]
    spec: webhook.ExperimentSpec


def is_katib_document(doc: object) -> bool:
    return (is_document_of(doc, {kind.kind for kind in KINDS}, lambda _: None) and isinstance(doc, dict)
            and str(doc.get("apiVersion", "")).startswith(f"{GROUP}/"))


def configmap_reader(secrets: SecretLookup) -> webhook.ConfigMapReader:
    """``read_configmap(namespace, name)`` of the trial library, over the apply's ConfigMaps (None: no such one)."""

    def read(namespace: str, name: str) -> Mapping[str, str] | None:
        try:
            return secrets.in_namespace(namespace).get("ConfigMap", name)
        except UserError:
            return None

    return read


def check_document(doc: Any, source: str, number: int, validate: SchemaCheck, secrets: SecretLookup,
                   store: ResourceStore) -> ExperimentManifest:
    where = f"{source}: document {number}"
    doc = plain_value(doc, where)
    try:
        kind = str(doc.get("kind"))
        if kind in (TRIAL.kind, SUGGESTION.kind):
            raise UserError(f"{kind}: {kind}s are made by their Experiment's controller: apply the Experiment")
        schema = schema_file(EXPERIMENT, str(doc.get("apiVersion") or ""))
        metadata = check_metadata(EXPERIMENT.kind, doc.get("metadata"), namespaced=True)
        label = f"Experiment {metadata['name']}"
        try:
            webhook.check_name(metadata["name"])
            validate(schema, {**doc, "metadata": metadata})
            raw = doc.get("spec")
            if not isinstance(raw, dict):
                raise UserError("spec: must be specified")
            namespace = str(metadata.get("namespace") or "default")
            reader = configmap_reader(secrets)
            spec = webhook.default_spec(raw, namespace, reader)
            read = webhook.check_spec(spec, namespace, reader)
            before = store.get(EXPERIMENT.kind, metadata["name"], namespace)
            if before is not None:
                webhook.check_update(before.manifest.get("spec") or {}, spec, before.status)
        except UserError as exc:
            raise UserError(f"{label}: {exc}") from None
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    body = {"apiVersion": API_VERSION, "kind": EXPERIMENT.kind, "metadata": metadata, "spec": spec}
    return ExperimentManifest(body, read)

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
from millpond.katib import trial_jobs, webhook
from millpond.katib.kinds import API_VERSION, EXPERIMENT, GROUP, KINDS, SUGGESTION, TRIAL, schema_file
from millpond.kind_handler import ApplyBatch, SecretLookup
from millpond.kinds import REGISTRY
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
            return secrets.in_namespace(namespace).get("configmap", name)
        except UserError:
            return None

    return read


def sample_assignments(spec: webhook.ExperimentSpec) -> dict[str, str]:
    """One point of the search space (each parameter's first value, or its min): what a dry-run trial is made of."""
    return {one.name: one.values[0] if one.values else str(one.min if one.min is not None else "0")
            for one in spec.parameters}


def check_trial(spec: webhook.ExperimentSpec, raw: Mapping[str, Any], name: str, namespace: str,
                reader: webhook.ConfigMapReader, batch: ApplyBatch) -> None:
    """A trial of the template, rendered from one point of the space, checked as ``millpond apply`` checks its
    kind (nothing stored): a trial no run could start (an FPGA, a TPU slice, a field its kind refuses) is refused
    with the Experiment, not once per trial after it was accepted. Katib's webhook creates the trial's job in
    dry-run mode for the same reason."""
    trial = f"{name}-dryrun00"
    job = trial_jobs.render(spec, name, trial, namespace, sample_assignments(spec),
                            trial_jobs.template_text(raw, namespace, reader))
    try:
        REGISTRY.plan([(f"trial {trial}", 1, job)], batch)
    except UserError as exc:
        raise UserError(f"spec.trialTemplate: its trials cannot run here: {exc}") from None


def check_document(doc: Any, source: str, number: int, batch: ApplyBatch, store: ResourceStore) -> ExperimentManifest:
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
            batch.validate(schema, {**doc, "metadata": metadata})
            raw = doc.get("spec")
            if not isinstance(raw, dict):
                raise UserError("spec: must be specified")
            namespace = str(metadata.get("namespace") or "default")
            reader = configmap_reader(batch.secrets)
            spec = webhook.default_spec(raw, namespace, reader)
            read = webhook.check_spec(spec, namespace, reader)
            check_trial(read, spec, metadata["name"], namespace, reader, batch)
            before = store.get(EXPERIMENT.kind, metadata["name"], namespace)
            if before is not None:
                webhook.check_update(before.manifest.get("spec") or {}, spec, before.status)
        except UserError as exc:
            raise UserError(f"{label}: {exc}") from None
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    body = {"apiVersion": API_VERSION, "kind": EXPERIMENT.kind, "metadata": metadata, "spec": spec}
    return ExperimentManifest(body, read)

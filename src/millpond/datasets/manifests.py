"""Read Fluid manifests (``millpond apply -f``) and check every document before anything is stored.

The files are read exactly as kubectl reads them (multi-document YAML or JSON, ``-`` for
stdin, a folder for its ``*.yaml``/``*.yml``/``*.json``, a ``kind: List``), then each
document is checked: envelope (apiVersion, kind, metadata), its kind's schema, and the
checks no CRD can express (``manifest_checks``). The first problem is one line naming the
file, the object and the field; nothing is stored unless every document passes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from millpond.datasets import manifest_checks as checks
from millpond.datasets.config import annotation_ttl, property_ttl
from millpond.datasets.fields import show
from millpond.datasets.kinds import API_VERSION, KINDS, NOT_ON_ONE_MACHINE, dataset_reference
from millpond.datasets.schema_check import check_schema
from millpond.documents import load_yaml_documents, plain_value
from millpond.errors import UserError
from millpond.kind_handler import SecretLookup
from millpond.kinds import REGISTRY
from millpond.manifest_envelope import ManifestBody, check_metadata

STDIN_NAME = "STDIN"
_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass
class Manifest(ManifestBody):
    """One checked document.

    ``body`` holds apiVersion, kind, metadata (name, namespace, labels, annotations) and spec.
    """

    source: str
    document: int
    body: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    @property
    def spec(self) -> dict[str, Any]:
        return self.body["spec"]


def _files(path_text: str) -> list[Path]:
    path = Path(path_text).expanduser()
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.suffix in _SUFFIXES and p.is_file())
        if not found:
            raise UserError(f"{path_text}: no .yaml, .yml or .json files in this folder")
        return found
    if not path.is_file():
        raise UserError(f"{path_text}: no such file")
    return [path]


def _parse(text: str, source: str) -> list[Any]:
    """The documents of one file, parsed within ``millpond.documents``' limits (JSON-shaped, as kubectl makes them)."""
    return load_yaml_documents(text, source)


def read_documents(paths: list[str], stdin: TextIO | None = None) -> list[tuple[str, int, Any]]:
    """(source, document number from 1, document) for every non-empty document of ``paths``."""
    documents: list[tuple[str, int, Any]] = []
    for path_text in paths:
        if path_text == "-":
            sources = [(STDIN_NAME, (stdin or sys.stdin).read())]
        else:
            sources = []
            for file in _files(path_text):
                try:
                    name = str(file) if file != Path(path_text) else path_text
                    sources.append((name, file.read_text(encoding="utf-8")))
                except UnicodeDecodeError:
                    raise UserError(f"{file}: not UTF-8 text") from None
        for source, text in sources:
            for number, doc in enumerate(_parse(text, source), start=1):
                if doc is None:
                    continue
                if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
                    documents.extend((source, number, item) for item in doc["items"])
                else:
                    documents.append((source, number, doc))
    return documents


def _envelope(doc: Any, where: str) -> dict[str, Any]:
    """apiVersion, kind and metadata checked; the body that is stored (spec defaults to {})."""
    if not isinstance(doc, dict):
        raise UserError(f"{where}: expected a mapping with apiVersion, kind, metadata and spec, found {show(doc)}")
    kind = doc.get("kind")
    if not isinstance(kind, str) or not kind:
        raise UserError(f"{where}: kind: required field is missing")
    if kind in NOT_ON_ONE_MACHINE:
        raise UserError(f"{where}: {NOT_ON_ONE_MACHINE[kind]}")
    if kind not in KINDS:
        near = [known for known in KINDS if known.lower() == kind.lower()]
        hint = f" (did you mean {near[0]}?)" if near else f": millpond knows {', '.join(REGISTRY.loaded().kinds())}"
        raise UserError(f"{where}: unknown kind {show(kind)}{hint}")
    if doc.get("apiVersion") != API_VERSION:
        raise UserError(f"{where}: {kind}: apiVersion {show(doc.get('apiVersion'))} is not supported "
                        f"(millpond reads {API_VERSION})")
    try:
        kept = check_metadata(kind, doc.get("metadata"), namespaced=True)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": kept, "spec": doc.get("spec") or {}}


def check_manifest(doc: dict[str, Any], body: dict[str, Any], secrets: SecretLookup) -> None:
    """The schema, then what the schema cannot say; UserError starts with the field."""
    kind, spec = body["kind"], body["spec"]
    check_schema(kind, {**doc, "spec": doc.get("spec") if doc.get("spec") is not None else {}})
    checks.check_placeholders(body)
    category = KINDS[kind].category
    if category == "runtime":
        checks.check_tieredstore(spec)
        property_ttl(spec.get("properties") or {})
    elif category == "dataset":
        checks.check_dataset(spec)
        annotation_ttl(body["metadata"].get("annotations") or {})
    else:
        checks.check_operation(kind, spec)
    # a secretKeyRef names a Secret of the object's own namespace, as the kubelet and Fluid read it
    checks.check_secret_refs(spec, secrets.in_namespace(str(body["metadata"].get("namespace") or "default")))


def check_document(doc: Any, source: str, number: int, secrets: SecretLookup) -> Manifest:
    """One document checked (envelope, schema, what a schema cannot say); its notes name what is only recorded.

    ``source`` names where it came from in errors: a file, or the SDK call that built it.
    A document that was not parsed from text (an SDK call's dicts, an API body) is held to the
    same limits first (depth, size, JSON values), so no input reaches the checks' recursion.
    An unknown kind's error names every kind registered in ``millpond.kinds`` (every family's).
    """
    doc = plain_value(doc, f"{source}: document {number}")
    body = _envelope(doc, f"{source}: document {number}")
    label = f"{body['kind']} {body['metadata']['name']}"
    try:
        check_manifest(doc, body, secrets)
    except UserError as exc:
        raise UserError(f"{source}: {label}: {exc}") from None
    manifest = Manifest(source, number, body)
    recorded = checks.recorded_only(manifest.kind, manifest.spec)
    if recorded:
        manifest.notes.append(f"{label}: not applicable on one machine, recorded only: {', '.join(recorded)}")
    return manifest


def load_manifests(paths: list[str], secrets: SecretLookup, stdin: TextIO | None = None) -> list[Manifest]:
    """Every document of ``paths``, checked; the first problem raises a UserError naming file, object and field."""
    manifests = check_documents(read_documents(paths, stdin), secrets)
    if not manifests:
        raise UserError(f"{', '.join(paths)}: no manifests found (every document is empty)")
    return manifests


def check_documents(documents: list[tuple[str, int, Any]], secrets: SecretLookup) -> list[Manifest]:
    """``read_documents``' documents checked, in order; the first problem raises a UserError."""
    return [check_document(doc, source, number, secrets) for source, number, doc in documents]


def missing_dataset_notes(manifests: list[Manifest], dataset_exists: Callable[[str, str], bool]) -> list[str]:
    """A data operation may name a dataset that does not exist yet (as in Kubernetes): say so, once each."""
    applied = {(m.name, m.namespace) for m in manifests if m.kind == "Dataset"}
    notes: list[str] = []
    for manifest in manifests:
        if KINDS[manifest.kind].category != "operation":
            continue
        ref = dataset_reference(manifest.kind, manifest.spec)
        if ref is None:
            continue
        key = (ref[0], ref[1] or manifest.namespace)
        if key not in applied and not dataset_exists(*key):
            notes.append(f"{manifest.kind} {manifest.name}: dataset {show(key[0])} does not exist yet; "
                         "recorded, it runs once the dataset is applied")
    return notes

"""KServe's kinds at ``millpond apply``, ``get`` and ``delete`` (InferenceService, ServingRuntime, …).

``resources`` resolves every kind through ``millpond.kinds.REGISTRY`` and hands the KServe ones
here; the objects are ``serving.objects``'s, which the server's resource routes share. The
table columns are those of KServe's CRDs (``additionalPrinterColumns``): an InferenceService's
URL, READY, PREV and LATEST (traffic percentages of the previous and latest revision), from its
stored status.
"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import Any

from millpond.cli.resource_tables import human_age
from millpond.datasets.schema_check import check_schema_file
from millpond.serving import lifecycle, objects
from millpond.serving.kinds import ServingKind
from millpond.serving.manifests import ServingManifest
from millpond.store.resources import Resource, ResourceStore


def check(documents: list[tuple[str, int, Any]]) -> list[ServingManifest]:
    """Every KServe document checked; nothing stored."""
    return objects.check(documents, check_schema_file)


def apply(manifests: list[ServingManifest], store: ResourceStore, volumes_dir: Path) -> None:
    """Store them (after the batch's datasets: a pvc:// predictor may name one), then the info lines; each
    InferenceService's supervisor is started (an unchanged one's only when none runs)."""
    for manifest, action in objects.apply(manifests, store):
        print(f"{manifest.info.resource}/{manifest.name} {action}")
        for note in manifest.notes:
            print(f"info: {manifest.info.kind} {manifest.name}: {note}", file=sys.stderr)
    for note in objects.missing_notes(manifests, store, volumes_dir):
        print(f"info: {note}", file=sys.stderr)
    lifecycle.start_applied(manifests, store)


def _columns(info: ServingKind, resource: Resource) -> tuple[list[str], list[str]]:
    if info.kind == "InferenceService":
        return ["URL", "READY", "PREV", "LATEST"], objects.columns(resource)
    spec = resource.spec
    formats = ",".join(str(f.get("name", "")) for f in spec.get("supportedModelFormats") or [])
    containers = ",".join(str(c.get("name", "")) for c in spec.get("containers") or [])
    return ["DISABLED", "MODELTYPE", "CONTAINERS"], [str(bool(spec.get("disabled", False))).lower(), formats,
                                                      containers]


def get(info: ServingKind, name: str | None, namespace: str, all_namespaces: bool,
        output: str) -> tuple[list[str], list[list[str]], Any] | None:
    """(headers, rows, None) for a table, or (.., .., value) for -o json/yaml; None when nothing was found."""
    store = ResourceStore()
    if output in ("json", "yaml"):
        return [], [], objects.as_objects(info, name, namespace, all_namespaces, store)
    found = objects.found(info, name, namespace, all_namespaces, store)
    if not found:
        return None
    now = dt.datetime.now(dt.timezone.utc)
    columns = [_columns(info, one) for one in found]
    headers = ["NAME", *columns[0][0], "AGE"]
    rows = [[one.name, *cells, human_age((now - one.created_at).total_seconds())]
            for one, (_, cells) in zip(found, columns, strict=True)]
    if all_namespaces and not info.cluster_scoped:
        headers = ["NAMESPACE", *headers]
        rows = [[one.namespace, *cells] for one, cells in zip(found, rows, strict=True)]
    return headers, rows, None


def delete(info: ServingKind, name: str, namespace: str) -> None:
    objects.delete(info, name, namespace, ResourceStore())
    if info.kind == "InferenceService":
        lifecycle.stop(name, namespace)  # its model processes end with it
    print(f'{info.resource} "{name}" deleted')

"""Kueue's queueing kinds at ``millpond apply``, ``get`` and ``delete`` (ResourceFlavor, ClusterQueue, …).

``resources`` resolves every kind through ``millpond.kinds.REGISTRY`` and hands the Kueue ones
here; the objects are ``scheduling.queues.objects``'s, which the server's resource routes share.
The table columns are those of Kueue's CRDs (``additionalPrinterColumns``) that a stored object
answers; pending and admitted counts are ``millpond queue list``'s.
"""

from __future__ import annotations

import datetime as dt
import sys
from typing import Any

from millpond.cli.resource_tables import human_age
from millpond.datasets.schema_check import check_schema_file
from millpond.scheduling.queues import objects, specs
from millpond.scheduling.queues.kinds import QueueKind
from millpond.scheduling.queues.manifests import QueueManifest
from millpond.store.resources import Resource, ResourceStore


def check(documents: list[tuple[str, int, Any]], store: ResourceStore) -> list[QueueManifest]:
    """Every Kueue document checked; nothing stored."""
    return objects.check(documents, store, check_schema_file)


def apply(manifests: list[QueueManifest], store: ResourceStore) -> None:
    if not manifests:
        return
    notes = objects.missing_notes(manifests, store)
    for info, name, action in objects.apply(manifests, store):
        print(f"{info.resource}/{name} {action}")
    owners: dict[str, list[str]] = {}  # one line per note, naming every object it is about: a few lines at most
    for manifest in manifests:
        for note in manifest.notes:
            owners.setdefault(note, []).append(f"{manifest.info.kind} {manifest.name}")
    for note, named in owners.items():
        print(f"info: {', '.join(dict.fromkeys(named))}: {note}", file=sys.stderr)
    for note in notes:
        print(f"info: {note}", file=sys.stderr)


def _columns(info: QueueKind, resource: Resource) -> tuple[list[str], list[str]]:
    spec = resource.spec
    if info.kind == "ClusterQueue":
        return ["COHORT", "STRATEGY"], [specs.cohort_name(spec) or "", spec.get("queueingStrategy") or "BestEffortFIFO"]
    if info.kind == "LocalQueue":
        return ["CLUSTERQUEUE"], [str(spec.get("clusterQueue") or "")]
    if info.kind == "WorkloadPriorityClass":
        return ["VALUE"], [str(resource.manifest.get("value", ""))]
    if info.kind == "Cohort":
        return ["PARENT"], [str(spec.get("parentName") or "")]
    return [], []


def get(info: QueueKind, name: str | None, namespace: str, all_namespaces: bool,
        output: str) -> tuple[list[str], list[list[str]], Any] | None:
    """(headers, rows, None) for a table, or (.., .., value) for -o json/yaml; None when nothing was found."""
    store = ResourceStore()
    if output in ("json", "yaml"):
        return [], [], objects.as_objects(info, name, namespace, all_namespaces, store)
    found = objects.found(info, name, namespace, all_namespaces, store)
    if not found:
        return None
    now = dt.datetime.now(dt.timezone.utc)
    headers = ["NAME", *_columns(info, found[0])[0], "AGE"]
    rows = [[one.name, *_columns(info, one)[1], human_age((now - one.created_at).total_seconds())] for one in found]
    if all_namespaces and not info.cluster_scoped:
        headers = ["NAMESPACE", *headers]
        rows = [[one.namespace, *cells] for one, cells in zip(found, rows, strict=True)]
    return headers, rows, None


def delete(info: QueueKind, name: str, namespace: str) -> None:
    objects.delete(info, name, namespace, ResourceStore())
    print(f'{info.resource} "{name}" deleted')

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
from millpond.scheduling.queues import objects, specs, views
from millpond.scheduling.queues.kinds import QueueKind
from millpond.scheduling.queues.manifests import QueueManifest
from millpond.settings import load_settings
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


_COUNTS = ["PENDING WORKLOADS", "ADMITTED WORKLOADS"]


def _columns(info: QueueKind, resource: Resource, status: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Kueue's printer columns (``additionalPrinterColumns``) for the kind."""
    spec = resource.spec
    counts = [str(status.get("pendingWorkloads", 0)), str(status.get("admittedWorkloads", 0))]
    if info.kind == "ClusterQueue":
        return ["COHORT", "STRATEGY", *_COUNTS], [specs.cohort_name(spec) or "",
                                                  spec.get("queueingStrategy") or "BestEffortFIFO", *counts]
    if info.kind == "LocalQueue":
        return ["CLUSTERQUEUE", *_COUNTS], [str(spec.get("clusterQueue") or ""), *counts]
    if info.kind == "WorkloadPriorityClass":
        return ["VALUE"], [str(resource.manifest.get("value", ""))]
    if info.kind == "Cohort":
        return ["PARENT"], [str(spec.get("parentName") or "")]
    return [], []


def get(info: QueueKind, name: str | None, namespace: str, all_namespaces: bool,
        output: str) -> tuple[list[str], list[list[str]], Any] | None:
    """(headers, rows, None) for a table, or (.., .., value) for -o json/yaml; None when nothing was found."""
    settings = load_settings()
    store = ResourceStore(settings)
    known = views.statuses(*views.current(settings)) if info.kind in ("ClusterQueue", "LocalQueue") else {}
    if output in ("json", "yaml"):
        return [], [], objects.as_objects(info, name, namespace, all_namespaces, store, known)
    found = objects.found(info, name, namespace, all_namespaces, store)
    if not found:
        return None
    now = dt.datetime.now(dt.timezone.utc)
    columns = [_columns(info, one, known.get(objects.status_key(info, one), {})) for one in found]
    headers = ["NAME", *columns[0][0], "AGE"]
    rows = [[one.name, *cells, human_age((now - one.created_at).total_seconds())]
            for one, (_, cells) in zip(found, columns, strict=True)]
    if all_namespaces and not info.cluster_scoped:
        headers = ["NAMESPACE", *headers]
        rows = [[one.namespace, *cells] for one, cells in zip(found, rows, strict=True)]
    return headers, rows, None


def delete(info: QueueKind, name: str, namespace: str) -> None:
    objects.delete(info, name, namespace, ResourceStore())
    print(f'{info.resource} "{name}" deleted')

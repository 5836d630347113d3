"""Kueue's queueing kinds in the one registry of kinds: the handler ``apply``/``get``/``delete``/``describe``
and the server's resource routes call for ResourceFlavor, ClusterQueue, LocalQueue,
WorkloadPriorityClass and Cohort.

Importing this module registers it (``millpond.kinds`` imports it when a command first reaches one of
these kinds).
The objects are ``queues.objects``'s; ClusterQueues and LocalQueues show Kueue's status fields
(pending and admitted workloads, usage) from ``queues.views``. Queues are applied first in a
batch: a job of the same batch may name one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from millpond.kind_handler import (
    Applied,
    ApplyBatch,
    ApplyOutcome,
    Document,
    HandlerBase,
    KindContext,
    KindName,
    Note,
    Table,
)
from millpond.kinds import REGISTRY
from millpond.manifest_envelope import found
from millpond.scheduling.queues import objects, specs, views
from millpond.scheduling.queues.kinds import KINDS, OWNER, REFUSED_NAMES, QueueKind
from millpond.scheduling.queues.manifests import QueueManifest, is_queue_document
from millpond.store.resources import Resource, ResourceStore
from millpond.tables import age_since

_COUNTS = ("PENDING WORKLOADS", "ADMITTED WORKLOADS")
# Kueue's printer columns (``additionalPrinterColumns``) between NAME and AGE.
_COLUMNS = {"ClusterQueue": ("COHORT", "STRATEGY", *_COUNTS), "LocalQueue": ("CLUSTERQUEUE", *_COUNTS),
            "WorkloadPriorityClass": ("VALUE",), "Cohort": ("PARENT",), "ResourceFlavor": ()}


@dataclass(frozen=True)
class _Plan:
    manifests: list[QueueManifest]

    def apply(self, batch: ApplyBatch) -> ApplyOutcome:
        store = ResourceStore(batch.context.settings)
        missing = objects.missing_notes(self.manifests, store)
        applied = [Applied(info.names, name, manifest.namespace, action) for manifest, (info, name, action)
                   in zip(self.manifests, objects.apply(self.manifests, store), strict=True)]
        subjects: dict[str, list[str]] = {}  # one note naming every object it is about: a few lines at most
        for manifest in self.manifests:
            for note in manifest.notes:
                subjects.setdefault(note, []).append(f"{manifest.info.kind} {manifest.name}")
        notes = [Note(text, tuple(named)) for text, named in subjects.items()]
        return ApplyOutcome(applied, notes + [Note(text) for text in missing])


def _statuses(info: QueueKind, context: KindContext, shown: Sequence[Resource] = (),
              ) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Kueue's status of the ClusterQueues and LocalQueues (workloads pending and admitted, usage). LocalQueues'
    (those ``shown``) need only their workloads: a ClusterQueue's needs every queueing object."""
    if info.kind == "LocalQueue":
        return views.local_statuses(((one.namespace, one.name, str(one.spec.get("clusterQueue") or ""))
                                     for one in shown), views.live_workloads(context.settings))
    if info.kind != "ClusterQueue":
        return {}
    return views.statuses(*views.current(context.settings))


def _cells(info: QueueKind, resource: Resource, status: dict[str, Any]) -> list[str]:
    spec = resource.spec
    counts = [str(status.get("pendingWorkloads", 0)), str(status.get("admittedWorkloads", 0))]
    if info.kind == "ClusterQueue":
        return [specs.cohort_name(spec) or "", spec.get("queueingStrategy") or "BestEffortFIFO", *counts]
    if info.kind == "LocalQueue":
        return [str(spec.get("clusterQueue") or ""), *counts]
    if info.kind == "WorkloadPriorityClass":
        return [str(resource.manifest.get("value", ""))]
    if info.kind == "Cohort":
        return [str(spec.get("parentName") or "")]
    return []


class QueueHandler(HandlerBase):
    owner = OWNER
    apply_order = 10
    kinds = tuple(info.names for info in KINDS.values())
    refused = REFUSED_NAMES

    def claims(self, doc: object) -> bool:
        return is_queue_document(doc)

    def check(self, documents: Sequence[Document], batch: ApplyBatch) -> _Plan:
        return _Plan(objects.check(list(documents), ResourceStore(batch.context.settings), batch.validate))

    def get(self, kind: KindName, name: str, namespace: str, context: KindContext) -> dict[str, Any]:
        return self._objects(kind, name, namespace, False, context)[0]

    def list_objects(self, kind: KindName, namespace: str, all_namespaces: bool,
             context: KindContext) -> list[dict[str, Any]]:
        return self._objects(kind, None, namespace, all_namespaces, context)

    def _objects(self, kind: KindName, name: str | None, namespace: str, all_namespaces: bool,
                 context: KindContext) -> list[dict[str, Any]]:
        info = KINDS[kind.kind]
        rows = found(kind, name, namespace, all_namespaces, ResourceStore(context.settings))  # NotFoundError
        known = _statuses(info, context, rows)
        return [objects.as_object(info, one, known.get(objects.status_key(info, one))) for one in rows]

    def printer_columns(self, kind: KindName) -> tuple[str, ...]:
        return ("NAME", *_COLUMNS[kind.kind], "AGE")

    def table(self, kind: KindName, name: str | None, namespace: str, all_namespaces: bool,
              context: KindContext) -> Table:
        info = KINDS[kind.kind]
        shown = found(kind, name, namespace, all_namespaces, ResourceStore(context.settings))
        known = _statuses(info, context, shown)
        now = dt.datetime.now(dt.timezone.utc)
        return Table.listing(self.printer_columns(kind), [
            (one.namespace, [one.name, *_cells(info, one, known.get(objects.status_key(info, one), {})),
                             age_since(one.created_at, now)])
            for one in shown], cluster_scoped=kind.cluster_scoped, all_namespaces=all_namespaces)

    def delete(self, kind: KindName, name: str, namespace: str, context: KindContext) -> None:
        objects.delete(KINDS[kind.kind], name, namespace, ResourceStore(context.settings))


REGISTRY.register_handler(QueueHandler())

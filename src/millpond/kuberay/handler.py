"""KubeRay's RayCluster and RayJob in the one registry of kinds: the handler ``apply``/``get``/``delete``/
``describe`` and the server's resource routes call.

Importing this module registers it (``millpond.kinds`` imports it when a command first reaches one of
these kinds); it imports no Ray (the supervisors do, in their own processes). Objects live in the
resource store with the status their supervisor writes (``kuberay.objects``); an apply stores them
and starts a supervisor for each that has none, after the batch's queues (``apply_order``), and
returns at once: the cluster becomes ready, or the job runs, in the background. ``get`` shows
KubeRay's printer columns.
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
from millpond.kuberay import objects
from millpond.kuberay.kinds import KINDS, OWNER, REFUSED_NAMES
from millpond.kuberay.manifests import RayManifest, check_document, is_ray_document
from millpond.manifest_envelope import found
from millpond.store.resources import Resource, ResourceStore
from millpond.tables import age_since

# KubeRay's additionalPrinterColumns (priority 0) between NAME and AGE.
_COLUMNS = {
    "RayCluster": ("DESIRED WORKERS", "AVAILABLE WORKERS", "CPUS", "MEMORY", "GPUS", "STATUS"),
    "RayJob": ("JOB STATUS", "DEPLOYMENT STATUS", "RAY CLUSTER NAME", "START TIME", "END TIME"),
}
_CELLS = {
    "RayCluster": ("desiredWorkerReplicas", "availableWorkerReplicas", "desiredCPU", "desiredMemory", "desiredGPU",
                   "state"),
    "RayJob": ("jobStatus", "jobDeploymentStatus", "rayClusterName", "startTime", "endTime"),
}


@dataclass(frozen=True)
class _Plan:
    manifests: list[RayManifest]

    def apply(self, batch: ApplyBatch) -> ApplyOutcome:
        settings = batch.context.settings
        store = ResourceStore(settings)
        stored = store.apply([manifest.body for manifest in self.manifests])
        outcome = ApplyOutcome()
        for manifest, (resource, action) in zip(self.manifests, stored, strict=True):
            started = objects.start(settings, resource, batch.context.user)
            outcome.applied.append(Applied(manifest.info.names, resource.name, resource.namespace, action,
                                           started=started))
            outcome.notes.extend(Note(note, (f"{manifest.info.kind} {resource.name}",)) for note in manifest.notes)
        return outcome


def _cells(kind: str, resource: Resource) -> list[str]:
    status = objects.observed(resource)
    return ["" if status.get(key) is None else str(status[key]) for key in _CELLS[kind]]


class KubeRayHandler(HandlerBase):
    owner = OWNER
    apply_order = 36  # after the queues a cluster or job names (and after batch Jobs, 35)
    kinds = tuple(info.names for info in KINDS.values())
    refused = REFUSED_NAMES

    def claims(self, doc: object) -> bool:
        return is_ray_document(doc)

    def check(self, documents: Sequence[Document], batch: ApplyBatch) -> _Plan:
        return _Plan([check_document(doc, source, number, batch.validate) for source, number, doc in documents])

    def get(self, kind: KindName, name: str, namespace: str, context: KindContext) -> dict[str, Any]:
        return objects.as_object(found(kind, name, namespace, False, ResourceStore(context.settings))[0])

    def list_objects(self, kind: KindName, namespace: str, all_namespaces: bool,
                     context: KindContext) -> list[dict[str, Any]]:
        return [objects.as_object(one) for one in
                found(kind, None, namespace, all_namespaces, ResourceStore(context.settings))]

    def printer_columns(self, kind: KindName) -> tuple[str, ...]:
        return ("NAME", *_COLUMNS[kind.kind], "AGE")

    def table(self, kind: KindName, name: str | None, namespace: str, all_namespaces: bool,
              context: KindContext) -> Table:
        shown = found(kind, name, namespace, all_namespaces, ResourceStore(context.settings))
        now = dt.datetime.now(dt.timezone.utc)
        return Table.listing(self.printer_columns(kind), [
            (one.namespace, [one.name, *_cells(kind.kind, one), age_since(one.created_at, now)]) for one in shown
        ], cluster_scoped=False, all_namespaces=all_namespaces)

    def delete(self, kind: KindName, name: str, namespace: str, context: KindContext) -> None:
        """Forget it and end what runs for it: its nodes (a RayCluster), its own cluster (a RayJob)."""
        objects.delete(context.settings, kind.kind, namespace, name)


REGISTRY.register_handler(KubeRayHandler())

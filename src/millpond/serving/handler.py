"""KServe's kinds in the one registry of kinds: the handler ``apply``/``get``/``delete``/``describe`` and the
server's resource routes call for InferenceService, ServingRuntime and ClusterServingRuntime.

Importing this module registers it (``millpond.kinds`` imports it when a command first reaches one of
these kinds).
The objects are ``serving.objects``'s. Serving is applied last in a batch: a ``pvc://`` predictor
may name a Dataset of the same batch. Applying an InferenceService starts its supervisor;
deleting one stops its model processes. The table's columns are KServe's CRDs'
(``additionalPrinterColumns``): an InferenceService's URL, READY, PREV and LATEST.
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
    KindEvent,
    KindName,
    Note,
    Table,
)
from millpond.kinds import REGISTRY
from millpond.manifest_envelope import found
from millpond.serving import events, lifecycle, lineage, objects, placement
from millpond.serving.kinds import KINDS, OWNER, REFUSED_NAMES
from millpond.serving.manifests import ServingManifest, is_serving_document
from millpond.store.resources import Resource, ResourceStore
from millpond.tables import age_since

_COLUMNS = {"InferenceService": ("URL", "READY", "PREV", "LATEST")}
_RUNTIME_COLUMNS = ("DISABLED", "MODELTYPE", "CONTAINERS")


@dataclass(frozen=True)
class _Plan:
    manifests: list[ServingManifest]

    def apply(self, batch: ApplyBatch) -> ApplyOutcome:
        """Store them, record what they serve (``serving.lineage``), then each InferenceService's supervisor is
        started (an unchanged one's only when none runs)."""
        store = ResourceStore(batch.context.settings)
        outcome = ApplyOutcome()
        applied = objects.apply(self.manifests, store)
        for manifest, action in applied:
            outcome.applied.append(Applied(manifest.info.names, manifest.name, manifest.namespace, action))
            outcome.notes.extend(Note(note, (f"{manifest.info.kind} {manifest.name}",)) for note in manifest.notes)
        lineage.record_deployments((m for m, action in applied if action != "unchanged"), batch.context.settings)
        outcome.notes.extend(Note(note) for note in
                             objects.missing_notes(self.manifests, store, batch.context.settings.volumes_dir))
        lifecycle.start_applied(self.manifests, store)
        return outcome


def _cells(resource: Resource) -> list[str]:
    if resource.kind == "InferenceService":
        return objects.columns(resource)
    spec = resource.spec
    formats = ",".join(str(f.get("name", "")) for f in spec.get("supportedModelFormats") or [])
    containers = ",".join(str(c.get("name", "")) for c in spec.get("containers") or [])
    return [str(bool(spec.get("disabled", False))).lower(), formats, containers]


class ServingHandler(HandlerBase):
    owner = OWNER
    apply_order = 40
    kinds = tuple(info.names for info in KINDS.values())
    refused = REFUSED_NAMES

    def claims(self, doc: object) -> bool:
        return is_serving_document(doc)

    def check(self, documents: Sequence[Document], batch: ApplyBatch) -> _Plan:
        return _Plan(objects.check(list(documents), batch.validate))

    def get(self, kind: KindName, name: str, namespace: str, context: KindContext) -> dict[str, Any]:
        shown: dict[str, Any] = objects.as_objects(KINDS[kind.kind], name, namespace, False,
                                                   ResourceStore(context.settings))
        return shown

    def list_objects(self, kind: KindName, namespace: str, all_namespaces: bool,
             context: KindContext) -> list[dict[str, Any]]:
        listed = objects.as_objects(KINDS[kind.kind], None, namespace, all_namespaces, ResourceStore(context.settings))
        return list(listed["items"])

    def printer_columns(self, kind: KindName) -> tuple[str, ...]:
        return ("NAME", *_COLUMNS.get(kind.kind, _RUNTIME_COLUMNS), "AGE")

    def table(self, kind: KindName, name: str | None, namespace: str, all_namespaces: bool,
              context: KindContext) -> Table:
        shown = found(kind, name, namespace, all_namespaces, ResourceStore(context.settings))
        now = dt.datetime.now(dt.timezone.utc)
        rows = [(one.namespace, [one.name, *_cells(one), age_since(one.created_at, now)]) for one in shown]
        return Table.listing(self.printer_columns(kind), rows,
                             cluster_scoped=kind.cluster_scoped, all_namespaces=all_namespaces)

    def delete(self, kind: KindName, name: str, namespace: str, context: KindContext) -> None:
        objects.delete(KINDS[kind.kind], name, namespace, ResourceStore(context.settings))
        if kind.kind == "InferenceService":
            lifecycle.stop(name, namespace)  # its model processes (and their containers) end with it
            placement.forget(namespace, name)


    def events(self, kind: KindName, name: str, namespace: str, context: KindContext) -> list[KindEvent]:
        """An InferenceService's events as its supervisor recorded them (image pulls, the image not used)."""
        if kind.kind != "InferenceService":
            return []
        resource = ResourceStore(context.settings).get("InferenceService", name, namespace)
        if resource is None:
            return []
        now = dt.datetime.now(dt.timezone.utc)
        return [KindEvent(event.type, event.reason, age_since(event.at, now), events.SOURCE, event.message, event.at)
                for event in events.read(namespace, name, resource.uid)]


REGISTRY.register_handler(ServingHandler())

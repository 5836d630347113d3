"""Fluid's kinds in the one registry of kinds: the handler ``apply``/``get``/``delete``/``describe`` and the
server's resource routes call for Datasets, runtimes and data operations.

Importing this module registers it (``millpond.kinds`` imports it when a command first reaches one of
these kinds).
Its checks are also where the documents of an apply that no family claims go: the envelope check
says what is wrong with them (not a mapping, no kind, an unknown kind, naming every known one).
A data operation applied starts at once, in the background (after the step its ``runAfter``
names). Deleting a Dataset deletes the data operations it owns (Fluid's owner references) and
lets the cache engine drop what it holds. Objects are shown with the status the cache engine
reports (``datasets.status``); the table's columns are those ``kubectl get`` prints for Fluid's CRDs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from millpond.datasets.cleanup import dataset_deleted
from millpond.datasets.kinds import KINDS, NOT_ON_ONE_MACHINE, OWNER, REFUSED_NAMES
from millpond.datasets.manifests import Manifest, check_document, missing_dataset_notes
from millpond.datasets.operations import runner as operations
from millpond.datasets.printer_columns import COLUMNS, row
from millpond.datasets.status import resource_status
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
from millpond.manifest_envelope import found, not_found
from millpond.store.resources import ResourceStore


@dataclass(frozen=True)
class _Plan:
    manifests: list[Manifest]

    def apply(self, batch: ApplyBatch) -> ApplyOutcome:
        store = ResourceStore(batch.context.settings)
        notes = [Note(note) for manifest in self.manifests for note in manifest.notes]
        notes += [Note(note) for note in missing_dataset_notes(
            self.manifests, lambda name, ns: store.get("Dataset", name, ns) is not None)]
        outcome = ApplyOutcome(notes=notes)
        for resource, action in store.apply([manifest.body for manifest in self.manifests]):
            started = KINDS[resource.kind].category == "operation" and action != "unchanged"
            if started:
                operations.start(resource.kind, resource.name, resource.namespace)
            outcome.applied.append(Applied(KINDS[resource.kind].names, resource.name, resource.namespace, action,
                                           started=started, uid=resource.uid))
        return outcome


class FluidHandler(HandlerBase):
    owner = OWNER
    apply_order = 20
    kinds = tuple(info.names for info in KINDS.values())
    refused = REFUSED_NAMES

    def claims(self, doc: object) -> bool:
        kind = doc.get("kind") if isinstance(doc, dict) else None
        return isinstance(kind, str) and (kind in KINDS or kind in NOT_ON_ONE_MACHINE)

    def check(self, documents: Sequence[Document], batch: ApplyBatch) -> _Plan:
        return _Plan([check_document(doc, source, number, batch.secrets)
                      for source, number, doc in documents])

    def get(self, kind: KindName, name: str, namespace: str, context: KindContext) -> dict[str, Any]:
        store = ResourceStore(context.settings)
        one = store.get(kind.kind, name, namespace)
        if one is None:
            raise not_found(kind, name, namespace)
        shown: dict[str, Any] = one.as_object(resource_status(one, store))
        return shown

    def list_objects(self, kind: KindName, namespace: str, all_namespaces: bool,
             context: KindContext) -> list[dict[str, Any]]:
        store = ResourceStore(context.settings)
        return [one.as_object(resource_status(one, store))
                for one in store.list(kind.kind, None if all_namespaces else namespace)]

    def printer_columns(self, kind: KindName) -> tuple[str, ...]:
        return COLUMNS[KINDS[kind.kind].category]

    def table(self, kind: KindName, name: str | None, namespace: str, all_namespaces: bool,
              context: KindContext) -> Table:
        store = ResourceStore(context.settings)
        shown = found(kind, name, namespace, all_namespaces, store)
        now = dt.datetime.now(dt.timezone.utc)
        return Table.listing(self.printer_columns(kind),
                             [(one.namespace, row(one, resource_status(one, store), now)) for one in shown],
                             cluster_scoped=kind.cluster_scoped, all_namespaces=all_namespaces)

    def delete(self, kind: KindName, name: str, namespace: str, context: KindContext) -> None:
        """Forget the object; a Dataset takes its data operations and its cache with it."""
        if not ResourceStore(context.settings).delete(kind.kind, name, namespace):
            raise not_found(kind, name, namespace)
        if kind.kind == "Dataset":
            dataset_deleted(name, namespace)

REGISTRY.register_handler(FluidHandler(), fallback=True)

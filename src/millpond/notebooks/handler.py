"""Kubeflow's Notebook in the one registry of kinds: the handler ``apply``/``get``/``delete``/``describe`` and
the server's resource routes call.

Importing this module registers it. Objects live in the resource store with the status their supervisor
writes (``notebooks.objects``); an apply stores them and starts a supervisor for each that has none, and
returns at once: the server comes up in the background (``kubectl wait --for=condition=Ready``).
``get`` shows the columns the Jupyter web app lists (the CRD declares no printer columns).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from millpond.kind_handler import Applied, ApplyBatch, ApplyOutcome, Document, HandlerBase, KindContext, KindName, Table
from millpond.kinds import REGISTRY
from millpond.manifest_envelope import found
from millpond.notebooks import objects
from millpond.notebooks.kinds import NOTEBOOK, OWNER, STOP_ANNOTATION
from millpond.notebooks.manifests import NotebookManifest, check_document, is_notebook_document
from millpond.store.resources import Resource, ResourceStore
from millpond.tables import age_since

_COLUMNS = ("NAME", "READY", "STATUS", "AGE")


@dataclass(frozen=True)
class _Plan:
    manifests: list[NotebookManifest]

    def apply(self, batch: ApplyBatch) -> ApplyOutcome:
        settings = batch.context.settings
        stored = ResourceStore(settings).apply([manifest.body for manifest in self.manifests])
        outcome = ApplyOutcome()
        for resource, action in stored:
            started = objects.start(settings, resource)
            outcome.applied.append(Applied(NOTEBOOK, resource.name, resource.namespace, action, started=started))
        return outcome


def _phase(resource: Resource) -> str:
    status = objects.observed(resource)
    annotations = resource.manifest.get("metadata", {}).get("annotations") or {}
    if STOP_ANNOTATION in annotations:
        return "Stopped"
    state = status.get("containerState") or {}
    if "running" in state:
        return "Running" if status.get("readyReplicas") else "Starting"
    for key in ("waiting", "terminated"):
        if key in state:
            return str(state[key].get("reason") or key.capitalize())
    return "Pending"


class NotebookHandler(HandlerBase):
    owner = OWNER
    apply_order = 37  # after the queues and quotas of the batch
    kinds = (NOTEBOOK,)

    def claims(self, doc: object) -> bool:
        return is_notebook_document(doc)

    def check(self, documents: Sequence[Document], batch: ApplyBatch) -> _Plan:
        return _Plan([check_document(doc, source, number, batch.validate, batch.context.settings)
                      for source, number, doc in documents])

    def get(self, kind: KindName, name: str, namespace: str, context: KindContext) -> dict[str, Any]:
        return objects.as_object(found(kind, name, namespace, False, ResourceStore(context.settings))[0],
                                 context.settings)

    def list_objects(self, kind: KindName, namespace: str, all_namespaces: bool,
                     context: KindContext) -> list[dict[str, Any]]:
        return [objects.as_object(one, context.settings) for one in
                found(kind, None, namespace, all_namespaces, ResourceStore(context.settings))]

    def printer_columns(self, kind: KindName) -> tuple[str, ...]:
        return _COLUMNS

    def table(self, kind: KindName, name: str | None, namespace: str, all_namespaces: bool,
              context: KindContext) -> Table:
        shown = found(kind, name, namespace, all_namespaces, ResourceStore(context.settings))
        now = dt.datetime.now(dt.timezone.utc)
        return Table.listing(_COLUMNS, [
            (one.namespace, [one.name, f"{objects.observed(one).get('readyReplicas') or 0}/1", _phase(one),
                             age_since(one.created_at, now)]) for one in shown
        ], cluster_scoped=False, all_namespaces=all_namespaces)

    def delete(self, kind: KindName, name: str, namespace: str, context: KindContext) -> None:
        """Forget it and end its server, kernels and terminals included."""
        objects.delete(context.settings, namespace, name)


REGISTRY.register_handler(NotebookHandler())

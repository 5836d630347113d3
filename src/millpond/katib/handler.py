"""Katib's Experiment, Suggestion and Trial in the one registry of kinds: the handler ``apply``/``get``/``delete``/
``describe`` and the Kubernetes API call.

Importing this module registers it. Objects live in the resource store with the status the Experiment's
supervisor writes (``katib.supervisor``); an apply stores the defaulted Experiment and starts a supervisor for
it when none runs, and returns at once: the suggestion runs and the first trials start in the background
(``kubectl wait --for=condition=Succeeded experiment/NAME``). ``get`` shows the CRDs' printer columns
(the last condition's type and status; a Suggestion's requested and assigned counts).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from millpond.katib import objects
from millpond.katib.kinds import EXPERIMENT, KINDS, OWNER, SUGGESTION, TRIAL
from millpond.katib.manifests import ExperimentManifest, check_document, is_katib_document
from millpond.kind_handler import Applied, ApplyBatch, ApplyOutcome, Document, HandlerBase, KindContext, KindName, Table
from millpond.kinds import REGISTRY
from millpond.manifest_envelope import found
from millpond.store.resources import Resource, ResourceStore
from millpond.tables import age_since

_COLUMNS = ("NAME", "TYPE", "STATUS", "AGE")
_SUGGESTION_COLUMNS = ("NAME", "TYPE", "STATUS", "REQUESTED", "ASSIGNED", "AGE")


@dataclass(frozen=True)
class _Plan:
    manifests: list[ExperimentManifest]

    def apply(self, batch: ApplyBatch) -> ApplyOutcome:
        settings = batch.context.settings
        stored = ResourceStore(settings).apply([manifest.body for manifest in self.manifests]) if self.manifests else []
        outcome = ApplyOutcome()
        for resource, action in stored:
            started = objects.start(settings, resource) if action != "unchanged" or not objects.finished(
                resource.status) else False
            outcome.applied.append(Applied(EXPERIMENT, resource.name, resource.namespace, action, started=started))
        return outcome


def _last_condition(resource: Resource) -> tuple[str, str]:
    conditions = [one for one in resource.status.get("conditions") or [] if isinstance(one, dict)]
    return (str(conditions[-1].get("type", "")), str(conditions[-1].get("status", ""))) if conditions else ("", "")


class KatibHandler(HandlerBase):
    owner = OWNER
    apply_order = 60  # after the queues, quotas and ConfigMaps of the batch (a trial template may be in one)
    kinds = KINDS

    def claims(self, doc: object) -> bool:
        return is_katib_document(doc)

    def check(self, documents: Sequence[Document], batch: ApplyBatch) -> _Plan:
        store = ResourceStore(batch.context.settings)
        return _Plan([check_document(doc, source, number, batch, store)
                      for source, number, doc in documents])

    def get(self, kind: KindName, name: str, namespace: str, context: KindContext) -> dict[str, Any]:
        one = found(kind, name, namespace, False, ResourceStore(context.settings))[0]
        return one.as_object(one.status)

    def list_objects(self, kind: KindName, namespace: str, all_namespaces: bool,
                     context: KindContext) -> list[dict[str, Any]]:
        return [one.as_object(one.status) for one in
                found(kind, None, namespace, all_namespaces, ResourceStore(context.settings))]

    def printer_columns(self, kind: KindName) -> tuple[str, ...]:
        return _SUGGESTION_COLUMNS if kind == SUGGESTION else _COLUMNS

    def table(self, kind: KindName, name: str | None, namespace: str, all_namespaces: bool,
              context: KindContext) -> Table:
        shown = found(kind, name, namespace, all_namespaces, ResourceStore(context.settings))
        now = dt.datetime.now(dt.timezone.utc)
        rows = []
        for one in shown:
            cells = [one.name, *_last_condition(one)]
            if kind == SUGGESTION:
                cells += [str(one.manifest.get("spec", {}).get("requests", "")),
                          str(one.status.get("suggestionCount", ""))]
            rows.append((one.namespace, [*cells, age_since(one.created_at, now)]))
        return Table.listing(self.printer_columns(kind), rows, cluster_scoped=False, all_namespaces=all_namespaces)

    def delete(self, kind: KindName, name: str, namespace: str, context: KindContext) -> None:
        """An Experiment with what it owns; a Trial with its job; a Suggestion alone (its Experiment makes another)."""
        if kind == EXPERIMENT:
            objects.delete_experiment(context.settings, namespace, name)
        elif kind == TRIAL:
            objects.delete_trial(context.settings, namespace, name)
        else:
            store = ResourceStore(context.settings)
            found(kind, name, namespace, False, store)
            store.delete(kind.kind, name, namespace)


REGISTRY.register_handler(KatibHandler())

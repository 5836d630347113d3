"""SeldonDeployment in the one registry of kinds: what ``apply``/``get``/``delete``/``describe`` and the Kubernetes
API call for it (``kubectl get sdep`` included).

Importing this module registers it. Applied after KServe's kinds (a Namespace of the same batch first, as
every batch). Applying one starts its supervisor; deleting one stops its model processes. kubectl's columns
for a CRD without printer columns: NAME and AGE.
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
from millpond.serving.seldon import lifecycle, objects
from millpond.serving.seldon.kinds import OWNER, SELDON_DEPLOYMENT
from millpond.serving.seldon.manifests import SeldonManifest, is_seldon_document
from millpond.store.resources import ResourceStore
from millpond.tables import age_since


@dataclass(frozen=True)
class _Plan:
    manifests: list[SeldonManifest]

    def apply(self, batch: ApplyBatch) -> ApplyOutcome:
        """Store them, then start each one's supervisor (an unchanged one's only when none runs)."""
        store = ResourceStore(batch.context.settings)
        outcome = ApplyOutcome()
        for manifest, action in objects.apply(self.manifests, store):
            outcome.applied.append(Applied(SELDON_DEPLOYMENT, manifest.name, manifest.namespace, action))
            outcome.notes.extend(Note(note, (f"SeldonDeployment {manifest.name}",)) for note in manifest.notes)
        for manifest in self.manifests:
            lifecycle.start(store, manifest.name, manifest.namespace)
        return outcome


class SeldonHandler(HandlerBase):
    owner = OWNER
    apply_order = 41
    kinds = (SELDON_DEPLOYMENT,)

    def claims(self, doc: object) -> bool:
        return is_seldon_document(doc)

    def check(self, documents: Sequence[Document], batch: ApplyBatch) -> _Plan:
        return _Plan(objects.check(list(documents), batch.validate))

    def get(self, kind: KindName, name: str, namespace: str, context: KindContext) -> dict[str, Any]:
        shown: dict[str, Any] = objects.as_objects(name, namespace, False, ResourceStore(context.settings))
        return shown

    def list_objects(self, kind: KindName, namespace: str, all_namespaces: bool,
                     context: KindContext) -> list[dict[str, Any]]:
        return list(objects.as_objects(None, namespace, all_namespaces, ResourceStore(context.settings))["items"])

    def printer_columns(self, kind: KindName) -> tuple[str, ...]:
        return ("NAME", "AGE")

    def table(self, kind: KindName, name: str | None, namespace: str, all_namespaces: bool,
              context: KindContext) -> Table:
        shown = found(kind, name, namespace, all_namespaces, ResourceStore(context.settings))
        now = dt.datetime.now(dt.timezone.utc)
        rows = [(one.namespace, [one.name, age_since(one.created_at, now)]) for one in shown]
        return Table.listing(self.printer_columns(kind), rows, cluster_scoped=False, all_namespaces=all_namespaces)

    def delete(self, kind: KindName, name: str, namespace: str, context: KindContext) -> None:
        objects.delete(name, namespace, ResourceStore(context.settings))
        lifecycle.stop(name, namespace)  # its model processes end with it


REGISTRY.register_handler(SeldonHandler())

"""A made-up kind family, Widget (``example.millpond.dev/v1``): the worked example of
``docs/development/adding-a-kind.md``, as one module that registers one handler.

Importing it registers the handler; ``millpond apply``/``get``/``delete``/``describe`` and the
server's ``/apis/millpond/v1/{kind}`` routes then reach Widgets with no other change.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from millpond.errors import UserError
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
from millpond.manifest_envelope import ManifestBody, check_metadata, found, not_found, store_namespace
from millpond.store.resources import Resource, ResourceStore
from millpond.tables import age_since

OWNER = "widgets"
GROUP = "example.millpond.dev"
VERSION = "v1"
WIDGET = KindName("Widget", "widgets", GROUP, (VERSION,), OWNER, short_names=("wd",))


@dataclass
class WidgetManifest(ManifestBody):
    """One checked Widget: the body to store."""

    body: dict[str, Any]


def _status(resource: Resource) -> dict[str, Any]:
    """What a Widget's controller would report: Ready once stored."""
    return {"phase": "Ready", "conditions": [{"type": "Ready", "status": "True", "reason": "Stored",
                                              "message": f"size {resource.spec.get('size')}"}]}


@dataclass(frozen=True)
class WidgetPlan:
    manifests: list[WidgetManifest]

    def apply(self, batch: ApplyBatch) -> ApplyOutcome:
        store = ResourceStore(batch.context.settings)
        applied = store.apply([manifest.body for manifest in self.manifests])
        return ApplyOutcome(
            [Applied(WIDGET, one.name, one.namespace, action, uid=one.uid) for one, action in applied],
            [Note("widgets are only recorded", (f"Widget {manifest.name}",)) for manifest in self.manifests])


class WidgetHandler(HandlerBase):
    owner = OWNER
    apply_order = 50  # after every built-in family
    kinds = (WIDGET,)

    def claims(self, doc: object) -> bool:
        return isinstance(doc, dict) and doc.get("kind") == "Widget"

    def check(self, documents: Sequence[Document], batch: ApplyBatch) -> WidgetPlan:
        manifests = []
        for source, number, doc in documents:
            try:
                if doc.get("apiVersion") != f"{GROUP}/{VERSION}":
                    raise UserError(f"Widget: apiVersion {doc.get('apiVersion')!r} is not supported")
                metadata = check_metadata("Widget", doc.get("metadata"), namespaced=True)
                spec = doc.get("spec") or {}
                if not isinstance(spec.get("size"), int) or spec["size"] < 1:
                    raise UserError(f"Widget {metadata['name']}: spec.size: a positive integer is required")
            except UserError as exc:
                raise UserError(f"{source}: document {number}: {exc}") from None
            manifests.append(WidgetManifest({"apiVersion": f"{GROUP}/{VERSION}", "kind": "Widget",
                                             "metadata": metadata, "spec": spec}))
        return WidgetPlan(manifests)

    def get(self, kind: KindName, name: str, namespace: str, context: KindContext) -> dict[str, Any]:
        [one] = found(kind, name, namespace, False, ResourceStore(context.settings))
        shown: dict[str, Any] = one.as_object(_status(one))
        return shown

    def list_objects(self, kind: KindName, namespace: str, all_namespaces: bool,
             context: KindContext) -> list[dict[str, Any]]:
        return [one.as_object(_status(one))
                for one in found(kind, None, namespace, all_namespaces, ResourceStore(context.settings))]

    def printer_columns(self, kind: KindName) -> tuple[str, ...]:
        return ("NAME", "SIZE", "AGE")

    def table(self, kind: KindName, name: str | None, namespace: str, all_namespaces: bool,
              context: KindContext) -> Table:
        shown = found(kind, name, namespace, all_namespaces, ResourceStore(context.settings))
        now = dt.datetime.now(dt.timezone.utc)
        table = Table(self.printer_columns(kind),
                      [[one.name, str(one.spec.get("size")), age_since(one.created_at, now)] for one in shown])
        return table.with_namespaces([one.namespace for one in shown]) if all_namespaces else table

    def delete(self, kind: KindName, name: str, namespace: str, context: KindContext) -> None:
        if not ResourceStore(context.settings).delete(kind.kind, name, store_namespace(kind, namespace)):
            raise not_found(kind, name, namespace)


REGISTRY.register_handler(WidgetHandler())

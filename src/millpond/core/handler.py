"""Kubernetes' built-in kinds in the one registry of kinds: the handler ``apply``/``get``/``delete``/``describe``
and the Kubernetes API call for Namespaces, Secrets, ConfigMaps, ServiceAccounts, RBAC, PersistentVolumeClaims,
PersistentVolumes, Nodes, Events, ResourceQuotas and Kubeflow's Profiles (``core.profiles``: applying one runs the
profile controller's steps, ``core.profile_controller``).

Importing this module registers it. Each kind is a *view* (``core.view.CoreView``) in its own module; this
handler writes the shared steps once: ``get`` is the listed object of that name, the table is laid out
from the listed objects, and ``apply`` stores the batch's core objects before every other family's
(``apply_order`` 15: after Kueue's queues, before a Dataset that reads the batch's Secret or a job landing
in the batch's Namespace), the Secrets and ConfigMaps first (what other documents read), then in the
order of the documents.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from millpond.core import configs, nodes
from millpond.core.configs import ConfigView
from millpond.core.events import EventView
from millpond.core.kept import VIEWS as KEPT_VIEWS
from millpond.core.kinds import KINDS, OWNER
from millpond.core.namespaces import NamespaceView
from millpond.core.nodes import NodeView
from millpond.core.profiles import ProfileView
from millpond.core.resource_quotas import ResourceQuotaView
from millpond.core.view import CoreView, Planned
from millpond.core.volumes import ClaimView, VolumeView
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
from millpond.manifest_envelope import not_found

VIEWS: dict[str, CoreView] = {
    "Namespace": NamespaceView(), "Secret": ConfigView("Secret"), "ConfigMap": ConfigView("ConfigMap"),
    **KEPT_VIEWS, "PersistentVolumeClaim": ClaimView(), "PersistentVolume": VolumeView(), "Node": NodeView(),
    "Event": EventView(), "ResourceQuota": ResourceQuotaView(), "Profile": ProfileView(),
}
_FIRST = ("Secret", "ConfigMap")  # stored before the batch's other core objects: what other documents read


@dataclass(frozen=True)
class _Plan:
    planned: list[Planned]

    def apply(self, batch: ApplyBatch) -> ApplyOutcome:
        outcome = ApplyOutcome()
        ordered = sorted(self.planned, key=lambda one: one.entry.kind not in _FIRST)
        subjects: dict[str, list[str]] = {}
        for one in ordered:
            action = one.store(batch.context)
            outcome.applied.append(Applied(one.entry, one.name, one.namespace, action))
            for note in one.notes:
                subjects.setdefault(note, []).append(f"{one.entry.kind} {one.name}")
        outcome.notes.extend(Note(text, tuple(named)) for text, named in subjects.items())
        return outcome


class CoreHandler(HandlerBase):
    owner = OWNER
    apply_order = 15  # after Kueue's queues (which read nothing of these), before Fluid's Datasets that read Secrets
    kinds = tuple(KINDS.values())

    def claims(self, doc: object) -> bool:
        """A document of one of these kinds (its check says when its apiVersion is not the kind's)."""
        return isinstance(doc, dict) and isinstance(doc.get("kind"), str) and doc["kind"] in KINDS

    def check(self, documents: Sequence[Document], batch: ApplyBatch) -> _Plan:
        planned = []
        for source, number, doc in documents:
            entry = KINDS[doc["kind"]]
            planned.append(VIEWS[entry.kind].check(entry, doc, f"{source}: document {number}: {entry.kind}",
                                                   batch.context))
        return _Plan(planned)

    def list_objects(self, kind: KindName, namespace: str, all_namespaces: bool,
                     context: KindContext) -> list[dict[str, Any]]:
        where = None if all_namespaces or kind.cluster_scoped else namespace
        return VIEWS[kind.kind].objects(kind, where, context)

    def get(self, kind: KindName, name: str, namespace: str, context: KindContext) -> dict[str, Any]:
        for shown in self.list_objects(kind, namespace, False, context):
            if shown["metadata"]["name"] == name:
                return shown
        raise not_found(kind, name, namespace)

    def printer_columns(self, kind: KindName) -> tuple[str, ...]:
        return ("NAME", *VIEWS[kind.kind].columns)

    def table(self, kind: KindName, name: str | None, namespace: str, all_namespaces: bool,
              context: KindContext) -> Table:
        shown = [self.get(kind, name, namespace, context)] if name is not None else \
            self.list_objects(kind, namespace, all_namespaces, context)
        view, now = VIEWS[kind.kind], dt.datetime.now(dt.timezone.utc)
        return Table.listing(self.printer_columns(kind), [
            (str(one["metadata"].get("namespace", "")), [one["metadata"]["name"], *view.cells(one, now)])
            for one in shown], cluster_scoped=kind.cluster_scoped, all_namespaces=all_namespaces)

    def delete(self, kind: KindName, name: str, namespace: str, context: KindContext) -> None:
        VIEWS[kind.kind].delete(kind, name, namespace, context)

    def described(self, kind: KindName, shown: dict[str, Any], context: KindContext) -> dict[str, Any]:
        """The object as ``describe`` shows it: a Secret's sizes, never its values; a Node with what is
        allocated to whom."""
        if kind.kind == "Secret":
            return configs.described(shown)
        if kind.kind == "Node":
            return {**shown, **nodes.allocated(shown, context.settings)}
        return shown


REGISTRY.register_handler(CoreHandler())

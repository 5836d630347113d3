"""Namespaces: those created with a manifest, and those implied by the objects in them.

Kubernetes refuses an object in a namespace that does not exist; millpond has always accepted one
(``-n team`` is enough), so a namespace some object is in exists, ``Active``, as if created with it
(``default`` always exists). One applied as a manifest is kept, with its labels (Profiles and Kueue's
``namespaceSelector`` read them).

Deleting a namespace deletes every namespaced object of every registered kind in it, through each kind's own
handler (so a Dataset takes its cache, a job its processes), in apply order (the Pod views of what runs
last: they go with their owners); the namespace shows ``Terminating`` meanwhile. Simplification:
kube-apiserver answers at once and its namespace controller empties the namespace in the background; here
``delete`` returns when it is empty. An object a handler refuses to delete (a Dataset's PVC, an Event:
derived views) goes with its owner. ``default`` cannot be deleted (kube-apiserver's Forbidden).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from millpond.core.view import (
    Planned,
    check_envelope,
    derived_uid,
    kept_object,
    metadata_of,
    parse_timestamp,
    strings,
)
from millpond.errors import ForbiddenError, NotFoundError, UserError
from millpond.kind_handler import KindContext, KindName
from millpond.kinds import REGISTRY
from millpond.manifest_envelope import CLUSTER_STORE_NAMESPACE, not_found
from millpond.settings import Settings
from millpond.store.db import session_factory
from millpond.store.resources import Resource, ResourceStore
from millpond.store.training import JobStore
from millpond.tables import age_since

DEFAULT = "default"
NAME_LABEL = "kubernetes.io/metadata.name"  # the API server labels every namespace with its name
ACTIVE, TERMINATING = "Active", "Terminating"


def implied(settings: Settings) -> dict[str, dt.datetime]:
    """Every namespace an object is in, with the moment its first object was made (``default`` always).

    Read from the two stores every family's objects live in (the resource store's rows, the training
    jobs), one query each, rather than listing every kind: ``get namespaces`` stays cheap.
    """
    from sqlalchemy import func, select  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

    from millpond.store.models import StoredResource  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

    found: dict[str, dt.datetime] = {}

    def note(namespace: str, moment: dt.datetime) -> None:
        moment = moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)
        if namespace and (namespace not in found or moment < found[namespace]):
            found[namespace] = moment

    query = select(StoredResource.namespace, func.min(StoredResource.created_at)).group_by(StoredResource.namespace)
    with session_factory(settings.database_url)() as session:
        for namespace, first in session.execute(query):
            note(namespace, first)
    for job in JobStore(settings).list(None):
        note(job.namespace, job.created_at)
    found.setdefault(DEFAULT, min(found.values(), default=_home_time(settings)))
    return found


def every(settings: Settings) -> dict[str, dt.datetime]:
    """Every namespace, created or implied, with its creation time."""
    found = implied(settings)
    for row in ResourceStore(settings).list("Namespace"):
        found[row.name] = row.created_at
    return found


def _home_time(settings: Settings) -> dt.datetime:
    try:
        return dt.datetime.fromtimestamp(settings.home.stat().st_mtime, dt.timezone.utc)
    except OSError:
        return dt.datetime.now(dt.timezone.utc)


def _implied_object(entry: KindName, name: str, created: dt.datetime) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": metadata_of(entry, name, "", derived_uid("Namespace", name), created,
                                    {"labels": {NAME_LABEL: name}}),
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": ACTIVE}}


def _kept_object(entry: KindName, row: Resource) -> dict[str, Any]:
    shown = kept_object(entry, row, {"phase": row.status.get("phase") or ACTIVE})
    shown["metadata"]["labels"] = {**shown["metadata"].get("labels", {}), NAME_LABEL: row.name}
    return shown


class NamespaceView:
    """``NAME STATUS AGE``."""

    columns: tuple[str, ...] = ("STATUS", "AGE")

    def objects(self, entry: KindName, namespace: str | None, context: KindContext) -> list[dict[str, Any]]:
        rows = {row.name: row for row in ResourceStore(context.settings).list("Namespace")}
        shown = {name: _kept_object(entry, row) for name, row in rows.items()}
        for name, created in implied(context.settings).items():
            shown.setdefault(name, _implied_object(entry, name, created))
        return [shown[name] for name in sorted(shown)]

    def cells(self, shown: dict[str, Any], now: dt.datetime) -> list[str]:
        created = parse_timestamp(shown["metadata"]["creationTimestamp"]) or now
        return [shown["status"]["phase"], age_since(created, now)]

    def check(self, entry: KindName, doc: dict[str, Any], where: str, context: KindContext) -> Planned:
        metadata, fields = check_envelope(entry, doc, where, {"spec": dict})
        name = metadata["name"]
        labels = {key: value for key, value in (metadata.get("labels") or {}).items() if key != NAME_LABEL}
        metadata = {key: value for key, value in metadata.items() if key != "labels"} | (
            {"labels": labels} if labels else {})
        fields["spec"] = {**fields.get("spec", {}), "finalizers": (fields.get("spec") or {}).get("finalizers")
                          or ["kubernetes"]}  # the API server's default
        unknown = sorted(set(fields["spec"]) - {"finalizers"})
        if unknown:
            raise UserError(f'{where} {name}: unknown field "spec.{unknown[0]}"')
        strings(fields["spec"]["finalizers"], f"{where} {name}: spec.finalizers")
        row = ResourceStore(context.settings).get("Namespace", name, CLUSTER_STORE_NAMESPACE)
        if row is not None and row.status.get("phase") == TERMINATING:
            raise UserError(f'{where} {name}: namespace "{name}" is being terminated')
        manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata, **fields}

        def store(context: KindContext) -> str:
            return ResourceStore(context.settings).apply([manifest])[0][1]

        return Planned(entry, name, "", store)

    def delete(self, entry: KindName, name: str, namespace: str, context: KindContext) -> None:
        if name == DEFAULT:
            raise ForbiddenError(f'namespaces "{name}" is forbidden: this namespace may not be deleted')
        store = ResourceStore(context.settings)
        row = store.get("Namespace", name, CLUSTER_STORE_NAMESPACE)
        if row is None and name not in implied(context.settings):
            raise not_found(entry, name, CLUSTER_STORE_NAMESPACE)
        if row is not None:
            store.set_status("Namespace", name, {**row.status, "phase": TERMINATING}, CLUSTER_STORE_NAMESPACE)
        empty_namespace(name, context)
        store.delete("Namespace", name, CLUSTER_STORE_NAMESPACE)


def empty_namespace(namespace: str, context: KindContext) -> list[str]:
    """Delete every namespaced object in ``namespace`` through its kind's handler, family by family in apply
    order: the views of what runs (Pods, ``apply_order`` 90) come last, so they are gone with their owners
    rather than stopped one by one and restarted by them; what a handler refuses to delete (a derived view)
    is left to its owner, and named in the answer."""
    left = []
    for handler in REGISTRY.handlers():
        for entry in handler.kinds:
            if entry.cluster_scoped or entry.kind == "Namespace":
                continue
            for shown in handler.list_objects(entry, namespace, False, context):
                name = str(shown["metadata"]["name"])
                try:
                    handler.delete(entry, name, namespace, context)
                except NotFoundError:
                    continue  # gone with its owner (a Dataset's data operations)
                except UserError:
                    left.append(f"{entry.kind}/{name}")
    return left

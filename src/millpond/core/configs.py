"""Secrets and ConfigMaps: their values in the home's store, their Kubernetes metadata beside them.

The values stay where every reader already finds them (``store.secrets.ConfigStore``: a Secret is a
0600 file, never a database row, since the database may be a shared PostgreSQL); the object's
namespace, labels, annotations, ``type`` and ``immutable`` are a row of the resource store without the
values. A Secret's ``data`` is shown base64-encoded, as the API server shows it, to whoever may read it
(``get -o yaml``); kubectl's table shows only how many keys it has, ``describe`` their sizes.

The store keeps them per namespace, as Kubernetes does (``home/secrets/NAMESPACE/NAME.json``): the same
name in two namespaces is two objects, and whoever names one (a run's task, a job, a DataProcess, a
model server) finds its own namespace's. One made by ``millpond secret create`` (no row) is in the
namespace of its ``-n`` (``default``).
``binaryData`` and Secret values that are not UTF-8 text are refused, as ``store.config_documents`` does.
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass
from typing import Any

from millpond.core.view import Planned, check_envelope, derived_uid, metadata_of, parse_timestamp
from millpond.errors import UserError
from millpond.kind_handler import KindContext, KindName
from millpond.manifest_envelope import not_found
from millpond.store.config_documents import STORED, check_one
from millpond.store.resources import Resource, ResourceStore
from millpond.store.secrets import ConfigStore, MissingConfig
from millpond.tables import age_since

_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "Secret": {"data": dict, "stringData": dict, "type": str, "immutable": bool},
    "ConfigMap": {"data": dict, "binaryData": dict, "immutable": bool},
}


@dataclass(frozen=True)
class _Entry:
    """One Secret or ConfigMap: its values and, when applied as a manifest, its row."""

    name: str
    namespace: str
    data: dict[str, str]
    row: Resource | None
    created: dt.datetime


def _entries(kind: str, context: KindContext, namespace: str | None = None) -> list[_Entry]:
    """Every Secret (or ConfigMap) of the home (of one namespace when given), by namespace and name; a row
    whose values are gone (deleted with ``millpond secret delete``) is no object."""
    configs = ConfigStore(context.settings.home)
    rows = {(row.namespace, row.name): row for row in ResourceStore(context.settings).list(kind)}
    found = []
    for space, name, _keys in configs.everywhere(STORED[kind], namespace):
        try:
            data = configs.get(STORED[kind], name, space)
        except (MissingConfig, UserError):
            continue  # removed meanwhile, or damaged: `millpond secret` says which
        row = rows.get((space, name))
        made = row.created_at if row is not None else _file_time(configs, STORED[kind], name, space)
        found.append(_Entry(name, space, data, row, made))
    return found


def _gone(configs: ConfigStore, kind: str, name: str, namespace: str) -> bool:
    try:
        configs.get(kind, name, namespace)
    except MissingConfig:
        return True
    except UserError:
        return False  # damaged, not gone
    return False


def _file_time(configs: ConfigStore, kind: str, name: str, namespace: str) -> dt.datetime:
    try:
        return dt.datetime.fromtimestamp((configs.folder(kind, namespace) / f"{name}.json").stat().st_mtime,
                                         dt.timezone.utc)
    except OSError:
        return dt.datetime.now(dt.timezone.utc)


def _shown(entry: KindName, one: _Entry) -> dict[str, Any]:
    applied = one.row.manifest if one.row is not None else {}
    uid = one.row.uid if one.row is not None else derived_uid(entry.kind, one.name)
    shown: dict[str, Any] = {"apiVersion": "v1", "kind": entry.kind, "metadata": metadata_of(
        entry, one.name, one.namespace, uid, one.created, applied.get("metadata"))}
    if "immutable" in applied:
        shown["immutable"] = applied["immutable"]
    if entry.kind == "Secret":
        shown["data"] = {key: base64.b64encode(value.encode()).decode() for key, value in one.data.items()}
        shown["type"] = applied.get("type") or "Opaque"
    else:
        shown["data"] = dict(one.data)
    return shown


class ConfigView:
    """Secret (``NAME TYPE DATA AGE``) or ConfigMap (``NAME DATA AGE``)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.columns: tuple[str, ...] = ("TYPE", "DATA", "AGE") if kind == "Secret" else ("DATA", "AGE")

    def objects(self, entry: KindName, namespace: str | None, context: KindContext) -> list[dict[str, Any]]:
        return [_shown(entry, one) for one in _entries(self.kind, context, namespace)]

    def cells(self, shown: dict[str, Any], now: dt.datetime) -> list[str]:
        created = parse_timestamp(shown["metadata"]["creationTimestamp"]) or now
        count = str(len(shown.get("data") or {}))
        return [shown["type"], count, age_since(created, now)] if self.kind == "Secret" else [count,
                                                                                          age_since(created, now)]

    def check(self, entry: KindName, doc: dict[str, Any], where: str, context: KindContext) -> Planned:
        planned = check_one(doc, where)  # the values as the store keeps them: the same checks and lines as ever
        metadata, fields = check_envelope(entry, doc, where, _FIELDS[self.kind])
        name, namespace = metadata["name"], metadata["namespace"]
        known = {one.name: one for one in _entries(self.kind, context, namespace)}
        before = known.get(name)
        if before is not None and before.row is not None and before.row.manifest.get("immutable") \
                and before.data != planned.data:
            raise UserError(f'{where} {name}: data: Forbidden: field is immutable when `immutable` is set')
        if self.kind == "Secret":
            fields.setdefault("type", "Opaque")  # the API server's default
        row: dict[str, Any] = {"apiVersion": "v1", "kind": self.kind, "metadata": metadata,
                               **{key: fields[key] for key in ("type", "immutable") if key in fields}}

        def store(context: KindContext) -> str:
            configs = ConfigStore(context.settings.home)
            try:
                old: dict[str, str] | None = configs.get(planned.kind, name, namespace)
            except MissingConfig:
                old = None
            store = ResourceStore(context.settings)
            if old is None:  # a row whose values `millpond secret delete` removed (any namespace's) is no object's
                for stale in store.list(self.kind):
                    if stale.name == name and _gone(configs, planned.kind, name, stale.namespace):
                        store.delete(self.kind, name, stale.namespace)
            configs.create(planned.kind, name, planned.data, replace=True, namespace=namespace)
            row_action = store.apply([row])[0][1]
            if old is None:
                return "created"
            return "unchanged" if old == planned.data and row_action == "unchanged" else "configured"

        return Planned(entry, name, namespace, store)

    def delete(self, entry: KindName, name: str, namespace: str, context: KindContext) -> None:
        found = next((one for one in _entries(self.kind, context, namespace) if one.name == name), None)
        if found is None:
            raise not_found(entry, name, namespace)
        ConfigStore(context.settings.home).delete(STORED[self.kind], name, namespace)
        if found.row is not None:
            ResourceStore(context.settings).delete(self.kind, name, namespace)


def described(shown: dict[str, Any]) -> dict[str, Any]:
    """A Secret as ``kubectl describe`` shows it: each key's size in bytes, never its value."""
    sizes = {key: f"{len(base64.b64decode(value))} bytes" for key, value in (shown.get("data") or {}).items()}
    return {**shown, "data": sizes}

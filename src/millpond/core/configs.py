"""Secrets and ConfigMaps: their values in the home's store, their Kubernetes metadata beside them.

The values stay where every reader already finds them (``store.secrets.ConfigStore``: a Secret is a
0600 file, never a database row, since the database may be a shared PostgreSQL); the object's
namespace, labels, annotations, ``type`` and ``immutable`` are a row of the resource store without the
values. A Secret's ``data`` is shown base64-encoded, as the API server shows it, to whoever may read it
(``get -o yaml``); kubectl's table shows only how many keys it has, ``describe`` their sizes.

Simplification: kfp-kubernetes and Fluid's ``secretKeyRef`` read a Secret by name alone, so the store
keeps one per name, home-wide: a Secret (or ConfigMap) is in one namespace, and applying the same name
in another is a conflict (one line). One made by ``millpond secret create`` (no row) is in ``default``.
``binaryData`` and Secret values that are not UTF-8 text are refused, as ``store.config_documents`` does.
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass
from typing import Any

from millpond.core.view import Planned, check_envelope, derived_uid, metadata_of, parse_timestamp
from millpond.errors import ConflictError, UserError
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
DEFAULT_NAMESPACE = "default"  # where a Secret or ConfigMap with no row (``millpond secret create``) is


@dataclass(frozen=True)
class _Entry:
    """One Secret or ConfigMap: its values and, when applied as a manifest, its row."""

    name: str
    data: dict[str, str]
    row: Resource | None
    created: dt.datetime

    @property
    def namespace(self) -> str:
        return self.row.namespace if self.row is not None else DEFAULT_NAMESPACE


def _entries(kind: str, context: KindContext) -> list[_Entry]:
    """Every Secret (or ConfigMap) of the home, by name; a row whose values are gone (deleted with
    ``millpond secret delete``) is no object."""
    configs = ConfigStore(context.settings.home)
    rows = {row.name: row for row in ResourceStore(context.settings).list(kind)}
    found = []
    for name, _keys in configs.list(STORED[kind]):
        try:
            data = configs.get(STORED[kind], name)
        except (MissingConfig, UserError):
            continue  # removed meanwhile, or damaged: `millpond secret` says which
        row = rows.get(name)
        made = row.created_at if row is not None else _file_time(configs, STORED[kind], name)
        found.append(_Entry(name, data, row, made))
    return found


def _file_time(configs: ConfigStore, kind: str, name: str) -> dt.datetime:
    try:
        return dt.datetime.fromtimestamp((configs.folder(kind) / f"{name}.json").stat().st_mtime, dt.timezone.utc)
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
        return [_shown(entry, one) for one in _entries(self.kind, context)
                if namespace is None or one.namespace == namespace]

    def cells(self, shown: dict[str, Any], now: dt.datetime) -> list[str]:
        created = parse_timestamp(shown["metadata"]["creationTimestamp"]) or now
        count = str(len(shown.get("data") or {}))
        return [shown["type"], count, age_since(created, now)] if self.kind == "Secret" else [count,
                                                                                          age_since(created, now)]

    def check(self, entry: KindName, doc: dict[str, Any], where: str, context: KindContext) -> Planned:
        planned = check_one(doc, where)  # the values as the store keeps them: the same checks and lines as ever
        metadata, fields = check_envelope(entry, doc, where, _FIELDS[self.kind])
        name, namespace = metadata["name"], metadata["namespace"]
        known = {one.name: one for one in _entries(self.kind, context)}
        before = known.get(name)
        if before is not None and before.namespace != namespace:
            raise ConflictError(f'{where} {name}: a {self.kind} named "{name}" is in namespace "{before.namespace}": '
                                f"millpond keeps {self.kind}s by name, home-wide (pipelines and Fluid read them "
                                "by name); delete it first or choose another name")
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
                old: dict[str, str] | None = configs.get(planned.kind, name)
            except MissingConfig:
                old = None
            store = ResourceStore(context.settings)
            if old is None:  # a row left by `millpond secret delete` (in any namespace) is not this new object's
                for stale in store.list(self.kind):
                    if stale.name == name:
                        store.delete(self.kind, name, stale.namespace)
            configs.create(planned.kind, name, planned.data, replace=True)
            row_action = store.apply([row])[0][1]
            if old is None:
                return "created"
            return "unchanged" if old == planned.data and row_action == "unchanged" else "configured"

        return Planned(entry, name, namespace, store)

    def delete(self, entry: KindName, name: str, namespace: str, context: KindContext) -> None:
        found = next((one for one in _entries(self.kind, context) if one.name == name), None)
        if found is None or found.namespace != namespace:
            raise not_found(entry, name, namespace)
        ConfigStore(context.settings.home).delete(STORED[self.kind], name)
        if found.row is not None:
            ResourceStore(context.settings).delete(self.kind, name, namespace)


def described(shown: dict[str, Any]) -> dict[str, Any]:
    """A Secret as ``kubectl describe`` shows it: each key's size in bytes, never its value."""
    sizes = {key: f"{len(base64.b64decode(value))} bytes" for key, value in (shown.get("data") or {}).items()}
    return {**shown, "data": sizes}

"""What each of the core family's kinds provides to the family's one handler (``core.handler``).

A kind's *view* lists its objects as ``kubectl get -o json`` shows them, lays out kubectl's columns for
one of them, checks a document of ``apply`` into a :class:`Planned` store step, and deletes. The
handler writes the rest once: ``get`` finds the object named among the listed ones, the table is
built from the listed objects, so what ``get``, ``get -o json`` and the table show never disagree.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from millpond.core.kinds import api_version
from millpond.errors import UserError
from millpond.kind_handler import KindContext, KindName
from millpond.manifest_envelope import check_metadata
from millpond.store.resources import Resource

# A kind millpond derives (a Fluid volume, a node, an event): shown, never created from a manifest.
READ_ONLY = "read-only"


@dataclass(frozen=True)
class Planned:
    """One checked document; ``store`` keeps it (all checks passed) and answers kubectl's action word."""

    entry: KindName
    name: str
    namespace: str  # "" for a cluster-scoped kind
    store: Callable[[KindContext], str]
    notes: tuple[str, ...] = ()


class CoreView(Protocol):
    """One core kind: ``columns`` are kubectl's after NAME; ``objects`` of ``namespace`` (None: every one)."""

    @property
    def columns(self) -> tuple[str, ...]: ...

    def objects(self, entry: KindName, namespace: str | None, context: KindContext) -> list[dict[str, Any]]: ...

    def cells(self, shown: dict[str, Any], now: dt.datetime) -> list[str]: ...

    def check(self, entry: KindName, doc: dict[str, Any], where: str, context: KindContext) -> Planned: ...

    def delete(self, entry: KindName, name: str, namespace: str, context: KindContext) -> None: ...


def timestamp(moment: dt.datetime) -> str:
    """RFC 3339 in UTC, to the second, as the API server writes ``creationTimestamp``."""
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: object) -> dt.datetime | None:
    """A ``creationTimestamp`` read back (None when absent or not RFC 3339)."""
    if not isinstance(text, str):
        return None
    try:
        return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None


def derived_uid(*parts: str) -> str:
    """A stable uid for an object millpond derives rather than stores (the same object, the same uid)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "millpond:" + "/".join(parts)))


def metadata_of(entry: KindName, name: str, namespace: str, uid: str, created: dt.datetime,
                applied: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An object's metadata: name, namespace (namespaced kinds only), uid, creationTimestamp, labels and
    annotations as applied."""
    metadata: dict[str, Any] = {"name": name}
    if not entry.cluster_scoped:
        metadata["namespace"] = namespace
    metadata.update(uid=uid, creationTimestamp=timestamp(created))
    metadata.update({key: dict(applied[key]) for key in ("labels", "annotations") if applied and applied.get(key)})
    return metadata


def kept_object(entry: KindName, resource: Resource, status: dict[str, Any] | None = None) -> dict[str, Any]:
    """A kept object (a row of the resource store) as the API server shows it: its fields as applied."""
    applied = resource.manifest
    shown: dict[str, Any] = {"apiVersion": api_version(entry), "kind": entry.kind, "metadata": metadata_of(
        entry, resource.name, resource.namespace, resource.uid, resource.created_at, applied.get("metadata"))}
    shown.update({key: value for key, value in applied.items() if key not in ("apiVersion", "kind", "metadata")})
    if status is not None:
        shown["status"] = status
    return shown


def check_envelope(entry: KindName, doc: dict[str, Any], where: str, fields: Mapping[str, type | tuple[type, ...]],
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metadata kept, top-level fields kept) of a document of ``entry``: the apiVersion, the metadata as the API
    server checks it, every other top-level field one of ``fields`` with its JSON type (``status`` is accepted
    and dropped: what the server owns). UserError (one line, led by ``where``) otherwise."""
    expected = api_version(entry)
    if doc.get("apiVersion") != expected:
        raise UserError(f"{where}: apiVersion {json.dumps(doc.get('apiVersion'))} is not supported "
                        f"(millpond reads {expected})")
    try:
        metadata = check_metadata(entry.kind, doc.get("metadata"), namespaced=not entry.cluster_scoped)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    named = f"{where} {metadata['name']}"
    kept: dict[str, Any] = {}
    for key, value in doc.items():
        if key in ("apiVersion", "kind", "metadata", "status"):
            continue
        if key not in fields:
            raise UserError(f"{named}: unknown field {json.dumps(key)}")
        if value is None:
            continue  # null: absent, as the API server prunes it
        if not isinstance(value, fields[key]) or (isinstance(value, bool) and fields[key] is int):
            raise UserError(f"{named}: {key}: expected {_type_name(fields[key])}, got {type(value).__name__}")
        kept[key] = value
    return metadata, kept


def _type_name(expected: type | tuple[type, ...]) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer"}
    kinds = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join(names.get(kind, kind.__name__) for kind in kinds)


def strings(value: object, where: str) -> list[str]:
    """A list of strings (an RBAC rule's verbs, a claim's access modes); UserError otherwise."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UserError(f"{where}: expected a list of strings")
    return list(value)

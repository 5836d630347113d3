"""Secrets and ConfigMaps in a manifest: checked, and kept in the home's store.

Upstream samples ship a Fluid Dataset with the Secret holding its keys. On one machine a Secret or
ConfigMap is what a home's ``millpond secret``/``configmap`` store holds (``store.secrets``: 0600
files, what kfp-kubernetes and Fluid's ``secretKeyRef`` read), so one in a manifest is kept there
(``data`` base64-decoded, ``stringData`` over it, as the API server merges them). The core family
(``millpond.core``) applies them as kinds of the registry, with the batch's Namespaces,
ServiceAccounts and RBAC; ``batch_lookup`` lets the batch's other documents (a Dataset naming the
batch's Secret) be checked against them before anything is written, so a bad file changes nothing.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from millpond.errors import UserError
from millpond.manifest_envelope import check_name
from millpond.store.secrets import ConfigStore, check_key

STORED = {"Secret": "secret", "ConfigMap": "configmap"}


@dataclass(frozen=True)
class PlannedConfig:
    kind: str  # "secret" or "configmap"
    name: str
    data: dict[str, str]
    namespace: str = "default"


def is_config_document(doc: Any) -> bool:
    """A ``v1`` Secret or ConfigMap."""
    return isinstance(doc, dict) and doc.get("apiVersion") == "v1" and isinstance(doc.get("kind"), str) \
        and doc["kind"] in STORED


def _text_values(values: object, where: str, field: str, decode: bool) -> dict[str, str]:
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise UserError(f"{where}: {field} must be a map of keys to values")
    found = {}
    for key, value in values.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise UserError(f"{where}: {field}: every key and value must be a string")
        if decode:
            try:
                value = base64.b64decode(value, validate=True).decode("utf-8")
            except (binascii.Error, ValueError):
                raise UserError(f"{where}: {field}.{key} is not base64 of UTF-8 text "
                                "(binary secrets are not supported here; use stringData for text)") from None
        found[key] = value
    return found


def check_one(doc: dict[str, Any], where: str) -> PlannedConfig:
    """One Secret or ConfigMap checked (name, namespace, keys, encodings): what ``store`` would keep."""
    kind = doc["kind"]
    metadata = doc.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(metadata, dict) or not isinstance(name, str) or not name:
        raise UserError(f"{where}: metadata.name is required")
    store_kind = STORED[kind]
    check_name(store_kind, name)
    if metadata.get("namespace"):  # a namespace Kubernetes refuses is refused ("" is default)
        try:
            check_name("namespace", str(metadata["namespace"]))
        except UserError as exc:
            raise UserError(f"{where} {name}: metadata.namespace: {exc}") from None
    if kind == "Secret":
        data = {**_text_values(doc.get("data"), where, "data", decode=True),
                **_text_values(doc.get("stringData"), where, "stringData", decode=False)}
    else:
        if doc.get("binaryData"):
            raise UserError(f"{where}: binaryData is not supported here (a config map holds text)")
        data = _text_values(doc.get("data"), where, "data", decode=False)
    for key in data:
        check_key(store_kind, key)
    return PlannedConfig(store_kind, name, data, str(metadata.get("namespace") or "default"))


def check(documents: list[tuple[str, int, Any]]) -> tuple[list[PlannedConfig], list[str]]:
    """The Secrets and ConfigMaps of a batch, checked, and the info notes (none: the other core kinds are kept
    by the core family now, ``millpond.core``); other documents are skipped."""
    planned = [check_one(doc, f"{source}: document {number}: {doc['kind']}")
               for source, number, doc in documents if is_config_document(doc)]
    return planned, []


def batch_lookup(documents: list[tuple[str, int, Any]], store: ConfigStore) -> WithPlanned:
    """The home's Secrets and ConfigMaps as they will be once the batch's own are kept (what a Dataset's
    ``secretKeyRef`` of the same batch is checked against); a bad one raises its one line first."""
    return WithPlanned(store, check(documents)[0])


class WithPlanned(ConfigStore):
    """The home's secrets and config maps as they will be once ``planned`` is kept: what the batch's
    other documents (a Dataset's ``secretKeyRef``) are checked against."""

    def __init__(self, store: ConfigStore, planned: list[PlannedConfig]) -> None:
        super().__init__(store.home, store.namespace, store.fallback)
        self._planned = {(p.kind, p.namespace, p.name): p.data for p in planned}

    def _read(self, kind: str, name: str, namespace: str) -> dict[str, str]:
        if (kind, namespace, name) in self._planned:
            return dict(self._planned[(kind, namespace, name)])
        return super()._read(kind, name, namespace)

"""Kubernetes' own documents that come alongside a manifest: Secrets and ConfigMaps kept, the rest noted.

Upstream samples ship a Fluid Dataset with the Secret holding its keys, a training job with its
Namespace, ServiceAccount and RBAC. On one machine a Secret or ConfigMap is what a home's
``millpond secret``/``configmap`` store holds (``store.secrets``: 0600 files, what kfp-kubernetes
and Fluid's ``secretKeyRef`` read), so one in a manifest is kept there (``data`` base64-decoded,
``stringData`` over it, as the API server merges them). Namespaces, service accounts and RBAC
mean nothing here (one user, no API server to authorize against): they are ignored with one
``info:`` line per kind. Everything is checked before anything is written, with the batch's
other documents, so a bad file changes nothing.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from millpond.errors import UserError
from millpond.manifest_envelope import check_name
from millpond.store.secrets import ConfigStore, MissingConfig, check_key

STORED = {"Secret": "secret", "ConfigMap": "configmap"}
IGNORED = ("Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
API_VERSIONS = {"v1", "rbac.authorization.k8s.io/v1"}


@dataclass(frozen=True)
class PlannedConfig:
    kind: str  # "secret" or "configmap"
    name: str
    data: dict[str, str]


def is_core_document(doc: Any) -> bool:
    if not isinstance(doc, dict):
        return False
    version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(version, str) or not isinstance(kind, str):
        return False
    return version in API_VERSIONS and kind in (*STORED, *IGNORED)


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


def check(documents: list[tuple[str, int, Any]]) -> tuple[list[PlannedConfig], list[str]]:
    """The Secrets and ConfigMaps to keep, checked (names, keys, encodings), and the info notes."""
    planned: list[PlannedConfig] = []
    ignored: dict[str, int] = {}
    for source, number, doc in documents:
        kind = doc["kind"]
        where = f"{source}: document {number}: {kind}"
        if kind in IGNORED:
            ignored[kind] = ignored.get(kind, 0) + 1
            continue
        metadata = doc.get("metadata")
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if not isinstance(name, str) or not name:
            raise UserError(f"{where}: metadata.name is required")
        store_kind = STORED[kind]
        check_name(store_kind, name)
        if metadata.get("namespace"):  # kept home-wide, but a namespace Kubernetes refuses is refused ("" is default)
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
        planned.append(PlannedConfig(store_kind, name, data))
    notes = [f"{kind} ({count}): ignored: one machine has no API server to scope or authorize against"
             for kind, count in ignored.items()]
    return planned, notes


class WithPlanned(ConfigStore):
    """The home's secrets and config maps as they will be once ``planned`` is kept: what the batch's
    other documents (a Dataset's ``secretKeyRef``) are checked against."""

    def __init__(self, store: ConfigStore, planned: list[PlannedConfig]) -> None:
        super().__init__(store.home)
        self._planned = {(p.kind, p.name): p.data for p in planned}

    def get(self, kind: str, name: str) -> dict[str, str]:
        if (kind, name) in self._planned:
            return dict(self._planned[(kind, name)])
        return super().get(kind, name)


def apply(planned: list[PlannedConfig], store: ConfigStore) -> list[str]:
    """Keep each one (created or replaced, as ``kubectl apply`` does); kubectl's lines."""
    lines = []
    for item in planned:
        try:
            before = store.get(item.kind, item.name)
        except MissingConfig:
            before = None
        store.create(item.kind, item.name, item.data, replace=True)
        action = "created" if before is None else ("unchanged" if before == item.data else "configured")
        lines.append(f"{item.kind}/{item.name} {action}")
    return lines

"""``v1`` ResourceQuota: a namespace's hard limits, kept as applied, with ``status.hard``/``status.used`` computed.

``spec.hard`` is checked as the API server validates it (each value a non-negative quantity); ``scopes`` and
``scopeSelector`` are kept. ``status.used`` is derived on every read, never stored: the compute resources,
GPUs, GPU shares and pods from the machine's ledger (what the namespace's running and admitted workloads
hold, ``scheduling.resource_quota``), object counts (``persistentvolumeclaims``, ``requests.storage``,
``count/<resource>``) from the objects stored in the namespace. The charges are enforced where workloads
are admitted (the ledger); the object counts are shown only. kubectl's columns: ``AGE REQUEST LIMIT``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from millpond.core.view import Planned, check_envelope, kept_object, parse_timestamp
from millpond.errors import MillpondError, UserError
from millpond.kind_handler import KindContext, KindName
from millpond.kinds import REGISTRY
from millpond.manifest_envelope import not_found
from millpond.quantities import QuantityError, parse_quantity
from millpond.scheduling.ledger import Ledger
from millpond.scheduling.resource_quota import ENFORCED, amount
from millpond.store.resources import Resource, ResourceStore
from millpond.tables import age_since

KIND = "ResourceQuota"
_SPEC_FIELDS = ("hard", "scopes", "scopeSelector")
_STORAGE = "requests.storage"
_CLAIMS = "persistentvolumeclaims"


def check_spec(spec: dict[str, Any], where: str) -> dict[str, Any]:
    """A ResourceQuotaSpec as the API server validates it (a Profile's ``resourceQuotaSpec`` too); UserError
    (one line, led by ``where``) otherwise. The values are kept as written."""
    unknown = sorted(set(spec) - set(_SPEC_FIELDS))
    if unknown:
        raise UserError(f'{where}: unknown field "{unknown[0]}"')
    hard = spec.get("hard") or {}
    if not isinstance(hard, dict):
        raise UserError(f"{where}.hard: expected a map of resource names to quantities")
    for name, value in hard.items():
        try:
            if parse_quantity(value, f"{where}.hard[{name}]").amount < 0:
                raise UserError(f"{where}.hard[{name}]: Invalid value: {value!r}: must be greater than or equal to 0")
        except QuantityError as exc:
            raise UserError(str(exc)) from None
    if not isinstance(spec.get("scopes") or [], list):
        raise UserError(f"{where}.scopes: expected a list of strings")
    if not isinstance(spec.get("scopeSelector") or {}, dict):
        raise UserError(f"{where}.scopeSelector: expected an object")
    return spec


def used(namespace: str, hard: dict[str, Any], context: KindContext) -> dict[str, int]:
    """What ``namespace`` uses of each resource ``hard`` limits, in milli-units."""
    result: dict[str, int] = {}
    if any(key in ENFORCED for key in hard):
        held = Ledger(context.settings).namespace_usage(namespace)
        result.update({key: held[key] for key in hard if key in held})
    claims = None
    for key in hard:
        if key in result:
            continue
        if key in (_CLAIMS, _STORAGE):
            claims = claims if claims is not None else _listed("persistentvolumeclaims", namespace, context)
            result[key] = len(claims) * 1000 if key == _CLAIMS else sum(_storage(claim) for claim in claims)
        elif key in ("resourcequotas", "count/resourcequotas"):  # not through the view: it computes this
            result[key] = len(ResourceStore(context.settings).list(KIND, namespace)) * 1000
        elif key.startswith("count/"):
            result[key] = len(_listed(key.removeprefix("count/"), namespace, context)) * 1000
        else:
            result[key] = 0  # a resource millpond does not count (ephemeral-storage, services…)
    return result


def _listed(resource: str, namespace: str, context: KindContext) -> list[dict[str, Any]]:
    """The objects of ``resource`` (kubectl's spelling, ``pods``, ``jobs.batch``) in ``namespace``; none when
    millpond knows no such kind."""
    entry = REGISTRY.find(resource)
    if entry is None or entry.cluster_scoped:
        return []
    try:
        return REGISTRY.handler(entry).list_objects(entry, namespace, False, context)
    except MillpondError:
        return []


def _storage(claim: dict[str, Any]) -> int:
    requested = ((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}
    try:
        return parse_quantity(requested.get("storage", 0)).milli_value()
    except QuantityError:
        return 0


def status_of(row: Resource, context: KindContext) -> dict[str, Any]:
    """``status.hard`` (the spec's, as quantities print) and ``status.used`` (computed now)."""
    hard = (row.manifest.get("spec") or {}).get("hard") or {}
    counted = used(row.namespace, hard, context)
    shown_hard = {}
    for key, value in hard.items():
        try:
            shown_hard[key] = str(parse_quantity(value))
        except QuantityError:
            shown_hard[key] = str(value)
    return {"hard": shown_hard, "used": {key: amount(key, counted.get(key, 0)) for key in hard}}


class ResourceQuotaView:
    """``NAME AGE REQUEST LIMIT`` (kubectl's: each ``resource: used/hard``, the ``limits.*`` ones under LIMIT)."""

    columns: tuple[str, ...] = ("AGE", "REQUEST", "LIMIT")

    def objects(self, entry: KindName, namespace: str | None, context: KindContext) -> list[dict[str, Any]]:
        rows = ResourceStore(context.settings).list(KIND, namespace)
        return [kept_object(entry, row, status_of(row, context)) for row in rows]

    def cells(self, shown: dict[str, Any], now: dt.datetime) -> list[str]:
        status = shown.get("status") or {}
        hard, counted = status.get("hard") or {}, status.get("used") or {}

        def listed(limits: bool) -> str:
            return ", ".join(f"{key}: {counted.get(key, '0')}/{value}" for key, value in sorted(hard.items())
                             if key.startswith("limits.") == limits)
        created = parse_timestamp(shown["metadata"]["creationTimestamp"]) or now
        return [age_since(created, now), listed(False), listed(True)]

    def check(self, entry: KindName, doc: dict[str, Any], where: str, context: KindContext) -> Planned:
        metadata, fields = check_envelope(entry, doc, where, {"spec": dict})
        name = metadata["name"]
        check_spec(fields.get("spec") or {}, f"{where} {name}: spec")
        manifest = {"apiVersion": "v1", "kind": KIND, "metadata": metadata, **fields}

        def store(context: KindContext) -> str:
            return ResourceStore(context.settings).apply([manifest])[0][1]

        return Planned(entry, name, metadata["namespace"], store)

    def delete(self, entry: KindName, name: str, namespace: str, context: KindContext) -> None:
        if not ResourceStore(context.settings).delete(KIND, name, namespace):
            raise not_found(entry, name, namespace)

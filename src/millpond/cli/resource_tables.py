"""How ``millpond get`` shows Fluid objects: kubectl's columns and ages, or the whole object.

The columns are the ones ``kubectl get`` prints for Fluid's CRDs, so a user reading a Fluid
tutorial recognises them; a value not known yet is ``-`` (a dataset's size, as Fluid
prints it, ``[Calculating]``).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from millpond.datasets.kinds import KINDS, dataset_reference

if TYPE_CHECKING:
    from millpond.store.resources import Resource

MISSING = "-"

COLUMNS = {
    "dataset": ("NAME", "UFS TOTAL SIZE", "CACHED", "CACHE CAPACITY", "CACHED PERCENTAGE", "PHASE", "AGE"),
    "runtime": ("NAME", "MASTER PHASE", "WORKER PHASE", "FUSE PHASE", "AGE"),
    "operation": ("NAME", "DATASET", "PHASE", "AGE", "DURATION"),
}


def human_age(seconds: float) -> str:
    """kubectl's age: ``45s``, ``3m2s``, ``15m``, ``5h10m``, ``2d``, ``3y``: precise when recent, coarse when old."""
    s = int(seconds)
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    if hours < 24 * 365 * 8:
        return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"
    return f"{days // 365}y"


def _text(value: Any, missing: str = MISSING) -> str:
    return missing if value is None or value == "" else str(value)


def row(resource: "Resource", status: dict[str, Any], now: dt.datetime) -> list[str]:
    category = KINDS[resource.kind].category
    age = human_age((now - resource.created_at).total_seconds())
    if category == "dataset":
        cache = status.get("cacheStates") or {}
        return [resource.name, _text(status.get("ufsTotal"), "[Calculating]"), _text(cache.get("cached")),
                _text(cache.get("cacheCapacity")), _text(cache.get("cachedPercentage")), _text(status.get("phase")),
                age]
    if category == "runtime":
        return [resource.name, _text(status.get("masterPhase")), _text(status.get("workerPhase")),
                _text(status.get("fusePhase")), age]
    ref = dataset_reference(resource.kind, resource.spec)
    return [resource.name, _text(ref[0] if ref else None), _text(status.get("phase")), age,
            _text(status.get("duration"))]


def format_table(headers: tuple[str, ...], rows: list[list[str]]) -> str:
    """Left-aligned columns three spaces apart, as kubectl prints them."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = [
        "   ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [list(headers), *rows]
    ]
    return "\n".join(lines) + "\n"

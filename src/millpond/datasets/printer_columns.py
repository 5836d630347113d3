"""How ``millpond get`` shows Fluid objects: kubectl's columns for Fluid's CRDs (``additionalPrinterColumns``).

The columns are the ones ``kubectl get`` prints for Fluid's CRDs, so a user reading a Fluid
tutorial recognises them; a value not known yet is ``-`` (a dataset's size, as Fluid
prints it, ``[Calculating]``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from millpond.datasets.kinds import KINDS, dataset_reference
from millpond.store.resources import Resource
from millpond.tables import human_age

MISSING = "-"

COLUMNS = {
    "dataset": ("NAME", "UFS TOTAL SIZE", "CACHED", "CACHE CAPACITY", "CACHED PERCENTAGE", "PHASE", "AGE"),
    "runtime": ("NAME", "MASTER PHASE", "WORKER PHASE", "FUSE PHASE", "AGE"),
    "operation": ("NAME", "DATASET", "PHASE", "AGE", "DURATION"),
}


def _text(value: Any, missing: str = MISSING) -> str:
    return missing if value is None or value == "" else str(value)


def row(resource: Resource, status: dict[str, Any], now: dt.datetime) -> list[str]:
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

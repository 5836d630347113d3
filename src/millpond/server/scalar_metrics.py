"""A KFP v2 task's scalar metrics: the numbers a ``system.Metrics`` output artifact holds in its metadata
(``metrics.log_metric("accuracy", 0.97)``), as the runs list's Metrics column and the compare page
show them beside kfp 1.x's ``mlpipeline-metrics``.

KFP v2's UI reads them from MLMD (the artifact's custom properties); millpond's store keeps the same
metadata in the task's recorded outputs, so nothing is read from disk here. ``display_name`` (which kfp
writes into the metadata too) is a name, not a metric; booleans and non-numbers are left out.
"""

from __future__ import annotations

import math
from typing import Any

from millpond.store.models import Task

METRICS_TYPE = "system.Metrics"


def scalar_metrics(task: Task) -> list[dict[str, Any]]:
    """``[{name, number_value, format, node, artifact}]`` of the task's Metrics artifacts, in their order."""
    found: list[dict[str, Any]] = []
    for key, entries in ((task.outputs or {}).get("artifacts") or {}).items():
        for entry in entries if isinstance(entries, list) else [entries]:
            if not isinstance(entry, dict) or ((entry.get("type") or {}).get("schemaTitle")) != METRICS_TYPE:
                continue
            for name, value in (entry.get("metadata") or {}).items():
                if name == "display_name" or isinstance(value, bool) or not isinstance(value, (int, float)):
                    continue
                if not math.isfinite(value):
                    continue
                found.append({"name": str(name), "number_value": float(value), "format": "RAW",
                              "node": task.name, "artifact": key})
    return found

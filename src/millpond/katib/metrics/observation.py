"""A trial's observation from its metric logs, as Katib's trial controller and webhook compute it.

- :func:`observation`: Katib's ``getMetrics``: per metric the smallest and largest numeric value
  and the value with the latest time (a later log wins a tie), "unavailable" when there is none.
- :func:`default_strategies`: Katib's ``setDefaultObjective``: a metric without a strategy gets
  ``min`` when the objective is minimized, ``max`` when it is maximized.
- :func:`objective_value`: the one value a strategy picks (Katib's ``convertTrialObservation``):
  min or max, or the latest value when no number was ever reported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from millpond.errors import UserError
from millpond.katib.metrics import timestamps
from millpond.katib.metrics.records import UNAVAILABLE, MetricLog, MetricValue

STRATEGIES = ("min", "max", "latest")


def _number(text: str) -> float | None:
    """Go's ``strconv.ParseFloat``: a decimal or ``inf``/``nan`` word; Python's underscores are not numbers."""
    if "_" in text or text.strip() != text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def observation(logs: Sequence[MetricLog], strategies: Mapping[str, str]) -> dict[str, MetricValue]:
    """Each metric ``strategies`` names, from ``logs``; logs of other metrics are ignored."""
    found: dict[str, dict[str, str]] = {
        name: {"min": UNAVAILABLE, "max": UNAVAILABLE, "latest": UNAVAILABLE} for name in strategies}
    latest_at: dict[str, tuple[int, int]] = {}
    for log in logs:
        metric = found.get(log.name)
        if metric is None:
            continue
        value = _number(log.value)
        if value is not None:
            if metric["min"] == UNAVAILABLE:
                metric["min"] = metric["max"] = log.value
            elif value < float(metric["min"]):  # Katib's order: a new minimum is never also a new maximum
                metric["min"] = log.value
            elif value > float(metric["max"]):
                metric["max"] = log.value
        at = timestamps.parse(log.time)
        if at is None:
            raise UserError(f"metric {log.name}: time {log.time!r} is not RFC 3339")
        if log.name not in latest_at or not latest_at[log.name] > at:
            latest_at[log.name] = at
            metric["latest"] = log.value
    return {name: MetricValue(**values) for name, values in found.items()}


def default_strategies(objective: Mapping[str, Any], path: str = "spec.objective") -> dict[str, str]:
    """The objective's ``metricStrategies`` with Katib's defaults filled in, keyed by metric name."""
    if not isinstance(objective, Mapping):
        raise UserError(f"{path}: must be an object")
    goal_type = objective.get("type")
    default = {"minimize": "min", "maximize": "max"}.get(goal_type if isinstance(goal_type, str) else "", "latest")
    given = objective.get("metricStrategies") or []
    if not isinstance(given, list):
        raise UserError(f"{path}.metricStrategies: must be a list")
    strategies: dict[str, str] = {}
    for index, entry in enumerate(given):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise UserError(f"{path}.metricStrategies[{index}].name: must be a string")
        value = entry.get("value")
        if value not in STRATEGIES:
            raise UserError(f"{path}.metricStrategies[{index}].value: {value!r} is not one of min, max, latest")
        strategies[entry["name"]] = value
    additional = objective.get("additionalMetricNames") or []
    if not isinstance(additional, list):
        raise UserError(f"{path}.additionalMetricNames: must be a list")
    names = [objective.get("objectiveMetricName"), *additional]
    for name in names:
        if isinstance(name, str) and name not in strategies:
            strategies[name] = default
    return strategies


def objective_value(metric: MetricValue, strategy: str) -> str:
    """The value ``strategy`` picks; "unavailable" when the metric was never reported."""
    if strategy == "min":
        return metric.latest if metric.min == UNAVAILABLE else metric.min
    if strategy == "max":
        return metric.latest if metric.max == UNAVAILABLE else metric.max
    return metric.latest


def as_float(value: str) -> float | None:
    """A reported value as a finite number, None for "unavailable" or anything Katib could not parse."""
    number = _number(value)
    return number if number is not None and math.isfinite(number) else None

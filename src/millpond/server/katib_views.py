"""What the Katib pages show of an Experiment and its Trials, read from the objects as ``kubectl get -o json``
returns them (``kubeflow.org/v1beta1``), as Katib's own UI reads them (``pkg/new-ui/v1beta1``'s backend).

- **An experiment's state** is its newest condition whose status is ``True`` (Created, Running, Restarting,
  Succeeded, Failed), with that condition's reason and message; ``Created`` before any.
- **A trial's state** the same way over the trial's conditions (Created, Running, Succeeded, Killed, Failed,
  EarlyStopped, MetricsUnavailable); ``Pending`` before any.
- **The objective value of a trial** is its observation's value for the objective metric under the metric's
  strategy (``spec.objective.metricStrategies``; by default ``min`` to minimize, ``max`` to maximize, as
  Katib's defaulting webhook sets it); ``None`` when the metric is ``unavailable`` or not a number.

Pure functions of the objects: the routes (``katib_routes``) read them through the kinds registry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from millpond.katib.kinds import EXPERIMENT_LABEL

Obj = Mapping[str, Any]


def _newest_true(conditions: Sequence[Obj]) -> Obj | None:
    """The last condition whose status is True, in the order the controller appended them (Katib keeps them
    in that order; a condition that changed keeps its place, so the newest ``lastTransitionTime`` decides)."""
    true = [c for c in conditions if str(c.get("status")) == "True"]
    if not true:
        return None
    indexed = list(enumerate(true))
    return max(indexed, key=lambda pair: (str(pair[1].get("lastTransitionTime") or ""), pair[0]))[1]


def condition_of(obj: Obj, default: str) -> dict[str, str]:
    """``{"type", "reason", "message"}`` of the object's current condition (``default`` before any)."""
    found = _newest_true(list(((obj.get("status") or {}).get("conditions")) or []))
    if found is None:
        return {"type": default, "reason": "", "message": ""}
    return {"type": str(found.get("type") or default), "reason": str(found.get("reason") or ""),
            "message": str(found.get("message") or "")}


def _number(text: object) -> float | None:
    try:
        value = float(str(text))
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def strategy_of(objective: Obj, metric: str) -> str:
    """How a metric's observations become its value: ``min``, ``max`` or ``latest`` (Katib's defaults)."""
    for entry in objective.get("metricStrategies") or []:
        if entry.get("name") == metric and entry.get("value") in ("min", "max", "latest"):
            return str(entry["value"])
    return "min" if objective.get("type") == "minimize" else "max"


def metric_values(observation: Obj | None, objective: Obj) -> dict[str, float | None]:
    """Each observed metric's value under its strategy (None: unavailable)."""
    values: dict[str, float | None] = {}
    for metric in ((observation or {}).get("metrics") or []):
        name = str(metric.get("name") or "")
        if name:
            values[name] = _number(metric.get(strategy_of(objective, name)))
    return values


def _assignments(items: Sequence[Obj] | None) -> dict[str, str]:
    return {str(item.get("name")): str(item.get("value")) for item in items or [] if item.get("name") is not None}


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def best_trial(experiment: Obj) -> dict[str, Any] | None:
    """``status.currentOptimalTrial`` as the pages show it: name, assignments, objective value; None before one."""
    status = experiment.get("status") or {}
    optimal = status.get("currentOptimalTrial") or {}
    name = optimal.get("bestTrialName")
    if not name:
        return None
    objective = (experiment.get("spec") or {}).get("objective") or {}
    metric = str(objective.get("objectiveMetricName") or "")
    values = metric_values(optimal.get("observation"), objective)
    return {"name": str(name), "parameters": _assignments(optimal.get("parameterAssignments")),
            "objective": values.get(metric), "metrics": values}


_COUNTS = ("trials", "trialsSucceeded", "trialsFailed", "trialsRunning", "trialsPending", "trialsKilled",
           "trialsEarlyStopped", "trialMetricsUnavailable")


def experiment_row(experiment: Obj) -> dict[str, Any]:
    """One line of the Experiments page."""
    spec, status = experiment.get("spec") or {}, experiment.get("status") or {}
    objective = spec.get("objective") or {}
    return {"name": str(_meta(experiment).get("name") or ""), "namespace": str(_meta(experiment).get("namespace")
                                                                                or "default"),
            "created": str(_meta(experiment).get("creationTimestamp") or ""),
            "condition": condition_of(experiment, "Created"),
            "counts": {key: int(status.get(key) or 0) for key in _COUNTS},
            "algorithm": str((spec.get("algorithm") or {}).get("algorithmName") or ""),
            "objective": {"type": str(objective.get("type") or ""),
                          "metric": str(objective.get("objectiveMetricName") or ""),
                          "goal": _number(objective.get("goal"))},
            "maxTrialCount": spec.get("maxTrialCount"), "parallelTrialCount": spec.get("parallelTrialCount"),
            "best": best_trial(experiment)}


def is_trial_of(trial: Obj, experiment: str) -> bool:
    """Whether the trial belongs to the experiment: Katib's label, else its owner reference."""
    meta = _meta(trial)
    if (meta.get("labels") or {}).get(EXPERIMENT_LABEL) == experiment:
        return True
    return any(ref.get("kind") == "Experiment" and ref.get("name") == experiment
               for ref in meta.get("ownerReferences") or [])


def trial_row(trial: Obj, objective: Obj) -> dict[str, Any]:
    """One line of an experiment's trials table."""
    spec, status = trial.get("spec") or {}, trial.get("status") or {}
    metric = str(objective.get("objectiveMetricName") or "")
    values = metric_values(status.get("observation"), objective)
    template = spec.get("runSpec") or {}
    return {"name": str(_meta(trial).get("name") or ""), "condition": condition_of(trial, "Pending"),
            "parameters": _assignments(spec.get("parameterAssignments")), "objective": values.get(metric),
            "metrics": values, "started": str(status.get("startTime") or ""),
            "completed": str(status.get("completionTime") or ""),
            "kind": str(template.get("kind") or ""), "primaryContainer": str(spec.get("primaryContainerName") or ""),
            "primaryPodLabels": {str(k): str(v) for k, v in (spec.get("primaryPodLabels") or {}).items()},
            "labels": dict(spec.get("labels") or {})}


def parameter_specs(experiment: Obj) -> list[dict[str, Any]]:
    """The search space as the plot's axes need it: name, type and feasible space (numbers where numeric)."""
    specs = []
    for parameter in ((experiment.get("spec") or {}).get("parameters") or []):
        space = parameter.get("feasibleSpace") or {}
        specs.append({"name": str(parameter.get("name") or ""), "type": str(parameter.get("parameterType") or ""),
                      "min": _number(space.get("min")), "max": _number(space.get("max")),
                      "list": [str(value) for value in space.get("list") or []]})
    return specs


def experiment_detail(experiment: Obj, trials: Sequence[Obj]) -> dict[str, Any]:
    """The experiment page: its line, its search space, its trials (oldest first)."""
    objective = (experiment.get("spec") or {}).get("objective") or {}
    ordered = sorted(trials, key=lambda trial: (str(_meta(trial).get("creationTimestamp") or ""),
                                                 str(_meta(trial).get("name") or "")))
    rows = [trial_row(trial, objective) for trial in ordered]
    return {**experiment_row(experiment), "parameters": parameter_specs(experiment), "trials": rows,
            "metricNames": [str(objective.get("objectiveMetricName") or ""),
                            *[str(name) for name in objective.get("additionalMetricNames") or []]]}

"""Katib's status of Experiments and Trials as pure functions: conditions, a trial's state, the experiment's summary.

As ``pkg/controller.v1beta1/experiment/util/status_util.go`` computes it: every trial counted by its state
(Killed, Failed, Succeeded, EarlyStopped, Running, MetricsUnavailable, else Pending: that order), the best
trial the one whose objective value (after its metric strategy) is the least (minimize) or greatest
(maximize), the goal reached once the best value reaches ``objective.goal``; then the Experiment's condition:
goal reached → Succeeded ``ExperimentGoalReached``; failed trials (Failed and MetricsUnavailable) reaching
``maxFailedTrialCount`` → Failed ``ExperimentFailed``; completed trials reaching ``maxTrialCount`` → Succeeded
``ExperimentMaxTrialsReached``; the suggestion exhausted with no trial active → Succeeded
``ExperimentSuggestionEndReached``; else Running. A condition that changes is removed and appended, as Katib's
``setCondition`` does (the printer columns show the last one); Succeeded or Failed turn Running False first,
as Katib's ``MarkExperimentStatus*`` do.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from millpond.katib.metrics.records import UNAVAILABLE
from millpond.katib.webhook import ExperimentSpec

TRIAL_STATES = ("Killed", "Failed", "Succeeded", "EarlyStopped", "Running", "MetricsUnavailable")
FINISHED = frozenset({"Killed", "Failed", "Succeeded", "EarlyStopped", "MetricsUnavailable"})
_LISTS = {"Running": "runningTrialList", "Pending": "pendingTrialList", "Failed": "failedTrialList",
          "Succeeded": "succeededTrialList", "Killed": "killedTrialList", "EarlyStopped": "earlyStoppedTrialList",
          "MetricsUnavailable": "metricsUnavailableTrialList"}
_COUNTS = {"Running": "trialsRunning", "Pending": "trialsPending", "Failed": "trialsFailed",
           "Succeeded": "trialsSucceeded", "Killed": "trialsKilled", "EarlyStopped": "trialsEarlyStopped",
           "MetricsUnavailable": "trialMetricsUnavailable"}


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def is_true(status: Mapping[str, Any], kind: str) -> bool:
    return any(one.get("type") == kind and one.get("status") == "True"
               for one in status.get("conditions") or [] if isinstance(one, dict))


def reason_of(status: Mapping[str, Any], kind: str) -> str:
    return next((str(one.get("reason", "")) for one in status.get("conditions") or []
                 if isinstance(one, dict) and one.get("type") == kind), "")


def with_condition(status: Mapping[str, Any], kind: str, value: str, reason: str, message: str) -> dict[str, Any]:
    """``status`` with condition ``kind`` set as Katib's ``setCondition`` sets it: unchanged when its status and
    reason are the same; else removed and appended (the printer columns show the last condition), keeping its
    ``lastTransitionTime`` when only the reason changed."""
    conditions = [dict(one) for one in status.get("conditions") or [] if isinstance(one, dict)]
    current = next((one for one in conditions if one.get("type") == kind), None)
    if current is not None and (current.get("status"), current.get("reason")) == (value, reason):
        return {**status, "conditions": conditions}
    now = now_iso()
    changed = {"type": kind, "status": value, "reason": reason, "message": message, "lastUpdateTime": now,
               "lastTransitionTime": current.get("lastTransitionTime", now)
               if current is not None and current.get("status") == value else now}
    return {**status, "conditions": [one for one in conditions if one.get("type") != kind] + [changed]}


def without_conditions(status: Mapping[str, Any], *kinds: str) -> dict[str, Any]:
    return {**status, "conditions": [one for one in status.get("conditions") or []
                                     if isinstance(one, dict) and one.get("type") not in kinds]}


def marked(status: Mapping[str, Any], kind: str, reason: str, message: str) -> dict[str, Any]:
    """Condition ``kind`` True; a final one (Succeeded, Failed…) first turns Running False, keeping its reason,
    as Katib's ``MarkExperimentStatusSucceeded`` and ``MarkTrialStatus…`` do (the final one is then the last)."""
    out = dict(status)
    if kind not in ("Created", "Running", "Restarting"):
        running = next((one for one in out.get("conditions") or [] if one.get("type") == "Running"), None)
        if running is not None and running.get("status") == "True":
            out = with_condition(out, "Running", "False", str(running.get("reason")), str(running.get("message")))
    return with_condition(out, kind, "True", reason, message)


def trial_state(status: Mapping[str, Any]) -> str:
    """A Trial's state, in Katib's order of precedence; Pending when none holds."""
    return next((kind for kind in TRIAL_STATES if is_true(status, kind)), "Pending")


def objective_value(trial_status: Mapping[str, Any], metric: str, strategy: str) -> str:
    """The trial's objective metric after its strategy (Katib's ``getObjectiveMetricValue``), or ``unavailable``."""
    for one in (trial_status.get("observation") or {}).get("metrics") or []:
        if one.get("name") == metric:
            picked = str(one.get(strategy if strategy in ("min", "max") else "latest", UNAVAILABLE))
            return str(one.get("latest", UNAVAILABLE)) if picked == UNAVAILABLE else picked
    return UNAVAILABLE


@dataclass(frozen=True)
class TrialView:
    """What the summary reads of one Trial."""

    name: str
    assignments: Sequence[Mapping[str, Any]]
    status: Mapping[str, Any]


def summary(spec: ExperimentSpec, trials: Sequence[TrialView]) -> tuple[dict[str, Any], bool]:
    """The Experiment's trial counts, lists and current optimal trial; and whether the goal is reached."""
    out: dict[str, Any] = {"trials": len(trials)}
    lists: dict[str, list[str]] = {key: [] for key in _LISTS}
    best: TrialView | None = None
    best_value = 0.0
    goal_reached = False
    objective = spec.objective
    strategy = spec.strategies.get(objective.metric_name, "latest")
    for trial in trials:
        lists[trial_state(trial.status)].append(trial.name)
        text = objective_value(trial.status, objective.metric_name, strategy)
        if text == UNAVAILABLE:
            continue
        try:
            value = float(text)
        except ValueError:
            best = trial
            continue
        if best is None or (value < best_value if objective.type == "minimize" else value > best_value):
            best, best_value = trial, value
        if objective.goal is not None and (best_value <= objective.goal if objective.type == "minimize"
                                           else best_value >= objective.goal):
            goal_reached = True
    for state, names in lists.items():
        out[_COUNTS[state]] = len(names)
        if names:
            out[_LISTS[state]] = names
    if best is not None:
        out["currentOptimalTrial"] = {
            "bestTrialName": best.name, "parameterAssignments": [dict(one) for one in best.assignments],
            "observation": {"metrics": list((best.status.get("observation") or {}).get("metrics") or [])}}
    else:
        out["currentOptimalTrial"] = {"bestTrialName": "", "parameterAssignments": [], "observation": {}}
    return out, goal_reached


def ending(spec: ExperimentSpec, counts: Mapping[str, Any], goal_reached: bool,
           exhausted: bool) -> tuple[str, str, str] | None:
    """(condition, reason, message) that ends the Experiment now, or None: it runs on."""
    completed = sum(int(counts.get(key) or 0) for key in ("trialsSucceeded", "trialsFailed", "trialsKilled",
                                                          "trialsEarlyStopped", "trialMetricsUnavailable"))
    failed = int(counts.get("trialsFailed") or 0) + int(counts.get("trialMetricsUnavailable") or 0)
    active = int(counts.get("trialsPending") or 0) + int(counts.get("trialsRunning") or 0)
    if goal_reached:
        return "Succeeded", "ExperimentGoalReached", "Experiment has succeeded because Objective goal has reached"
    if spec.max_failed_trial_count is not None and failed and failed >= spec.max_failed_trial_count:
        return "Failed", "ExperimentFailed", "Experiment has failed because max failed count has reached"
    if spec.max_trial_count is not None and completed >= spec.max_trial_count:
        return ("Succeeded", "ExperimentMaxTrialsReached",
                "Experiment has succeeded because max trial count has reached")
    if exhausted and active == 0:
        return ("Succeeded", "ExperimentSuggestionEndReached",
                "Experiment has succeeded because suggestion service has reached the end")
    return None


def trials_to_add(spec: ExperimentSpec, counts: Mapping[str, Any]) -> int:
    """How many Trials to create now (Katib's ``ReconcileTrials``: up to ``parallelTrialCount`` active, never past
    ``maxTrialCount`` completed; MetricsUnavailable trials count as neither, as upstream)."""
    active = int(counts.get("trialsPending") or 0) + int(counts.get("trialsRunning") or 0)
    completed = sum(int(counts.get(key) or 0) for key in ("trialsSucceeded", "trialsFailed", "trialsKilled",
                                                          "trialsEarlyStopped"))
    wanted = spec.parallel_trial_count
    if spec.max_trial_count is not None:
        wanted = min(wanted, spec.max_trial_count - completed)
    return max(0, wanted - active)

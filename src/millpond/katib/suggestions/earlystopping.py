"""Katib's median-stop early stopping: the rule its ``medianstop`` service computes, from the same inputs.

Katib's service averages each succeeded trial's first ``start_step`` reported values of the objective
metric (from the trial's observation log); once ``min_trials_required`` trials have such an average it
returns one rule: stop a trial whose objective metric, after ``start_step`` reports, is worse than that
value (``less`` when maximizing, ``greater`` when minimizing). Katib names it the median and computes the
mean of the averages; so does this module, to stop the same trials Katib stops. A succeeded trial
without any log entry is left out (Katib's service would divide by zero).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from millpond.errors import UserError
from millpond.katib.suggestions.records import EarlyStoppingRule, Objective, TrialResult

EARLY_STOPPING: frozenset[str] = frozenset({"medianstop"})
DEFAULT_MIN_TRIALS_REQUIRED = 3
DEFAULT_START_STEP = 4

_CHECKS = {
    "min_trials_required": (lambda v: v > 0, "min_trials_required must be greater than zero (>0)"),
    "start_step": (lambda v: v >= 1, "start_step must be greater or equal than one (>=1)"),
}


def validate_early_stopping(name: str, settings: tuple[tuple[str, str], ...]) -> None:
    """Katib's ``ValidateEarlyStoppingSettings``: a UserError naming ``spec.earlyStopping…``."""
    if name not in EARLY_STOPPING:
        raise UserError(f"spec.earlyStopping.algorithmName: unknown algorithm name {name}")
    for index, (setting, text) in enumerate(settings):
        where = f"spec.earlyStopping.algorithmSettings[{index}]"
        if setting not in _CHECKS:
            raise UserError(f"{where}: unknown setting {setting} for algorithm {name}")
        ok, message = _CHECKS[setting]
        try:
            value = int(text)
        except ValueError as exc:
            raise UserError(f"{where}: failed to validate {setting}({text}): {exc}") from None
        if not ok(value):
            raise UserError(f"{where}: {message}")


def _settings(settings: tuple[tuple[str, str], ...]) -> tuple[int, int]:
    values = dict(settings)
    return (
        int(values.get("min_trials_required", DEFAULT_MIN_TRIALS_REQUIRED)),
        int(values.get("start_step", DEFAULT_START_STEP)),
    )


def early_stopping_rules(
    name: str,
    settings: tuple[tuple[str, str], ...],
    objective: Objective,
    trials: tuple[TrialResult, ...],
    observation_logs: Mapping[str, Sequence[tuple[int, float]]],
) -> tuple[EarlyStoppingRule, ...]:
    """The rules for the trials still running: none until enough trials succeeded.

    ``observation_logs`` maps a trial's name to its objective metric's reports, ``(order, value)``: the
    order is whatever sorts them as reported (a step, a timestamp in ns).
    """
    validate_early_stopping(name, settings)
    min_trials_required, start_step = _settings(settings)
    averages = []
    for trial in trials:
        if trial.state != "Succeeded":
            continue
        reports = sorted(observation_logs.get(trial.name, ()), key=lambda report: report[0])[:start_step]
        if reports:
            averages.append(sum(value for _, value in reports) / len(reports))
    if len(averages) < min_trials_required:
        return ()
    value = sum(averages) / len(averages)
    comparison = "less" if objective.type == "maximize" else "greater"
    return (EarlyStoppingRule(objective.metric_name, str(value), comparison, start_step),)

"""Run a suggestion algorithm against an objective the way Katib's controller would: ask, run, report."""

from __future__ import annotations

from collections.abc import Callable

from millpond.katib.suggestions.api import forget, get_suggestions
from millpond.katib.suggestions.records import (
    Algorithm,
    Objective,
    ParameterSpec,
    SuggestionRequest,
    TrialResult,
)

QUADRATIC = (ParameterSpec("x", "double", "-2", "2"), ParameterSpec("y", "double", "-3", "1"))
MINIMIZE = Objective("minimize", None, "loss")


def quadratic(values: dict[str, str]) -> float:
    """(x - 0.3)^2 + (y + 1)^2: minimum 0 at (0.3, -1)."""
    return (float(values["x"]) - 0.3) ** 2 + (float(values["y"]) + 1) ** 2


def run(
    algorithm: Algorithm,
    objective_fn: Callable[[dict[str, str]], float | None],
    *,
    parameters: tuple[ParameterSpec, ...] = QUADRATIC,
    objective: Objective = MINIMIZE,
    trials: int = 20,
    per_call: int = 1,
    experiment: str = "default/e",
    forget_each_call: bool = False,
    start: tuple[list[TrialResult], tuple[tuple[str, str], ...]] | None = None,
) -> tuple[list[TrialResult], tuple[tuple[str, str], ...]]:
    """Trials until ``trials`` exist; ``objective_fn`` returning None marks the trial Failed."""
    done, state = (list(start[0]), start[1]) if start else ([], ())
    calls = 0
    while len(done) < trials and calls < 10 * trials:
        calls += 1
        if forget_each_call:
            forget(experiment)
        reply = get_suggestions(
            SuggestionRequest(
                experiment, parameters, objective, algorithm, tuple(done), min(per_call, trials - len(done)), state
            )
        )
        state = reply.state
        for suggestion in reply.suggestions:
            values = {a.name: a.value for a in suggestion.assignments}
            value = objective_fn(values)
            done.append(
                TrialResult(
                    f"t{len(done)}",
                    suggestion.assignments,
                    "Failed" if value is None else "Succeeded",
                    value,
                    labels=suggestion.labels,
                )
            )
        if reply.exhausted:
            break
    return done, state


def best(trials: list[TrialResult]) -> TrialResult:
    return min((t for t in trials if t.objective_value is not None), key=lambda t: t.objective_value or 0.0)


def points(trials: list[TrialResult]) -> list[tuple[str, ...]]:
    return [tuple(a.value for a in t.assignments) for t in trials]

"""The records the Katib controller and the suggestion algorithms exchange (Katib's api.proto, typed).

Everything is a frozen dataclass of strings, numbers and tuples: a request carries every trial and the
algorithm's carried ``state`` (Katib's ``Suggestion.status.algorithmSettings``), so a reply depends on
nothing kept in memory and a controller restarted after ``kill -9`` resumes from its store.
"""

from __future__ import annotations

from dataclasses import dataclass

PARAMETER_TYPES = ("double", "int", "discrete", "categorical")
OBJECTIVE_TYPES = ("minimize", "maximize")
# Trial states whose objective value an algorithm learns from (Katib's Trial.convert: Succeeded, EarlyStopped).
OBSERVED_STATES = frozenset({"Succeeded", "EarlyStopped"})
# Trial states that are over: a rung or a generation waits for none but these.
FINISHED_STATES = frozenset({"Succeeded", "Failed", "EarlyStopped", "MetricsUnavailable"})


@dataclass(frozen=True)
class ParameterSpec:
    """Katib's ParameterSpec: ``parameter_type`` is double, int, discrete or categorical."""

    name: str
    parameter_type: str
    min: str | None = None
    max: str | None = None
    step: str | None = None
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class Objective:
    """Katib's ObjectiveSpec: ``type`` is minimize or maximize."""

    type: str
    goal: float | None
    metric_name: str
    additional_metric_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Algorithm:
    """Katib's AlgorithmSpec: its ``algorithmName`` and ``algorithmSettings`` (name, value) in order."""

    name: str
    settings: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Assignment:
    """Katib's ParameterAssignment: a parameter's value, always a string."""

    name: str
    value: str


@dataclass(frozen=True)
class TrialResult:
    """A trial as the algorithm sees it: what it was assigned, how it ended, what it measured."""

    name: str
    assignments: tuple[Assignment, ...]
    state: str
    objective_value: float | None = None
    metrics: tuple[tuple[str, float], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SuggestionRequest:
    """Katib's GetSuggestionsRequest: every trial so far, how many new ones, the carried state."""

    experiment: str
    parameters: tuple[ParameterSpec, ...]
    objective: Objective
    algorithm: Algorithm
    trials: tuple[TrialResult, ...]
    count: int
    state: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Suggestion:
    """One new trial: its assignments, a name when the algorithm picks one, the labels it asks for."""

    assignments: tuple[Assignment, ...]
    trial_name: str | None = None
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SuggestionReply:
    """Katib's GetSuggestionsReply: ``exhausted`` is its SuggestionEndReached (grid used up, hyperband done)."""

    suggestions: tuple[Suggestion, ...]
    state: tuple[tuple[str, str], ...]
    exhausted: bool = False


@dataclass(frozen=True)
class EarlyStoppingRule:
    """Katib's EarlyStoppingRule: stop a trial whose metric ``name`` compares so with ``value`` after ``start_step``."""

    name: str
    value: str
    comparison: str
    start_step: int

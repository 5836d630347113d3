"""hyperband: Katib's own hyperband service — its bracket arithmetic, its state, its quirks.

Katib's service keeps its bookkeeping in the algorithm settings it returns (``eta, s_max, r_l, b_l, r,
n, current_s, current_i, resource_name, evaluating_trials``), which Katib stores in
``Suggestion.status.algorithmSettings`` and hands back on the next call; so does this module, with the
same names and the same string forms. As in Katib:

- ``s_max = int(log(r_l) / log(eta))``; bracket ``s`` runs from ``s_max`` down to 0 with
  ``r = r_l * eta**-s``; a bracket's first rung samples uniformly with the resource set to ``int(r)``;
- ``n`` is the number of trials the call asks for (Katib: "a hack to get current request number"),
  so a rung ``i`` promotes the best ``ceil(ceil(n * eta**-i) / eta)`` trials of the rung before with
  the resource ``int(r * eta**i)``;
- the search ends (``exhausted``) once bracket 0 has run.

Different from Katib: trials are labelled with their bracket and rung (:data:`BRACKET_LABEL`,
:data:`RUNG_LABEL`) and a rung's trials are found by those labels, not as the latest trials by start
time; a call made while the rung before is still running hands out nothing and keeps the state (Katib's
service raises an error and the controller retries); a failed trial is not promoted (Katib's service
refuses to go on). Sampling uses a ``random_state`` setting when given (Katib's uses numpy's global
generator), and a stepped parameter keeps to its step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np

from millpond.errors import UserError
from millpond.katib.suggestions.history import Search
from millpond.katib.suggestions.records import FINISHED_STATES, Assignment, Suggestion, SuggestionReply, TrialResult
from millpond.katib.suggestions.space import Param, assignments_of, snap

BRACKET_LABEL = "suggestion.millpond.io/hyperband-bracket"
RUNG_LABEL = "suggestion.millpond.io/hyperband-rung"
DEFAULT_PARALLEL_TRIAL_COUNT = 3  # Katib's default for spec.parallelTrialCount


@dataclass
class HyperBandParam:
    """Katib's HyperBandParam: the settings and the bookkeeping between calls (-1/-2: not yet set)."""

    eta: float = 3
    s_max: int = -1
    r_l: float = -1
    b_l: float = -1
    r: float = -1
    n: int = -1
    current_s: int = -2
    current_i: int = -1
    resource_name: str = ""
    evaluating_trials: int = 0

    @classmethod
    def convert(cls, settings: Mapping[str, str]) -> HyperBandParam:
        """Katib's ``HyperBandParam.convert``: parse, then fill what is unset."""
        param = cls()
        for name in ("eta", "r_l", "b_l"):
            if name in settings:
                setattr(param, name, float(settings[name]))
        for name in ("n", "r", "current_s", "current_i", "s_max", "evaluating_trials"):
            if name in settings:
                setattr(param, name, int(float(settings[name])))
        param.resource_name = settings.get("resource_name", "")
        if param.current_s == -1:
            return param  # the outer loop has finished
        if param.eta <= 0:
            param.eta = 3
        if param.s_max < 0:
            param.s_max = int(math.log(param.r_l) / math.log(param.eta))
        if param.b_l < 0:
            param.b_l = (param.s_max + 1) * param.r_l
        if param.current_s < 0:
            param.current_s = param.s_max
        if param.current_i < 0:
            param.current_i = 0
        if param.n < 0:
            param.n = _bracket_size(param)
        if param.r < 0:
            param.r = param.r_l * param.eta ** (-param.current_s)
        return param

    def generate(self) -> tuple[tuple[str, str], ...]:
        """Katib's ``HyperBandParam.generate``: every field as a string, in Katib's order."""
        return tuple((f.name, str(getattr(self, f.name))) for f in fields(self))


def _bracket_size(param: HyperBandParam) -> int:
    return int(math.ceil(float(param.s_max + 1) * (float(param.eta**param.current_s) / float(param.current_s + 1))))


def _next_bracket(param: HyperBandParam) -> None:
    """Katib's ``_new_hbParameters``."""
    param.current_s -= 1
    param.current_i = 0
    if param.current_s >= 0:
        param.n = _bracket_size(param)
        param.r = param.r_l * param.eta ** (-param.current_s)


def check(settings: Mapping[str, str], params: tuple[Param, ...], parallel_trial_count: int | None) -> None:
    """Katib's hyperband ``ValidateAlgorithmSettings`` (after the settings' own parsing checks)."""
    if "r_l" not in settings or "resource_name" not in settings:
        raise UserError("spec.algorithm.algorithmSettings: r_l and resource_name must be set.")
    r_l = float(settings["r_l"])
    eta = int(float(settings.get("eta", "3")))
    eta = 3 if eta <= 0 else eta
    s_max = int(math.log(r_l) / math.log(eta))
    max_parallel = int(math.ceil(eta**s_max))
    parallel = DEFAULT_PARALLEL_TRIAL_COUNT if parallel_trial_count is None else parallel_trial_count
    if parallel < max_parallel:
        raise UserError(f"spec.parallelTrialCount: parallelTrialCount must be not less than {max_parallel}.")
    if settings["resource_name"] not in {p.name for p in params}:
        raise UserError("spec.algorithm.algorithmSettings: value of resource_name setting must be in parameters.")


def _rung(trials: tuple[TrialResult, ...], bracket: int, rung: int) -> list[TrialResult]:
    wanted = {BRACKET_LABEL: str(bracket), RUNG_LABEL: str(rung)}
    return [t for t in trials if all(dict(t.labels).get(k) == v for k, v in wanted.items())]


def _sample(search: Search, rng: np.random.Generator) -> dict[str, object]:
    """Katib's ``random_sample`` + ``parse_x_next_vector``: uniform numbers, nearest discrete, one-hot categorical."""
    values: dict[str, object] = {}
    for param in search.params:
        if param.type == "categorical":
            values[param.name] = param.values[int(np.argmax(rng.uniform(0, 1, len(param.values))))]
        elif param.type == "discrete":
            numbers = [float(v) for v in param.values]
            x = rng.uniform(min(numbers), max(numbers))
            values[param.name] = param.values[int(np.argmin(np.abs(np.subtract(numbers, x))))]
        else:
            values[param.name] = snap(param, rng.uniform(param.low, param.high))
    return values


def _with_resource(assignments: tuple[Assignment, ...], resource_name: str, resource: int) -> tuple[Assignment, ...]:
    return tuple(Assignment(a.name, str(resource)) if a.name == resource_name else a for a in assignments)


def suggest(search: Search) -> SuggestionReply:
    merged = {**dict(search.request.algorithm.settings), **dict(search.request.state)}
    merged.pop("suggested", None)
    param = HyperBandParam.convert(merged)
    if param.current_s < 0:
        return SuggestionReply((), search.request.state, exhausted=True)
    if search.count <= 0:
        return SuggestionReply((), search.request.state)
    param.n = search.count
    labels_of = lambda rung: ((BRACKET_LABEL, str(param.current_s)), (RUNG_LABEL, str(rung)))  # noqa: E731
    if param.evaluating_trials == 0:
        rng = np.random.default_rng(search.seed())
        resource = int(param.r)
        suggestions = [
            Suggestion(
                _with_resource(assignments_of(search.params, _sample(search, rng)), param.resource_name, resource),
                labels=labels_of(param.current_i),
            )
            for _ in range(param.n)
        ]
    else:
        previous = _rung(search.request.trials, param.current_s, param.current_i)
        if any(t.state not in FINISHED_STATES for t in previous):
            return SuggestionReply((), search.request.state)  # the rung before is still running: wait
        n_i = math.ceil(param.n * param.eta ** (-param.current_i))
        top = int(math.ceil(n_i / param.eta))
        param.current_i += 1
        if param.current_i > param.current_s:
            _next_bracket(param)
        resource = int(param.r * param.eta**param.current_i)
        scored = [(t.objective_value, t) for t in previous if t.state == "Succeeded" and t.objective_value is not None]
        ranked = [t for _, t in sorted(scored, key=lambda pair: pair[0] if search.minimize else -pair[0])]
        suggestions = [
            Suggestion(_with_resource(t.assignments, param.resource_name, resource), labels=labels_of(param.current_i))
            for t in ranked[:top]
        ]
    param.evaluating_trials = len(suggestions) if param.current_i < param.current_s else 0
    if param.evaluating_trials == 0:
        _next_bracket(param)
    state = param.generate() + search.state(len(suggestions))
    return SuggestionReply(tuple(suggestions), state, exhausted=param.current_s < 0)

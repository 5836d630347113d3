"""multivariate-tpe with optuna's TPESampler, configured as Katib's optuna suggestion service does.

Katib's service: ``TPESampler(multivariate=True, constant_liar=True, n_startup_trials, n_ei_candidates,
seed)`` asked with fixed distributions. Here each call builds an in-memory study from the request:
observations as COMPLETE trials, trials still running as RUNNING (so the constant liar keeps parallel
suggestions apart), and a sampler seeded for this call.
"""

from __future__ import annotations

import warnings
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from millpond.katib.suggestions.history import Search
from millpond.katib.suggestions.records import FINISHED_STATES, Suggestion, SuggestionReply
from millpond.katib.suggestions.space import Param, assigned, assignments_of, snap

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _distribution(param: Param) -> BaseDistribution:
    if not param.numeric:
        return CategoricalDistribution(list(param.values))
    if param.type == "int":
        return IntDistribution(int(param.low), int(param.high), step=int(param.step or 1))
    if param.step is not None:
        high = snap(param, param.high)  # optuna wants max - min a multiple of step
        return FloatDistribution(param.low, high, step=param.step)
    return FloatDistribution(param.low, param.high)


def distributions(params: tuple[Param, ...]) -> dict[str, BaseDistribution]:
    return {p.name: _distribution(p) for p in params}


def _typed(param: Param, value: str) -> Any:
    if not param.numeric:
        return value
    return int(float(value)) if param.type == "int" else float(value)


def _fits(space: dict[str, BaseDistribution], params: dict[str, Any]) -> bool:
    try:
        return all(space[name]._contains(space[name].to_internal_repr(value)) for name, value in params.items())
    except (ValueError, TypeError):
        return False


def study(search: Search, space: dict[str, BaseDistribution]) -> optuna.Study:
    """An in-memory study of the request's trials, with this call's sampler."""
    settings = search.settings
    sampler = optuna.samplers.TPESampler(
        multivariate=True,
        constant_liar=True,
        seed=search.seed(),
        n_startup_trials=int(settings.get("n_startup_trials", 10)),  # type: ignore[call-overload]
        n_ei_candidates=int(settings.get("n_ei_candidates", 24)),  # type: ignore[call-overload]
    )
    result = optuna.create_study(sampler=sampler, direction="minimize")
    frozen = []
    for observation in search.observations:
        params = {p.name: _typed(p, observation.values[p.name]) for p in search.params}
        if _fits(space, params):
            frozen.append(optuna.trial.create_trial(params=params, distributions=space, value=observation.loss))
    for trial in search.request.trials:
        if trial.state in FINISHED_STATES:
            continue
        values = assigned(trial)
        if all(p.name in values for p in search.params):
            params = {p.name: _typed(p, values[p.name]) for p in search.params}
            if _fits(space, params):
                frozen.append(optuna.trial.create_trial(params=params, distributions=space, state=TrialState.RUNNING))
    result.add_trials(frozen)
    return result


def suggest(search: Search, space: dict[str, BaseDistribution]) -> SuggestionReply:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # optuna's ExperimentalWarning for multivariate and constant_liar
        current = study(search, space)
        suggestions = []
        for _ in range(search.count):
            trial = current.ask(fixed_distributions=space)
            suggestions.append(Suggestion(assignments_of(search.params, trial.params)))
    return SuggestionReply(tuple(suggestions), search.state(len(suggestions)))

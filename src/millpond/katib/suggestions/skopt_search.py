"""bayesianoptimization with scikit-optimize's ``Optimizer``, as Katib's skopt suggestion service uses it.

Katib's defaults: ``base_estimator=GP``, ``n_initial_points=10``, ``acq_func=gp_hedge``,
``acq_optimizer=auto``; its space: ``Integer`` for an int, ``Real(..., "log-uniform")`` for a double,
``Categorical`` for a list. A double whose min is not above zero is searched uniform here (Katib's
service fails on it). Each call tells every observation to a fresh optimizer seeded for this call and
asks ``count`` points (skopt's constant liar keeps them apart); a stepped value is snapped to its step.
"""

from __future__ import annotations

import warnings
from typing import Any

import skopt
from skopt.space import Categorical, Integer, Real

from millpond.katib.suggestions.history import Search
from millpond.katib.suggestions.records import Suggestion, SuggestionReply
from millpond.katib.suggestions.space import Param, assignments_of, snap


def _dimension(param: Param) -> Any:
    if not param.numeric:
        return Categorical(list(param.values), name=param.name)
    if param.type == "int":
        return Integer(int(param.low), int(param.high), name=param.name)
    prior = "log-uniform" if param.low > 0 else "uniform"
    return Real(param.low, param.high, prior, name=param.name)


def _point(param: Param, value: str) -> Any:
    if not param.numeric:
        return value
    return int(float(value)) if param.type == "int" else float(value)


def suggest(search: Search) -> SuggestionReply:
    settings = search.settings
    optimizer = skopt.Optimizer(
        [_dimension(p) for p in search.params],
        base_estimator=settings.get("base_estimator", "GP"),
        n_initial_points=int(settings.get("n_initial_points", 10)),  # type: ignore[call-overload]
        acq_func=settings.get("acq_func", "gp_hedge"),
        acq_optimizer=settings.get("acq_optimizer", "auto"),
        random_state=search.seed(),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # skopt: "The objective has been evaluated at this point before."
        if search.observations:
            xs = [[_point(p, o.values[p.name]) for p in search.params] for o in search.observations]
            optimizer.tell(xs, [o.loss for o in search.observations])
        points = optimizer.ask(n_points=search.count) if search.count else []
    suggestions = tuple(
        Suggestion(
            assignments_of(
                search.params,
                {p.name: snap(p, v) if p.numeric else v for p, v in zip(search.params, point, strict=True)},
            )
        )
        for point in points
    )
    return SuggestionReply(suggestions, search.state(len(suggestions)))

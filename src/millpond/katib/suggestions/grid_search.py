"""grid: every combination of the parameters' values once (Katib's optuna GridSampler over Katib's grid).

The grid is Katib's ``convert_to_combinations``: an int's ``range(min, max + 1, step or 1)``, a double's
``min, min + step, …`` up to ``max`` (a double needs ``step``), a list's values. optuna's GridSampler
draws unvisited points in an order shuffled by its seed; here the order is shuffled by ``random_state``
(the product order without it), and a point is visited once any trial, in any state, was assigned it:
a failed point is not tried again, as in Katib, where it stays assigned in the study.
"""

from __future__ import annotations

import itertools

import numpy as np

from millpond.errors import UserError
from millpond.katib.suggestions.history import Search
from millpond.katib.suggestions.records import Assignment, Suggestion, SuggestionReply
from millpond.katib.suggestions.space import Param, assigned, format_value, grid_values, key


def axis(param: Param, where: str) -> tuple[str, ...]:
    """One parameter's grid values as assignment strings."""
    if not param.numeric:
        return param.values
    if param.step is None:
        if param.type == "int":
            return tuple(str(v) for v in range(int(param.low), int(param.high) + 1))
        raise UserError(
            f"{where}.feasibleSpace.step: Param {param.name} step is nil; For discrete search space, "
            "all parameters must include step"
        )
    return tuple(format_value(param, v) for v in grid_values(param))


def combinations(params: tuple[Param, ...]) -> list[tuple[str, ...]]:
    axes = [axis(p, f"spec.parameters[{i}]") for i, p in enumerate(params)]
    return list(itertools.product(*axes))


def size(params: tuple[Param, ...]) -> int:
    total = 1
    for index, param in enumerate(params):
        total *= len(axis(param, f"spec.parameters[{index}]"))
    return total


def suggest(search: Search) -> SuggestionReply:
    points = combinations(search.params)
    random_state = search.settings.get("random_state")
    if random_state is not None:
        order = np.random.default_rng(int(random_state)).permutation(len(points))  # type: ignore[call-overload]
        points = [points[i] for i in order]
    visited = {key(search.params, assigned(trial)) for trial in search.request.trials}
    unvisited = [point for point in points if point not in visited]
    chosen = unvisited[: search.count]
    suggestions = tuple(
        Suggestion(tuple(Assignment(p.name, value) for p, value in zip(search.params, point, strict=True)))
        for point in chosen
    )
    exhausted = len(unvisited) <= len(chosen)
    return SuggestionReply(suggestions, search.state(len(suggestions)), exhausted=exhausted)

"""sobol: a Sobol sequence over the space (scipy's ``qmc.Sobol``, the generator optuna's QMCSampler uses).

Katib runs goptuna's Sobol sampler: an unscrambled sequence, point ``i`` for the ``i``-th trial, no
settings read. Here the point index is the state's ``suggested`` count (so a restart continues the
sequence), the all-zero first point is skipped as goptuna's generator does, and a ``random_state``
setting scrambles the sequence with that seed. Discrete and categorical parameters take the value
whose slice of [0, 1) the coordinate falls in.
"""

from __future__ import annotations

import warnings

from scipy.stats import qmc

from millpond.katib.suggestions.history import Search
from millpond.katib.suggestions.records import Suggestion, SuggestionReply
from millpond.katib.suggestions.space import Param, assignments_of, snap


def _value(param: Param, u: float) -> object:
    if not param.numeric:
        return param.values[min(int(u * len(param.values)), len(param.values) - 1)]
    return snap(param, param.low + u * (param.high - param.low))


def suggest(search: Search) -> SuggestionReply:
    random_state = search.settings.get("random_state")
    scrambled = random_state is not None
    engine = qmc.Sobol(len(search.params), scramble=scrambled, seed=random_state if scrambled else None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "balance properties" of sample sizes that are not powers of two
        skip = search.suggested + (0 if scrambled else 1)
        if skip:
            engine.fast_forward(skip)
        points = engine.random(search.count) if search.count else []
    suggestions = tuple(
        Suggestion(
            assignments_of(search.params, {p.name: _value(p, u) for p, u in zip(search.params, point, strict=True)})
        )
        for point in points
    )
    return SuggestionReply(suggestions, search.state(len(suggestions)))

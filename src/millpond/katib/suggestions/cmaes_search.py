"""cmaes with the ``cmaes`` library (the CMA-ES optuna's CmaEsSampler runs on; Katib's goptuna ports it).

Katib asks goptuna's CMA-ES sampler with no startup trials: the first generation is drawn around the
centre of the space. Here each suggestion is labelled with its generation (:data:`GENERATION_LABEL`);
a call replays the search from the request — every generation with ``population_size`` observed
trials is told to a fresh ``CMA`` in order — then draws from the current generation with this call's
seed. A generation whose trials failed simply draws more (optuna's CmaEsSampler does the same), so a
failed trial is never drawn again. Numbers are searched in [0, 1] per parameter (``sigma`` is in those
units, default 1/6 as optuna's); discrete and categorical parameters are drawn uniformly, as goptuna's
independent sampler does. ``restart_strategy: ipop`` restarts with twice the population when the
search has converged.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
from cmaes import CMA

from millpond.katib.suggestions.history import Search
from millpond.katib.suggestions.records import Suggestion, SuggestionReply
from millpond.katib.suggestions.space import Param, assignments_of, snap

GENERATION_LABEL = "suggestion.millpond.io/cmaes-generation"


def _normalize(param: Param, value: float) -> float:
    return 0.0 if param.high == param.low else (value - param.low) / (param.high - param.low)


def _denormalize(param: Param, x: float) -> float:
    return snap(param, param.low + float(x) * (param.high - param.low))


def _generation_of(labels: tuple[tuple[str, str], ...]) -> int | None:
    text = dict(labels).get(GENERATION_LABEL)
    return int(text) if text is not None and text.isdigit() else None


def _replay(search: Search, numeric: list[Param]) -> tuple[CMA, int]:
    """The CMA after every complete generation, and the number of the generation to draw from."""
    dim = len(numeric)
    sigma = float(search.settings.get("sigma", 1 / 6))  # type: ignore[arg-type]
    population = 4 + math.floor(3 * math.log(dim))
    bounds = np.array([[0.0, 1.0]] * dim)
    cma = CMA(mean=np.full(dim, 0.5), sigma=sigma, bounds=bounds, population_size=population, seed=0)
    by_name = {o.name: o for o in search.observations}
    members: dict[int, list[tuple[np.ndarray, float]]] = {}
    for trial in search.request.trials:
        generation = _generation_of(trial.labels)
        observation = by_name.get(trial.name)
        if generation is None or observation is None:
            continue
        x = np.array([_normalize(p, float(observation.values[p.name])) for p in numeric])
        members.setdefault(generation, []).append((np.clip(x, 0.0, 1.0), observation.loss))
    generation = 0
    while len(members.get(generation, ())) >= cma.population_size:
        told = members[generation][: cma.population_size]
        cma.tell(told)
        generation += 1
        if search.settings.get("restart_strategy") == "ipop" and cma.should_stop():
            # A converged search restarts from a point drawn from what it learnt, with twice the population.
            rng = np.random.default_rng(zlib.crc32(repr(told).encode()))
            cma = CMA(
                mean=rng.uniform(0, 1, dim), sigma=sigma, bounds=bounds, population_size=cma.population_size * 2, seed=0
            )
    return cma, generation


def suggest(search: Search) -> SuggestionReply:
    numeric = [p for p in search.params if p.numeric]
    cma, generation = _replay(search, numeric)
    cma.reseed_rng(search.seed())
    rng = np.random.default_rng(search.seed(1))
    suggestions = []
    for _ in range(search.count):
        x = cma.ask()
        values: dict[str, object] = {p.name: _denormalize(p, v) for p, v in zip(numeric, x, strict=True)}
        for param in search.params:
            if not param.numeric:
                values[param.name] = param.values[int(rng.integers(len(param.values)))]
        labels = ((GENERATION_LABEL, str(generation)),)
        suggestions.append(Suggestion(assignments_of(search.params, values), labels=labels))
    return SuggestionReply(tuple(suggestions), search.state(len(suggestions)))

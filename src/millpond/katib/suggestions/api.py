"""Katib's suggestion services as one library call: validate an Experiment's algorithm, get suggestions.

Each algorithm runs where Katib runs it (katib-config's suggestion images), on the same library:
random and tpe on hyperopt, multivariate-tpe on optuna, grid on Katib's grid in optuna's order, cmaes on
cmaes (goptuna's CMA-ES in Katib), sobol on a Sobol sequence (goptuna's in Katib), bayesianoptimization
on scikit-optimize, hyperband on Katib's own service. The libraries are imported when an experiment
first uses them, so ``import millpond`` stays light; without them the experiment is refused with the
extra to install.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from millpond.errors import UserError
from millpond.katib.suggestions.history import Search, observations, suggested_so_far
from millpond.katib.suggestions.records import (
    OBJECTIVE_TYPES,
    Algorithm,
    Objective,
    ParameterSpec,
    SuggestionReply,
    SuggestionRequest,
)
from millpond.katib.suggestions.settings import SETTINGS, check_settings
from millpond.katib.suggestions.space import Param, check_params

INSTALL_HINT = "pip install 'millpond[katib]'"


@dataclass(frozen=True)
class _Runner:
    """Where an algorithm's code lives and the libraries (import names) it needs."""

    module: str
    libraries: tuple[str, ...]


_RUNNERS = {
    "random": _Runner("hyperopt_search", ("hyperopt", "numpy")),
    "tpe": _Runner("hyperopt_search", ("hyperopt", "numpy")),
    "multivariate-tpe": _Runner("optuna_search", ("optuna",)),
    "grid": _Runner("grid_search", ("numpy",)),
    "cmaes": _Runner("cmaes_search", ("cmaes", "numpy")),
    "sobol": _Runner("sobol_search", ("scipy",)),
    "bayesianoptimization": _Runner("skopt_search", ("skopt",)),
    "hyperband": _Runner("hyperband", ("numpy",)),
}
ALGORITHMS: frozenset[str] = frozenset(_RUNNERS)
# Katib's other algorithms: neural architecture search and population-based training, refused in one line.
_NOT_SERVED = {
    "enas": "a neural architecture search algorithm",
    "darts": "a neural architecture search algorithm",
    "pbt": "population based training",
}
assert set(SETTINGS) == ALGORITHMS

# Per experiment: the library's compiled search space (hyperopt's Domain, optuna's distributions),
# rebuilt whenever the parameters change. Only a cache: every reply is computed from the request.
_SPACES: dict[str, tuple[tuple[Param, ...], str, Any]] = {}
_LOCK = threading.Lock()


def _algorithm_name(algorithm: Algorithm) -> str:
    name = algorithm.name
    if name in _NOT_SERVED:
        raise UserError(f"spec.algorithm.algorithmName: {name} is {_NOT_SERVED[name]}, which millpond does not run")
    if name not in ALGORITHMS:
        raise UserError(
            f"spec.algorithm.algorithmName: unknown algorithm {name!r} (one of {', '.join(sorted(ALGORITHMS))})"
        )
    return name


def _missing(libraries: Sequence[str]) -> list[str]:
    return [name for name in libraries if importlib.util.find_spec(name) is None]


def _load(name: str) -> ModuleType:
    runner = _RUNNERS[name]
    missing = _missing(runner.libraries)
    if missing:
        raise UserError(f"algorithm {name} needs {', '.join(missing)}: {INSTALL_HINT}")
    return importlib.import_module(f"millpond.katib.suggestions.{runner.module}")


def validate(
    parameters: Sequence[ParameterSpec],
    objective: Objective,
    algorithm: Algorithm,
    *,
    max_trial_count: int | None,
    parallel_trial_count: int | None,
) -> None:
    """Katib's checks of an Experiment's objective, parameters and algorithm: a UserError naming the field."""
    name = _algorithm_name(algorithm)
    if objective.type not in OBJECTIVE_TYPES:
        raise UserError(f"spec.objective.type: {objective.type!r} is not one of {', '.join(OBJECTIVE_TYPES)}")
    if not objective.metric_name:
        raise UserError("spec.objective.objectiveMetricName: required")
    params = check_params(parameters)
    check_settings(algorithm)
    missing = _missing(_RUNNERS[name].libraries)
    if missing:
        raise UserError(f"spec.algorithm.algorithmName: {name} needs {', '.join(missing)}: {INSTALL_HINT}")
    if name == "cmaes" and sum(p.numeric for p in params) < 2:
        raise UserError("spec.parameters: cmaes only supports two or more dimensional continuous search space.")
    if name == "grid":
        size = _load("grid").size(params)
        if max_trial_count is not None and max_trial_count > size:
            raise UserError(
                f"spec.maxTrialCount: Max Trial Count: {max_trial_count} > all possible search combinations: {size}"
            )
    if name == "hyperband":
        _load("hyperband").check(dict(algorithm.settings), params, parallel_trial_count)


def _space(request: SuggestionRequest, params: tuple[Param, ...], module: ModuleType) -> Any:
    """The library's compiled space for this experiment (cached; rebuilt if the parameters changed)."""
    build = {"hyperopt_search": "domain", "optuna_search": "distributions"}.get(module.__name__.rsplit(".", 1)[-1])
    if build is None:
        return None
    with _LOCK:
        cached = _SPACES.get(request.experiment)
        if cached is not None and cached[0] == params and cached[1] == build:
            return cached[2]
    space = getattr(module, build)(params)
    with _LOCK:
        _SPACES[request.experiment] = (params, build, space)
    return space


def get_suggestions(request: SuggestionRequest) -> SuggestionReply:
    """``request.count`` new assignments (fewer when the search is used up or waits), and the state to carry."""
    name = _algorithm_name(request.algorithm)
    if request.count < 0:
        raise UserError(f"count: {request.count} is negative")
    params = check_params(request.parameters)
    settings = check_settings(request.algorithm)
    module = _load(name)
    minimize = request.objective.type == "minimize"
    search = Search(
        request=request,
        params=params,
        settings=settings,
        observations=observations(params, request.trials, minimize),
        suggested=suggested_so_far(request),
        minimize=minimize,
    )
    space = _space(request, params, module)
    reply: SuggestionReply = module.suggest(search, space) if space is not None else module.suggest(search)
    return reply


def forget(experiment: str) -> None:
    """Drop what is cached for a deleted experiment (nothing a reply depends on)."""
    with _LOCK:
        _SPACES.pop(experiment, None)

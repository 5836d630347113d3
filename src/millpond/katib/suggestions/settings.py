"""Each algorithm's ``algorithmSettings``: names, parsing and the checks of Katib's ValidateAlgorithmSettings.

The names, ranges and messages are those of Katib's suggestion services (hyperopt for random and tpe,
optuna for grid and multivariate-tpe, goptuna for cmaes and sobol, skopt for bayesianoptimization,
its own hyperband service), so an Experiment Katib accepts is accepted here and one it refuses is
refused with the same words. Where a name differs between Katib's services for one algorithm (tpe's
``n_EI_candidates`` in hyperopt, ``n_ei_candidates`` in optuna and goptuna) both are accepted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from millpond.errors import UserError
from millpond.katib.suggestions.records import Algorithm


@dataclass(frozen=True)
class Setting:
    """One setting: how its string parses, and the check Katib makes with the message it gives."""

    parse: Callable[[str], object]
    ok: Callable[[Any], bool] = lambda value: True
    message: str = ""


def _float(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{text!r} is not a finite number")
    return value


def _choice(*allowed: str, message: str) -> Setting:
    return Setting(str, lambda value: value in allowed, message)


_RANDOM_STATE = Setting(int, lambda v: v >= 0, "random_state should be great or equal than zero")


def _nonneg(name: str) -> Setting:
    return Setting(int, lambda v: v >= 0, f"{name} should be greate or equal than zero")


def _positive(name: str, parse: Callable[[str], object] = int) -> Setting:
    return Setting(parse, lambda v: v > 0, f"{name} should be great than zero")


_CMAES_RESTARTS = ("ipop", "none", "None")
_HYPERBAND_STATE = ("s_max", "b_l", "r", "n", "current_s", "current_i", "evaluating_trials")

SETTINGS: Mapping[str, Mapping[str, Setting]] = {
    "random": {"random_state": _RANDOM_STATE},
    "tpe": {
        "gamma": Setting(_float, lambda v: 0 < v < 1, "gamma should be in the range of (0, 1)"),
        "prior_weight": _positive("prior_weight", _float),
        "n_EI_candidates": _positive("n_EI_candidates"),
        "n_ei_candidates": _positive("n_ei_candidates"),
        "n_startup_trials": _nonneg("n_startup_trials"),
        "random_state": _RANDOM_STATE,
    },
    "multivariate-tpe": {
        "n_startup_trials": _nonneg("n_startup_trials"),
        "n_ei_candidates": _positive("n_ei_candidates"),
        "random_state": _RANDOM_STATE,
    },
    "grid": {"random_state": _RANDOM_STATE},
    "cmaes": {
        "restart_strategy": Setting(
            str, lambda v: v in _CMAES_RESTARTS, "restart_strategy {value} is not supported in CMAES optimization"
        ),
        "sigma": Setting(_float, lambda v: v > 0, "sigma should be greate than zero"),
        "random_state": _RANDOM_STATE,
    },
    "sobol": {"random_state": _RANDOM_STATE},
    "bayesianoptimization": {
        "base_estimator": _choice(
            "GP", "RF", "ET", "GBRT", message="base_estimator {value} is not supported in Bayesian optimization"
        ),
        "n_initial_points": Setting(
            int,
            lambda v: v >= 0,
            "n_initial_points should be great or equal than zero",
        ),
        "acq_func": _choice(
            "gp_hedge",
            "LCB",
            "EI",
            "PI",
            "EIps",
            "PIps",
            message="acq_func {value} is not supported in Bayesian optimization",
        ),
        "acq_optimizer": _choice(
            "auto", "sampling", "lbfgs", message="acq_optimizer {value} is not supported in Bayesian optimization"
        ),
        "random_state": _RANDOM_STATE,
    },
    "hyperband": {
        "r_l": Setting(_float, lambda v: v > 0, "r_l must be a positive float number."),
        "eta": Setting(_float, lambda v: v > 1, "eta must be greater than one."),
        "resource_name": Setting(str),
        "random_state": _RANDOM_STATE,
        # What Katib's hyperband writes back into the settings between calls (its bracket bookkeeping).
        **{name: Setting(lambda text: int(float(text))) for name in _HYPERBAND_STATE},
    },
}


def check_settings(algorithm: Algorithm) -> dict[str, object]:
    """The settings parsed, or a UserError naming ``spec.algorithm.algorithmSettings[i]`` and Katib's message."""
    schema = SETTINGS[algorithm.name]
    parsed: dict[str, object] = {}
    for index, (name, text) in enumerate(algorithm.settings):
        where = f"spec.algorithm.algorithmSettings[{index}]"
        setting = schema.get(name)
        if setting is None:
            raise UserError(f"{where}: unknown setting {name} for algorithm {algorithm.name}")
        try:
            value = setting.parse(text)
        except (TypeError, ValueError) as exc:
            raise UserError(f"{where}: failed to validate {name}({text}): {exc}") from None
        if not setting.ok(value):
            raise UserError(f"{where}: " + setting.message.format(value=text))
        parsed[name] = value
    return parsed


def parse_settings(algorithm: Algorithm) -> dict[str, object]:
    """The settings of an algorithm already validated (the controller validated the Experiment)."""
    return check_settings(algorithm)

"""``feasibleSpace.distribution`` as Katib's services read it: hyperopt's random and tpe map logUniform, normal and
logNormal; optuna's multivariate-tpe maps logUniform and refuses the normal ones; grid, cmaes, sobol, hyperband and
bayesianoptimization search as they always do. Bad distributions are refused naming the field, at the library and
through ``millpond apply``; an Experiment with a logUniform parameter runs to Succeeded.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from millpond.errors import UserError
from millpond.katib.suggestions.api import get_suggestions, validate
from millpond.katib.suggestions.records import Algorithm, Objective, ParameterSpec, SuggestionRequest
from millpond.katib.webhook import default_spec
from millpond.store.resources import ResourceStore
from tests.katib.test_experiments import apply, condition, experiment, shown, until_done
from tests.katib_suggestions.search_loop import run

MIN = Objective("minimize", None, "loss")
LOG_LR = ParameterSpec("lr", "double", "1e-5", "1e-1", distribution="logUniform")


Settings = tuple[tuple[str, str], ...]


def drawn(name: str, parameter: ParameterSpec, count: int = 200, settings: Settings = ()) -> list[float]:
    """``count`` suggestions of one request for a single parameter (no history: the prior itself)."""
    request = SuggestionRequest(
        f"default/{name}-{parameter.distribution}", (parameter,), MIN,
        Algorithm(name, (("random_state", "11"), *settings)), (), count,
    )
    values = [float(s.assignments[0].value) for s in get_suggestions(request).suggestions]
    assert len(values) == count
    return values


def searched(name: str, parameter: ParameterSpec, trials: int, settings: Settings) -> list[float]:
    """The values a model-based search tried on a flat objective (so it keeps drawing from its prior's shape)."""
    algorithm = Algorithm(name, (("random_state", "5"), *settings))
    done, _ = run(algorithm, lambda values: 1.0, parameters=(parameter,), trials=trials, per_call=2,
                  experiment=f"default/flat-{name}")
    return [float(trial.assignments[0].value) for trial in done]


def assert_log_spread(values: list[float], low: float, high: float) -> None:
    """Spread evenly in log10 between ``low`` and ``high``: half below the log-midpoint, not bunched at the top."""
    assert all(low <= value <= high for value in values), (min(values), max(values))
    middle = math.sqrt(low * high)
    below = sum(value < middle for value in values) / len(values)
    assert 0.3 < below < 0.7, below  # uniform over [1e-5, 1e-1] would put 1% below 1e-3
    assert -4 < math.log10(statistics.median(values)) < -2, statistics.median(values)


def test_random_log_uniform_median_is_near_the_log_midpoint():
    values = drawn("random", LOG_LR)
    assert_log_spread(values, 1e-5, 1e-1)
    uniform = drawn("random", ParameterSpec("lr", "double", "1e-5", "1e-1"))
    assert statistics.median(uniform) > 0.02  # the same space without the distribution: near 0.05


@pytest.mark.parametrize(("name", "settings"), [
    ("tpe", (("n_startup_trials", "5"),)),
    ("multivariate-tpe", (("n_startup_trials", "5"),)),
])
def test_model_based_searches_keep_to_log_space(name, settings):
    assert_log_spread(searched(name, LOG_LR, 40, settings), 1e-5, 1e-1)


def test_bayesianoptimization_searches_a_double_log_uniform_whatever_its_distribution():
    """Katib's skopt service gives every double ``Real(min, max, "log-uniform")``: the distribution is not read."""
    settings = (("n_initial_points", "40"),)
    for distribution in ("logUniform", "uniform", "normal"):
        space = ParameterSpec("lr", "double", "1e-5", "1e-1", distribution=distribution)
        assert_log_spread(drawn("bayesianoptimization", space, 40, settings), 1e-5, 1e-1)


@pytest.mark.parametrize("name", ["sobol", "cmaes"])
def test_goptuna_algorithms_search_uniformly_whatever_the_distribution(name):
    """Katib's goptuna service (cmaes, sobol) builds uniform distributions only: logUniform is accepted and not read."""
    params = (LOG_LR, ParameterSpec("m", "double", "0", "1", distribution="normal"))
    algorithm = Algorithm(name, (("random_state", "3"),))
    request = SuggestionRequest(f"default/ignored-{name}", params, MIN, algorithm, (), 40)
    values = [float(s.assignments[0].value) for s in get_suggestions(request).suggestions]
    assert all(1e-5 <= value <= 1e-1 for value in values)
    assert statistics.median(values) > 0.02  # not pulled towards 1e-3


@pytest.mark.parametrize("name", ["random", "tpe"])
def test_hyperopt_normal_is_centred_with_a_sixth_of_the_width_as_sigma(name):
    values = drawn(name, ParameterSpec("x", "double", "0", "60", distribution="normal"))
    assert all(0 <= value <= 60 for value in values)
    assert statistics.mean(values) == pytest.approx(30, abs=2.5)
    assert statistics.pstdev(values) == pytest.approx(10, rel=0.2)


def test_hyperopt_log_normal_is_normal_in_log_space():
    values = drawn("random", ParameterSpec("x", "double", "1", "100", distribution="logNormal"))
    logs = [math.log(value) for value in values]
    assert all(1 <= value <= 100 for value in values)
    assert statistics.median(values) == pytest.approx(10, rel=0.3)  # exp of the middle of [log 1, log 100]
    assert statistics.pstdev(logs) == pytest.approx(math.log(100) / 6, rel=0.2)


def test_stepped_and_int_parameters_keep_their_grid_under_a_distribution():
    """The ``q`` forms: an int (step 1 by default, as Katib's) and a stepped double stay on their steps."""
    ints = drawn("random", ParameterSpec("n", "int", "1", "1000", distribution="logUniform"))
    assert all(value == int(value) and 1 <= value <= 1000 for value in ints)
    assert statistics.median(ints) < 150  # log-uniform over [1, 1000]: near 32, not 500
    stepped = drawn("random", ParameterSpec("x", "double", "0", "10", "0.5", distribution="normal"))
    assert all((value * 2) == int(value * 2) and 0 <= value <= 10 for value in stepped)
    optuna_ints = drawn("multivariate-tpe", ParameterSpec("n", "int", "1", "1000", distribution="logUniform"), 60)
    assert all(value == int(value) for value in optuna_ints) and statistics.median(optuna_ints) < 150


def test_unknown_is_searched_uniform_and_a_list_ignores_its_distribution():
    """Katib's webhook accepts ``unknown`` (its services read it as unspecified: uniform); a list's is not read."""
    unknown = drawn("random", ParameterSpec("lr", "double", "1e-5", "1e-1", distribution="unknown"))
    assert statistics.median(unknown) > 0.02
    listed = ParameterSpec("opt", "categorical", values=("sgd", "adam"), distribution="logNormal")
    request = SuggestionRequest("default/listed", (listed,), MIN, Algorithm("tpe", (("random_state", "1"),)), (), 20)
    assert {s.assignments[0].value for s in get_suggestions(request).suggestions} == {"sgd", "adam"}


REFUSED = [
    ("random", ParameterSpec("x", "double", "0", "1", distribution="gaussian"),
     "spec.parameters[1].feasibleSpace.distribution: distribution 'gaussian' is not supported"),
    ("grid", ParameterSpec("x", "double", "0", "1", "0.5", distribution="LogUniform"),
     "spec.parameters[1].feasibleSpace.distribution: distribution 'LogUniform' is not supported"),
    ("random", ParameterSpec("x", "double", "0", "1", distribution="logUniform"),
     "spec.parameters[1].feasibleSpace.min: logUniform needs min > 0"),
    ("tpe", ParameterSpec("x", "int", "-3", "5", distribution="logNormal"),
     "spec.parameters[1].feasibleSpace.min: logNormal needs min > 0"),
    ("multivariate-tpe", ParameterSpec("x", "double", "0", "1", distribution="normal"),
     "spec.parameters[1].feasibleSpace.distribution: normal is not supported by multivariate-tpe"),
    ("multivariate-tpe", ParameterSpec("x", "int", "1", "9", distribution="logNormal"),
     "spec.parameters[1].feasibleSpace.distribution: logNormal is not supported by multivariate-tpe"),
    ("multivariate-tpe", ParameterSpec("x", "int", "-5", "0", distribution="logUniform"),
     "spec.parameters[1].feasibleSpace.max: logUniform needs max > 0"),
]


@pytest.mark.parametrize(("name", "second", "message"), REFUSED, ids=[f"{c[0]}-{c[1].distribution}" for c in REFUSED])
def test_bad_distributions_are_refused_naming_the_field(name, second, message):
    parameters = (ParameterSpec("lr", "double", "0.01", "0.1"), second)
    with pytest.raises(UserError) as refused:
        validate(parameters, MIN, Algorithm(name, ()), max_trial_count=None, parallel_trial_count=None)
    assert str(refused.value).startswith(message), refused.value
    with pytest.raises(UserError):
        get_suggestions(SuggestionRequest("default/refused", parameters, MIN, Algorithm(name, ()), (), 1))


def test_optuna_raises_a_log_uniform_min_of_zero_as_katib_does():
    """Katib's optuna service searches ``max(1e-10, min)`` (a double) and ``max(1, min)`` (an int) in log space."""
    params = (ParameterSpec("x", "double", "0", "1", distribution="logUniform"),
              ParameterSpec("n", "int", "0", "100", distribution="logUniform"))
    validate(params, MIN, Algorithm("multivariate-tpe", ()), max_trial_count=None, parallel_trial_count=None)
    algorithm = Algorithm("multivariate-tpe", (("random_state", "2"),))
    request = SuggestionRequest("default/zero", params, MIN, algorithm, (), 30)
    for suggestion in get_suggestions(request).suggestions:
        x, n = (float(a.value) for a in suggestion.assignments)
        assert 0 < x <= 1 and 1 <= n <= 100


def test_the_webhook_defaults_each_parameter_to_uniform_and_keeps_a_given_one():
    spec = {"parameters": [{"name": "a", "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1"}},
                           {"name": "b", "parameterType": "double",
                            "feasibleSpace": {"min": "1", "max": "2", "distribution": "logNormal"}}]}
    defaulted = default_spec(spec, "default", lambda namespace, name: None)
    assert [p["feasibleSpace"]["distribution"] for p in defaulted["parameters"]] == ["uniform", "logNormal"]
    assert "distribution" not in spec["parameters"][0]["feasibleSpace"]  # the caller's spec is not changed


def log_experiment(name: str, tmp_path: Path, distribution: str, low: str = "0.001") -> dict[str, Any]:
    doc = experiment(name, runs=tmp_path / "runs", max_trials=4, parallel=2)
    doc["spec"]["parameters"][0]["feasibleSpace"] = {"min": low, "max": "10", "distribution": distribution}
    return doc


def test_an_experiment_with_a_log_uniform_parameter_runs(cli: Any, tmp_path: Path) -> None:
    assert apply(cli, tmp_path, log_experiment("loglr", tmp_path, "logUniform")).code == 0
    done = until_done(cli, "loglr")
    assert condition(done, "Succeeded"), done["status"]
    assert done["spec"]["parameters"][0]["feasibleSpace"]["distribution"] == "logUniform"
    assert done["status"]["trialsSucceeded"] == 4
    suggestion = shown(cli, "suggestion", "loglr")
    xs = [float(a["value"]) for one in suggestion["status"]["suggestions"] for a in one["parameterAssignments"]
          if a["name"] == "x"]
    assert len(xs) == 4 and all(0.001 <= x <= 10 for x in xs)


@pytest.mark.parametrize(("distribution", "low", "field"), [
    ("gaussian", "0.001", "spec.parameters[0].feasibleSpace.distribution"),
    ("logUniform", "0", "spec.parameters[0].feasibleSpace.min"),
])
def test_apply_refuses_a_bad_distribution_naming_the_field(cli: Any, tmp_path: Path, distribution: str, low: str,
                                                          field: str) -> None:
    result = apply(cli, tmp_path, log_experiment("badlog", tmp_path, distribution, low))
    assert result.code == 2
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and field in lines[0], result.err
    assert ResourceStore().list("Experiment", None) == []

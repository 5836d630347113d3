"""validate() refuses what Katib's ValidateAlgorithmSettings and webhook refuse, naming the field."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from millpond.errors import UserError
from millpond.katib.suggestions.api import get_suggestions, validate
from millpond.katib.suggestions.earlystopping import early_stopping_rules, validate_early_stopping
from millpond.katib.suggestions.records import (
    Algorithm,
    Objective,
    ParameterSpec,
    SuggestionRequest,
    TrialResult,
)

XY = (ParameterSpec("x", "double", "-2", "2"), ParameterSpec("y", "double", "-3", "1"))
MIN = Objective("minimize", None, "loss")
SRC = Path(__file__).resolve().parents[2] / "src"

ALGORITHM_CASES = [
    ("foo", (), XY, "spec.algorithm.algorithmName: unknown algorithm 'foo'"),
    ("enas", (), XY, "spec.algorithm.algorithmName: enas is a neural architecture search algorithm"),
    ("darts", (), XY, "spec.algorithm.algorithmName: darts is a neural architecture search algorithm"),
    ("pbt", (), XY, "spec.algorithm.algorithmName: pbt is population based training"),
    ("random", (("seed", "1"),), XY, "spec.algorithm.algorithmSettings[0]: unknown setting seed for algorithm random"),
    ("random", (("random_state", "-1"),), XY, "algorithmSettings[0]: random_state should be great or equal than zero"),
    (
        "tpe",
        (("random_state", "1"), ("gamma", "1.5")),
        XY,
        "algorithmSettings[1]: gamma should be in the range of (0, 1)",
    ),
    ("tpe", (("gamma", "abc"),), XY, "algorithmSettings[0]: failed to validate gamma(abc)"),
    ("tpe", (("prior_weight", "0"),), XY, "prior_weight should be great than zero"),
    ("tpe", (("n_EI_candidates", "0"),), XY, "n_EI_candidates should be great than zero"),
    ("multivariate-tpe", (("gamma", "0.2"),), XY, "unknown setting gamma for algorithm multivariate-tpe"),
    ("multivariate-tpe", (("n_startup_trials", "-3"),), XY, "n_startup_trials should be greate or equal than zero"),
    ("cmaes", (("restart_strategy", "bipop"),), XY, "restart_strategy bipop is not supported in CMAES optimization"),
    ("cmaes", (("sigma", "0"),), XY, "algorithmSettings[0]: sigma should be greate than zero"),
    (
        "cmaes",
        (),
        (XY[0], ParameterSpec("c", "categorical", values=("a", "b"))),
        "spec.parameters: cmaes only supports two or more dimensional continuous search space.",
    ),
    ("sobol", (("sigma", "1"),), XY, "unknown setting sigma for algorithm sobol"),
    ("bayesianoptimization", (("base_estimator", "SVM"),), XY, "base_estimator SVM is not supported in Bayesian"),
    ("bayesianoptimization", (("acq_func", "UCB"),), XY, "acq_func UCB is not supported in Bayesian optimization"),
    ("bayesianoptimization", (("acq_optimizer", "adam"),), XY, "acq_optimizer adam is not supported"),
    ("bayesianoptimization", (("n_initial_points", "-1"),), XY, "n_initial_points should be great or equal than zero"),
    ("grid", (), XY, "spec.parameters[0].feasibleSpace.step: Param x step is nil"),
    (
        "grid",
        (),
        (ParameterSpec("n", "int", "1", "3"), ParameterSpec("c", "categorical", values=("a", "b"))),
        "spec.maxTrialCount: Max Trial Count: 12 > all possible search combinations: 6",
    ),
    ("hyperband", (("r_l", "9"),), XY, "r_l and resource_name must be set."),
    (
        "hyperband",
        (("r_l", "-9"), ("resource_name", "x")),
        XY,
        "algorithmSettings[0]: r_l must be a positive float number.",
    ),
    (
        "hyperband",
        (("r_l", "9"), ("resource_name", "epochs")),
        XY,
        "value of resource_name setting must be in parameters.",
    ),
    (
        "hyperband",
        (("r_l", "27"), ("resource_name", "x")),
        XY,
        "spec.parallelTrialCount: parallelTrialCount must be not less than 27.",
    ),
    ("hyperband", (("r_l", "9"), ("eta", "1"), ("resource_name", "x")), XY, "eta must be greater than one."),
]


@pytest.mark.parametrize(
    ("name", "settings", "parameters", "message"),
    ALGORITHM_CASES,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(ALGORITHM_CASES)],
)
def test_bad_algorithm_settings(name, settings, parameters, message):
    with pytest.raises(UserError, match=None) as caught:
        validate(parameters, MIN, Algorithm(name, settings), max_trial_count=12, parallel_trial_count=9)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


PARAMETER_CASES = [
    (ParameterSpec("x", "double", "5", "1"), "spec.parameters[1].feasibleSpace: min 5 > max 1"),
    (ParameterSpec("x", "float", "0", "1"), "spec.parameters[1].parameterType: 'float' is not one of"),
    (ParameterSpec("x", "int", "1.5", "3"), "spec.parameters[1].feasibleSpace.min: '1.5' is not an integer"),
    (ParameterSpec("x", "double", "0", "abc"), "spec.parameters[1].feasibleSpace.max: 'abc' is not a number"),
    (ParameterSpec("x", "double", None, "1"), "spec.parameters[1].feasibleSpace.min: required"),
    (ParameterSpec("x", "double", "0", "1", "0"), "spec.parameters[1].feasibleSpace.step: 0 is not greater than zero"),
    (ParameterSpec("x", "double", "0", "1", "2"), "spec.parameters[1].feasibleSpace.step: 2 is larger than max - min"),
    (ParameterSpec("x", "categorical"), "spec.parameters[1].feasibleSpace.list: required"),
    (
        ParameterSpec("x", "discrete", values=("1", "two")),
        "spec.parameters[1].feasibleSpace.list[1]: 'two' is not a number",
    ),
    (ParameterSpec("x", "categorical", values=("a", "a")), "spec.parameters[1].feasibleSpace.list: values repeat"),
    (ParameterSpec("lr", "double", "0", "1"), "spec.parameters[1].name: duplicated parameter name 'lr'"),
    (ParameterSpec("", "double", "0", "1"), "spec.parameters[1].name: required"),
]


@pytest.mark.parametrize(("second", "message"), PARAMETER_CASES, ids=[str(i) for i in range(len(PARAMETER_CASES))])
def test_bad_parameters(second, message):
    parameters = (ParameterSpec("lr", "double", "0.01", "0.1"), second)
    with pytest.raises(UserError) as caught:
        validate(parameters, MIN, Algorithm("random"), max_trial_count=None, parallel_trial_count=None)
    assert message in str(caught.value)


def test_bad_objective_and_request():
    with pytest.raises(UserError, match=r"spec.objective.type: 'lowest'"):
        validate(
            XY, Objective("lowest", None, "loss"), Algorithm("random"), max_trial_count=None, parallel_trial_count=None
        )
    with pytest.raises(UserError, match="spec.objective.objectiveMetricName: required"):
        validate(
            XY, Objective("minimize", None, ""), Algorithm("random"), max_trial_count=None, parallel_trial_count=None
        )
    with pytest.raises(UserError, match="unknown algorithm 'nope'"):
        get_suggestions(SuggestionRequest("d/e", XY, MIN, Algorithm("nope"), (), 1))


def test_good_experiments_pass():
    for name, settings in [
        ("random", ()),
        ("tpe", (("gamma", "0.3"), ("n_ei_candidates", "12"))),
        ("cmaes", (("restart_strategy", "ipop"), ("sigma", "0.2"))),
        ("sobol", ()),
        ("bayesianoptimization", (("base_estimator", "RF"),)),
        ("multivariate-tpe", ()),
        ("hyperband", (("r_l", "9"), ("resource_name", "x"))),
    ]:
        validate(XY, MIN, Algorithm(name, settings), max_trial_count=100, parallel_trial_count=9)


def test_medianstop_validation_and_rule():
    with pytest.raises(
        UserError, match=r"spec.earlyStopping.algorithmSettings\[0\]: min_trials_required must be greater than zero"
    ):
        validate_early_stopping("medianstop", (("min_trials_required", "0"),))
    with pytest.raises(UserError, match=r"start_step must be greater or equal than one"):
        validate_early_stopping("medianstop", (("start_step", "0"),))
    with pytest.raises(UserError, match=r"unknown setting foo for algorithm medianstop"):
        validate_early_stopping("medianstop", (("foo", "1"),))
    with pytest.raises(UserError, match=r"spec.earlyStopping.algorithmName: unknown algorithm name nope"):
        validate_early_stopping("nope", ())
    trials = tuple(
        TrialResult(f"t{i}", (), state, 0.0)
        for i, state in enumerate(["Succeeded", "Succeeded", "Failed", "Succeeded", "EarlyStopped", "Running"])
    )
    logs = {
        "t0": [(3, 0.9), (1, 0.1), (2, 0.3)],
        "t1": [(1, 0.5), (2, 0.7)],
        "t2": [(1, 9.0)],
        "t3": [(1, 0.2), (2, 0.4), (3, 5.0)],
        "t4": [(1, 9.0)],
        "t5": [(1, 9.0)],
    }
    settings = (("min_trials_required", "3"), ("start_step", "2"))
    maximize = Objective("maximize", None, "accuracy")
    (rule,) = early_stopping_rules("medianstop", settings, maximize, trials, logs)
    # first two reports of each succeeded trial: t0 (0.1+0.3)/2, t1 (0.5+0.7)/2, t3 (0.2+0.4)/2; their mean
    assert rule.name == "accuracy" and rule.comparison == "less" and rule.start_step == 2
    assert float(rule.value) == pytest.approx((0.2 + 0.6 + 0.3) / 3)
    minimize = Objective("minimize", None, "loss")
    assert early_stopping_rules("medianstop", settings, minimize, trials, logs)[0].comparison == "greater"
    assert early_stopping_rules("medianstop", (("min_trials_required", "4"),), minimize, trials, logs) == ()


def test_the_libraries_load_only_when_used_and_their_absence_names_the_extra():
    """``import`` of the API imports no optimizer; without site-packages the call says what to install."""
    script = """
import sys
from millpond.errors import UserError
from millpond.katib.suggestions.api import get_suggestions
from millpond.katib.suggestions.records import *
assert not {"hyperopt", "optuna", "skopt", "cmaes", "numpy"} & set(sys.modules), sorted(sys.modules)
try:
    space = (ParameterSpec("x", "double", "0", "1"),)
    get_suggestions(SuggestionRequest("d/e", space, Objective("minimize", None, "l"), Algorithm("tpe"), (), 1))
except UserError as exc:
    print(exc)
"""
    out = subprocess.run(
        [sys.executable, "-S", "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=60,
    )
    assert out.stdout.strip() == "algorithm tpe needs hyperopt, numpy: pip install 'millpond[katib]'"

"""Each algorithm finds the shifted quadratic's minimum, deterministically for a seed, and keeps to the space."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from millpond.katib.suggestions.api import ALGORITHMS
from millpond.katib.suggestions.records import Algorithm, Assignment, Objective, ParameterSpec, TrialResult
from tests.katib_suggestions.search_loop import best, points, quadratic, run

SRC = Path(__file__).resolve().parents[2] / "src"

# algorithm, settings, trials, per-call count, tolerance on the objective (the minimum is 0).
CASES = [
    ("random", (), 60, 3, 0.1),
    ("tpe", (("n_startup_trials", "10"),), 60, 1, 0.1),
    ("multivariate-tpe", (("n_startup_trials", "10"),), 40, 2, 0.05),
    ("cmaes", (), 60, 3, 0.01),
    ("sobol", (), 64, 4, 0.05),
    (
        "bayesianoptimization",
        (("acq_optimizer", "sampling"), ("acq_func", "EI"), ("n_initial_points", "5")),
        10,
        1,
        0.1,
    ),
]


@pytest.mark.parametrize(("name", "settings", "trials", "per_call", "tolerance"), CASES, ids=[c[0] for c in CASES])
def test_finds_the_minimum_and_is_deterministic(name, settings, trials, per_call, tolerance):
    algorithm = Algorithm(name, (*settings, ("random_state", "7")))
    first, state = run(algorithm, quadratic, trials=trials, per_call=per_call)
    assert len(first) == trials
    assert best(first).objective_value < tolerance, best(first)
    assert dict(state)["suggested"] == str(trials)
    assert len(set(points(first))) == trials  # nothing suggested twice
    again, _ = run(algorithm, quadratic, trials=trials, per_call=per_call, experiment="default/other")
    assert points(again) == points(first)


def test_maximize_finds_the_maximum():
    objective = Objective("maximize", None, "accuracy")
    trials, _ = run(
        Algorithm("tpe", (("random_state", "1"), ("n_startup_trials", "8"))),
        lambda v: -quadratic(v),
        objective=objective,
        trials=40,
    )
    assert max(t.objective_value for t in trials) > -0.05


@pytest.mark.parametrize("name", sorted(ALGORITHMS - {"hyperband"}))
def test_a_restart_mid_search_continues_as_if_none_happened(name):
    """forget() before every call (a restarted controller) changes nothing: state and trials carry it all."""
    settings = (("random_state", "3"),) + ((("acq_optimizer", "sampling"),) if name == "bayesianoptimization" else ())
    parameters = (ParameterSpec("x", "double", "-2", "2", "0.25"), ParameterSpec("y", "double", "-3", "1", "0.5"))
    algorithm = Algorithm(name, settings)
    straight, _ = run(algorithm, quadratic, parameters=parameters, trials=12, per_call=2)
    restarted, _ = run(algorithm, quadratic, parameters=parameters, trials=12, per_call=2, forget_each_call=True)
    # (On this 153-point grid an optimizer may well suggest a good point twice: Katib's do too.)
    assert points(restarted) == points(straight)
    assert points(straight)[6:] != points(straight)[:6]  # the second half is not the first drawn again


def _encode(trials):
    return [
        [t.name, [[a.name, a.value] for a in t.assignments], t.state, t.objective_value, list(t.labels)] for t in trials
    ]


@pytest.mark.parametrize("name", ["tpe", "cmaes", "multivariate-tpe"])
def test_a_fresh_process_continues_the_search(name):
    algorithm = Algorithm(name, (("random_state", "5"),))
    half, state = run(algorithm, quadratic, trials=8, per_call=2)
    whole, _ = run(algorithm, quadratic, trials=16, per_call=2, start=(half, state))
    script = f"""
import json, sys
from millpond.katib.suggestions.records import *
from tests.katib_suggestions.search_loop import run, quadratic, points
data = json.loads(sys.stdin.read())
trials = [TrialResult(n, tuple(Assignment(*a) for a in assigned), s, v, labels=tuple(map(tuple, labels)))
          for n, assigned, s, v, labels in data["trials"]]
done, _ = run(Algorithm({name!r}, (("random_state", "5"),)), quadratic, trials=16, per_call=2,
              start=(trials, tuple(map(tuple, data["state"]))))
print(json.dumps(points(done)))
"""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{SRC.parent}"}
    out = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps({"trials": _encode(half), "state": state}),
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    assert [tuple(p) for p in json.loads(out.stdout)] == points(whole)
    assert len(set(points(whole))) == 16


MIXED = (
    ParameterSpec("x", "double", "-1", "1", "0.1"),
    ParameterSpec("n", "int", "0", "12", "3"),
    ParameterSpec("layers", "int", "1", "5"),
    ParameterSpec("opt", "categorical", values=("sgd", "adam", "rmsprop")),
    ParameterSpec("batch", "discrete", values=("16", "32", "64")),
)


def mixed(values: dict[str, str]) -> float:
    return (
        (float(values["x"]) - 0.3) ** 2
        + (int(values["n"]) - 6) ** 2 / 10
        + abs(int(values["layers"]) - 2)
        + (0 if values["opt"] == "adam" else 1)
        + (0 if values["batch"] == "32" else 1)
    )


def _legal(values: dict[str, str]) -> bool:
    x = float(values["x"])
    return (
        -1 <= x <= 1
        and abs(x * 10 - round(x * 10)) < 1e-9
        and len(values["x"]) <= 5
        and values["n"] in {"0", "3", "6", "9", "12"}
        and values["layers"] in {"1", "2", "3", "4", "5"}
        and values["opt"] in {"sgd", "adam", "rmsprop"}
        and values["batch"] in {"16", "32", "64"}
    )


MIXED_CASES = [
    ("random", (), 80, 1.5),
    ("tpe", (("n_startup_trials", "10"),), 50, 0.5),
    ("multivariate-tpe", (("n_startup_trials", "10"),), 50, 0.5),
    ("cmaes", (), 80, 1.5),
    ("sobol", (), 64, 1.5),
    (
        "bayesianoptimization",
        (("base_estimator", "ET"), ("acq_optimizer", "sampling"), ("n_initial_points", "6")),
        12,
        2.5,
    ),
    ("grid", (), 40, 0.5),
]


@pytest.mark.parametrize(("name", "settings", "trials", "tolerance"), MIXED_CASES, ids=[c[0] for c in MIXED_CASES])
def test_int_categorical_discrete_and_steps(name, settings, trials, tolerance):
    done, _ = run(
        Algorithm(name, (*settings, ("random_state", "11"))), mixed, parameters=MIXED, trials=trials, per_call=2
    )
    for trial in done:
        values = {a.name: a.value for a in trial.assignments}
        assert [a.name for a in trial.assignments] == [p.name for p in MIXED]
        assert _legal(values), values
    if name != "grid":  # grid walks 40 of 3,150 points in a shuffled order: legality is what it shows here
        assert best(done).objective_value <= tolerance, best(done)


@pytest.mark.parametrize("name", sorted(ALGORITHMS - {"hyperband", "grid"}))
def test_failed_trials_are_not_observations_nor_repeated(name):
    """Every trial fails: the search goes on drawing new points, learning nothing from the failures."""
    settings = (("random_state", "2"),) + ((("acq_optimizer", "sampling"),) if name == "bayesianoptimization" else ())
    done, _ = run(Algorithm(name, settings), lambda values: None, trials=10, per_call=1)
    assert len(done) == 10 and all(t.state == "Failed" for t in done)
    assert len(set(points(done))) == 10


def test_trials_outside_the_space_are_ignored():
    """A trial of an earlier parameter list (a value no longer allowed) does not break the call."""
    stray = TrialResult("old", (Assignment("x", "0.1"), Assignment("y", "oops")), "Succeeded", 1.0)
    done, _ = run(Algorithm("tpe", (("random_state", "1"),)), quadratic, trials=3, start=([stray], ()))
    assert len(done) == 3

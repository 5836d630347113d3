"""Katib suggestion latency: millpond's algorithms against calling their library directly, per trial.

    .venv/bin/python benchmarks/katib_suggestions.py            # 100 trials each (skopt's GP: minutes)
    .venv/bin/python benchmarks/katib_suggestions.py --trials 30 --only tpe,cmaes

Each algorithm minimizes (x - 0.3)^2 + (y + 1)^2 one trial at a time, as a Katib experiment with
parallelTrialCount 1 does: millpond calls ``get_suggestions`` with every trial so far and the carried
state (it rebuilds the library's model from them on each call, so a restart loses nothing); the peer
keeps the library's own object in memory and asks/tells it in a loop (hyperopt's ``fmin``, optuna's
``study.optimize``, ``cmaes.CMA``, scipy's ``qmc.Sobol``, skopt's ``Optimizer``). Printed: milliseconds
per trial for both and their ratio (millpond / peer). hyperband is Katib's own service: no peer.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from millpond.katib.suggestions.api import get_suggestions
from millpond.katib.suggestions.records import (
    Algorithm,
    Objective,
    ParameterSpec,
    SuggestionRequest,
    TrialResult,
)

SPACE = (ParameterSpec("x", "double", "-2", "2"), ParameterSpec("y", "double", "-3", "1"))
GRID = (ParameterSpec("x", "double", "-2", "2", "0.1"), ParameterSpec("y", "double", "-3", "1", "0.1"))
SETTINGS = {"bayesianoptimization": (("acq_optimizer", "sampling"),), "tpe": (("n_startup_trials", "10"),)}


def loss(x: float, y: float) -> float:
    return (x - 0.3) ** 2 + (y + 1) ** 2


def millpond(name: str, trials: int) -> float:
    space = GRID if name == "grid" else SPACE
    settings = (*SETTINGS.get(name, ()), ("random_state", "1"))
    if name == "hyperband":
        space = (*SPACE, ParameterSpec("epochs", "int", "1", "9"))
        settings = (("r_l", "9"), ("resource_name", "epochs"), ("random_state", "1"))
    done: list[TrialResult] = []
    state: tuple[tuple[str, str], ...] = ()
    started = time.perf_counter()
    while len(done) < trials:
        reply = get_suggestions(
            SuggestionRequest(
                "bench/e",
                space,
                Objective("minimize", None, "loss"),
                Algorithm(name, settings),
                tuple(done),
                9 if name == "hyperband" else 1,
                state,
            )
        )
        state = reply.state
        for suggestion in reply.suggestions:
            values = {a.name: float(a.value) for a in suggestion.assignments}
            done.append(
                TrialResult(
                    f"t{len(done)}",
                    suggestion.assignments,
                    "Succeeded",
                    loss(values["x"], values["y"]),
                    labels=suggestion.labels,
                )
            )
        if reply.exhausted:
            state = ()  # hyperband ran all its brackets: start again
    return (time.perf_counter() - started) / len(done)


def peer(name: str, trials: int) -> float | None:
    started = time.perf_counter()
    if name in ("random", "tpe"):
        import hyperopt
        from hyperopt import hp

        algo = hyperopt.rand.suggest if name == "random" else hyperopt.partial(hyperopt.tpe.suggest, n_startup_jobs=10)
        hyperopt.fmin(
            lambda p: loss(p["x"], p["y"]),
            {"x": hp.uniform("x", -2, 2), "y": hp.uniform("y", -3, 1)},
            algo=algo,
            max_evals=trials,
            rstate=np.random.default_rng(1),
            show_progressbar=False,
        )
    elif name in ("multivariate-tpe", "grid"):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if name == "grid":
                grid = {"x": list(np.arange(-2, 2.05, 0.1)), "y": list(np.arange(-3, 1.05, 0.1))}
                sampler: optuna.samplers.BaseSampler = optuna.samplers.GridSampler(grid, seed=1)
            else:
                sampler = optuna.samplers.TPESampler(multivariate=True, constant_liar=True, seed=1)
            study = optuna.create_study(sampler=sampler)
            study.optimize(lambda t: loss(t.suggest_float("x", -2, 2), t.suggest_float("y", -3, 1)), n_trials=trials)
    elif name == "cmaes":
        from cmaes import CMA

        cma = CMA(mean=np.array([0.0, -1.0]), sigma=4 / 6, bounds=np.array([[-2, 2], [-3, 1]]), seed=1)
        told = 0
        while told < trials:
            solutions = []
            for _ in range(cma.population_size):
                x = cma.ask()
                solutions.append((x, loss(*x)))
            cma.tell(solutions)
            told += len(solutions)
        return (time.perf_counter() - started) / told
    elif name == "sobol":
        from scipy.stats import qmc

        engine = qmc.Sobol(2, scramble=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(trials):
                x, y = engine.random(1)[0]
                loss(-2 + 4 * x, -3 + 4 * y)
    elif name == "bayesianoptimization":
        import skopt

        optimizer = skopt.Optimizer([(-2.0, 2.0), (-3.0, 1.0)], acq_optimizer="sampling", random_state=1)
        for _ in range(trials):
            x = optimizer.ask()
            optimizer.tell(x, loss(*x))
    else:
        return None
    return (time.perf_counter() - started) / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--only", default="random,tpe,multivariate-tpe,grid,cmaes,sobol,bayesianoptimization,hyperband")
    args = parser.parse_args()
    print(f"Katib suggestion latency, {args.trials} trials one at a time (ms per trial)")
    print(f"{'algorithm':<22}{'millpond':>12}{'peer':>12}{'ratio':>8}")
    for name in args.only.split(","):
        millpond(name, 3), peer(name, 3)  # imports and first-call set-up are not what is measured
        ours = millpond(name, args.trials)
        theirs = peer(name, args.trials)
        ratio = f"{ours / theirs:8.2f}" if theirs else f"{'—':>8}"
        peer_text = f"{theirs * 1000:12.2f}" if theirs else f"{'—':>12}"
        print(f"{name:<22}{ours * 1000:12.2f}{peer_text}{ratio}", flush=True)


if __name__ == "__main__":
    main()

"""Katib's controller overhead per trial: millpond's Experiment supervisor against optuna calling the command itself.

    .venv/bin/python benchmarks/katib_controller.py                 # 30 trials, parallel 1 and 3, 3 repeats
    .venv/bin/python benchmarks/katib_controller.py --trials 10 --repeat 1 --parallel 1

Each trial is the same trivial command: a Python process that takes ``time.time()`` first thing, prints
``loss=...`` from its parameter (a shifted quadratic) and appends its trial's name, its start and its end time to
a file. Measured in the same run, in wall milliseconds:

- **millpond**: an Experiment (``random`` algorithm, ``maxTrialCount`` ``--trials``, ``parallelTrialCount`` 1
  or 3, a batch Job trial template running the command) applied with ``millpond apply -f`` over a fresh home,
  read until Succeeded. A trial's *overhead* is from its Trial object's creation (the store's ``created_at``,
  microseconds, written when the supervisor creates it) to its process's own start time: the supervisor
  noticing the new Trial, rendering and applying its batch Job (quota, Kueue, the Job's controller) and the
  pod's process being spawned. With parallel 1 the *turnaround* is from one trial's process end to the next
  Trial's creation: noticing the job ended, reading its metric, asking the algorithm for the next suggestion
  (hyperopt, its model rebuilt from every trial so far) and recording it.
  Split in two: *to_job*, from the Trial's creation to its batch Job's (the store's ``created_at`` of both;
  the template says ``retain: true`` so the Jobs stay to be read): the Katib supervisor's own part, rendering
  and applying the Job; and *job_to_process*, from the Job's creation to the process's start: millpond's
  batch Job controller (a process of its own, per Job, started detached) starting the pod, what any Job
  costs on millpond whoever creates it.
- **peer**: optuna's ``study.optimize`` (``RandomSampler``; ``n_jobs`` = the parallelism) whose objective
  calls the same command with ``subprocess.run``: the floor of any controller, spawning the process. Its
  *overhead* is from just before ``subprocess.run`` to the process's start; its *turnaround* from one
  process's end to the next one's ``subprocess.run`` (optuna's tell and ask).

Printed per parallelism: the median over ``--repeat`` runs of each run's median (min–max of the run medians
beside it), millpond minus peer and their ratio; and the end-to-end wall time per trial (first Trial created,
or ``study.optimize`` called, to the last process's end, over the trials). Issue 35's goal: at most 50 ms of
controller overhead per trial beyond the peer's floor.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import yaml

PY = sys.executable
MILLPOND = Path(sys.executable).parent / "millpond"
TRIAL = ("import time; t=time.time(); import os,sys; x=float(sys.argv[1]); print(f'loss={(x-2)**2:.6f}', flush=True); "
         "open(os.environ['STAMPS'],'a').write(f'{sys.argv[2]} {t} {time.time()}\\n')")


@dataclass
class Run:
    """One run's per-trial medians and wall time per trial, in milliseconds."""

    overhead: float
    turnaround: float | None
    wall: float
    to_job: float | None = None  # millpond: Trial created -> its Job created (the Katib supervisor's own part)
    job_to_process: float | None = None  # millpond: Job created -> process started (the batch Job's controller)


def stamps(path: Path) -> dict[str, tuple[float, float]]:
    out = {}
    for line in path.read_text().splitlines():
        name, start, end = line.split()
        out[name] = (float(start), float(end))
    return out


def turnarounds(created: dict[str, float], ran: dict[str, tuple[float, float]]) -> list[float]:
    """Each trial's start of controller work: its creation after the previous trial's end (parallel 1 only)."""
    order = sorted(created, key=created.__getitem__)
    return [(created[after] - ran[before][1]) * 1000 for before, after in zip(order, order[1:], strict=False)]


def experiment(trials: int, parallel: int, stamps_file: Path) -> dict[str, Any]:
    container = {"name": "training-container", "image": "python:3.12",
                 "command": [PY, "-c", TRIAL, "${trialParameters.x}", "${trialParameters.trial}"],
                 "env": [{"name": "STAMPS", "value": str(stamps_file)}]}
    return {
        "apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": "bench"},
        "spec": {
            "objective": {"type": "minimize", "objectiveMetricName": "loss"},
            "algorithm": {"algorithmName": "random", "algorithmSettings": [{"name": "random_state", "value": "1"}]},
            "parallelTrialCount": parallel, "maxTrialCount": trials, "maxFailedTrialCount": 1,
            "parameters": [{"name": "x", "parameterType": "double", "feasibleSpace": {"min": "-4", "max": "6"}}],
            "trialTemplate": {
                "primaryContainerName": "training-container",
                "trialParameters": [{"name": "x", "reference": "x"},
                                    {"name": "trial", "reference": "${trialSpec.Name}"}],
                "trialSpec": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {
                    "containers": [container], "restartPolicy": "Never"}}}},
                "retain": True,  # the Jobs kept, to read their creation times
            },
        },
    }


def millpond(trials: int, parallel: int) -> Run:
    home = Path(tempfile.mkdtemp(prefix="millpond-katib-bench-"))
    os.environ["MILLPOND_HOME"] = str(home)
    from millpond.katib.kinds import EXPERIMENT  # noqa: PLC0415 - after MILLPOND_HOME is set
    from millpond.katib.kinds import TRIAL as TRIAL_KIND  # noqa: PLC0415
    from millpond.katib.objects import supervisors  # noqa: PLC0415
    from millpond.settings import load_settings  # noqa: PLC0415
    from millpond.store.resources import ResourceStore  # noqa: PLC0415

    stamps_file = home / "stamps"
    path = home / "experiment.yaml"
    path.write_text(yaml.safe_dump(experiment(trials, parallel, stamps_file)))
    subprocess.run([str(MILLPOND), "apply", "-f", str(path)], check=True, capture_output=True,
                   env={**os.environ, "MILLPOND_HOME": str(home)})
    store = ResourceStore(load_settings())
    deadline = time.monotonic() + 60 + trials * 5
    while time.monotonic() < deadline:
        found = store.get(EXPERIMENT.kind, "bench", "default")
        conditions = [one for one in (found.status.get("conditions") or []) if one.get("status") == "True"] \
            if found else []
        if any(one["type"] in ("Succeeded", "Failed") for one in conditions):
            break
        time.sleep(0.1)
    else:
        raise SystemExit("error: the experiment did not finish")
    if any(one["type"] == "Failed" for one in conditions):
        raise SystemExit(f"error: the experiment failed: {conditions[-1].get('message')}")
    created = {trial.name: trial.created_at.timestamp() for trial in store.list(TRIAL_KIND.kind, "default")}
    ran = stamps(stamps_file)
    assert sorted(created) == sorted(ran), (sorted(created), sorted(ran))  # noqa: S101 - each trial ran once
    jobs = {job.name: job.created_at.timestamp() for job in store.list("Job", "default")}
    overhead = statistics.median((ran[name][0] - created[name]) * 1000 for name in created)
    to_job = statistics.median((jobs[name] - created[name]) * 1000 for name in created)
    job_to_process = statistics.median((ran[name][0] - jobs[name]) * 1000 for name in created)
    turnaround = statistics.median(turnarounds(created, ran)) if parallel == 1 else None
    wall = (max(end for _, end in ran.values()) - min(created.values())) * 1000 / trials
    deadline = time.monotonic() + 30
    while supervisors("default", "bench") and time.monotonic() < deadline:  # it leaves once finished
        time.sleep(0.1)
    return Run(overhead, turnaround, wall, to_job, job_to_process)


def peer(trials: int, parallel: int) -> Run:
    stamps_file = Path(tempfile.mkdtemp(prefix="optuna-bench-")) / "stamps"
    created: dict[str, float] = {}

    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_float("x", -4, 6)
        name = f"peer-{trial.number}"
        created[name] = time.time()
        out = subprocess.run([PY, "-c", TRIAL, repr(x), name], capture_output=True, text=True, check=True,
                             env={**os.environ, "STAMPS": str(stamps_file)})
        return float(out.stdout.split("=", 1)[1])

    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    began = time.time()
    study.optimize(objective, n_trials=trials, n_jobs=parallel)
    ran = stamps(stamps_file)
    overhead = statistics.median((ran[name][0] - created[name]) * 1000 for name in created)
    turnaround = statistics.median(turnarounds(created, ran)) if parallel == 1 else None
    wall = (max(end for _, end in ran.values()) - began) * 1000 / trials
    return Run(overhead, turnaround, wall)


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):8.1f} ({min(values):.0f}–{max(values):.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--parallel", default="1,3", help="parallelTrialCount values, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print(f"{args.trials} trials of a trivial command; medians of {args.repeat} runs' medians (min–max), ms per trial")
    print(f"{'parallel':>8} {'measure':<15} {'millpond':>20} {'peer (optuna)':>20} {'difference':>11} {'ratio':>6}")
    for parallel in [int(one) for one in args.parallel.split(",")]:
        ours: list[Run] = []
        theirs: list[Run] = []
        for _ in range(args.repeat):  # alternate, so both see the same load
            ours.append(millpond(args.trials, parallel))
            theirs.append(peer(args.trials, parallel))
        for label in ("overhead", "to_job", "job_to_process", "turnaround", "wall"):
            mine = [getattr(one, label) for one in ours]
            other = [getattr(one, label) for one in theirs]
            if None in mine:
                continue
            if None in other:
                print(f"{parallel:>8} {label:<15} {spread(mine):>20} {'':>20}")
                continue
            difference = statistics.median(mine) - statistics.median(other)
            ratio = statistics.median(mine) / max(statistics.median(other), 1e-9)
            print(f"{parallel:>8} {label:<15} {spread(mine):>20} {spread(other):>20} {difference:>11.1f} "
                  f"{ratio:>5.1f}x")


if __name__ == "__main__":
    main()

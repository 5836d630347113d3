"""Pipelines that tune through ``millpond.katib.components.katib_experiment`` (tests/katib_pipeline)."""

import sys

from kfp import dsl

from millpond.katib.components import katib_experiment
from millpond.scheduling.machine import cpu_millis

ALL_CPUS = f"{cpu_millis()}m"  # every CPU the scheduler counts: what the experiment's task holds while trials wait
# each trial prints the loss of its x (a shifted quadratic, least at x = 2); a failing one exits 3 first
QUADRATIC = "import sys; x = float(sys.argv[1]); print(f'loss={(x - 2) ** 2:.6f}')"
FAILING = "import sys; print('boom: the data is bad', file=sys.stderr); sys.exit(3)"


def spec(script: str, algorithm: str = "random", max_trials: int = 4, **more: object) -> dict:
    """An Experiment's spec of batch Job trials running ``script`` on this machine's Python."""
    container = {"name": "training-container", "image": "python:3.12",
                 "command": [sys.executable, "-c", script, "${trialParameters.x}"]}
    return {"objective": {"type": "minimize", "objectiveMetricName": "loss"},
            "algorithm": {"algorithmName": algorithm, "algorithmSettings": [{"name": "random_state", "value": "9"}]},
            "parallelTrialCount": 2, "maxTrialCount": max_trials,
            "parameters": [{"name": "x", "parameterType": "double", "feasibleSpace": {"min": "-4", "max": "6"}}],
            "trialTemplate": {"primaryContainerName": "training-container",
                              "trialParameters": [{"name": "x", "reference": "x"}],
                              "trialSpec": {"apiVersion": "batch/v1", "kind": "Job", "spec": {
                                  "backoffLimit": 0,  # a failing trial fails at once (Job's default retries 6 times)
                                  "template": {"spec": {"containers": [container], "restartPolicy": "Never"}}}}},
            **more}


@dsl.component
def train_with(best: dict, best_trial: dict) -> str:
    """The next task: it takes the best parameters as its inputs (Katib's values are strings)."""
    x = float(best["x"])
    return f"trained with x={x} from {best_trial['bestTrialName']}"


@dsl.pipeline(name="tune-then-train")
def tune_then_train() -> str:
    """The experiment's task holds every CPU while its trials ask for theirs: it must give its grant back."""
    tuned = katib_experiment(experiment_name="quad", experiment_spec=spec(QUADRATIC), experiment_timeout_minutes=5)
    tuned.set_cpu_request(ALL_CPUS).set_caching_options(False)
    return train_with(best=tuned.outputs["best_parameters"], best_trial=tuned.outputs["best_parameter_set"]).output


@dsl.pipeline(name="tune-fails")
def tune_fails() -> None:
    tuned = katib_experiment(experiment_name="broken", experiment_spec=spec(FAILING, maxFailedTrialCount=2),
                             delete_finished_experiment=False).set_caching_options(False)
    train_with(best=tuned.outputs["best_parameters"], best_trial=tuned.outputs["best_parameter_set"])


@dsl.pipeline(name="tune-refused")
def tune_refused() -> None:
    katib_experiment(experiment_name="refused", experiment_spec=spec(QUADRATIC, algorithm="annealing"))

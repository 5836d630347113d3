"""What the Katib pages make of an Experiment and its Trials (``server.katib_views``), on objects shaped as
Katib's controller writes them (kubeflow.org/v1beta1 status: conditions in the order they were appended,
``currentOptimalTrial``, observations with min/max/latest per metric)."""

from __future__ import annotations

from typing import Any

from millpond.server.katib_views import (
    condition_of,
    experiment_detail,
    experiment_row,
    is_trial_of,
    metric_values,
    strategy_of,
)


def _condition(kind: str, status: str, at: str, reason: str = "", message: str = "") -> dict[str, str]:
    return {"type": kind, "status": status, "lastTransitionTime": at, "lastUpdateTime": at, "reason": reason,
            "message": message}


def _experiment(**status: Any) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment",
            "metadata": {"name": "quad", "namespace": "team-a", "creationTimestamp": "2026-11-29T10:00:00Z"},
            "spec": {"objective": {"type": "minimize", "objectiveMetricName": "loss", "goal": 0.01,
                                   "additionalMetricNames": ["accuracy"],
                                   "metricStrategies": [{"name": "loss", "value": "min"},
                                                        {"name": "accuracy", "value": "latest"}]},
                     "algorithm": {"algorithmName": "tpe"}, "maxTrialCount": 6, "parallelTrialCount": 2,
                     "parameters": [
                         {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.1"}},
                         {"name": "optimizer", "parameterType": "categorical",
                          "feasibleSpace": {"list": ["sgd", "adam"]}}]},
            "status": status}


def _trial(name: str, created: str, lr: str, loss: dict[str, str] | None, *conditions: dict[str, str],
           owner: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "team-a", "creationTimestamp": created}
    if owner:
        meta["ownerReferences"] = [{"kind": "Experiment", "name": "quad", "apiVersion": "kubeflow.org/v1beta1"}]
    else:
        meta["labels"] = {"katib.kubeflow.org/experiment": "quad"}
    metrics = [{"name": "loss", **loss}, {"name": "accuracy", "min": "0.5", "max": "0.9", "latest": "0.8"}] \
        if loss is not None else []
    return {"metadata": meta,
            "spec": {"parameterAssignments": [{"name": "lr", "value": lr}, {"name": "optimizer", "value": "adam"}],
                     "primaryContainerName": "training-container",
                     "primaryPodLabels": {"training.kubeflow.org/job-role": "master"},
                     "runSpec": {"apiVersion": "batch/v1", "kind": "Job"}},
            "status": {"conditions": list(conditions), "startTime": created,
                       **({"observation": {"metrics": metrics}} if metrics else {})}}


def test_the_newest_true_condition_is_the_state_and_before_any_the_default() -> None:
    experiment = _experiment(conditions=[
        _condition("Created", "True", "2026-11-29T10:00:00Z", "ExperimentCreated", "Experiment is created"),
        _condition("Running", "False", "2026-11-29T10:05:00Z", "ExperimentRunning"),
        _condition("Succeeded", "True", "2026-11-29T10:05:00Z", "ExperimentGoalReached", "Experiment has succeeded")])
    assert condition_of(experiment, "Created") == {"type": "Succeeded", "reason": "ExperimentGoalReached",
                                                   "message": "Experiment has succeeded"}
    assert condition_of({"status": {}}, "Pending") == {"type": "Pending", "reason": "", "message": ""}
    assert condition_of({}, "Created")["type"] == "Created"


def test_a_metric_takes_its_strategy_and_katibs_default_by_objective_type() -> None:
    objective = {"type": "maximize", "metricStrategies": [{"name": "loss", "value": "latest"}]}
    assert strategy_of(objective, "loss") == "latest"
    assert strategy_of(objective, "accuracy") == "max"
    assert strategy_of({"type": "minimize"}, "loss") == "min"
    observed = {"metrics": [{"name": "loss", "min": "0.1", "max": "0.9", "latest": "0.3"},
                            {"name": "accuracy", "min": "unavailable", "max": "unavailable", "latest": "unavailable"}]}
    assert metric_values(observed, objective) == {"loss": 0.3, "accuracy": None}
    assert metric_values(None, objective) == {}


def test_an_experiment_line_has_its_counts_condition_and_best_trial() -> None:
    experiment = _experiment(
        conditions=[_condition("Created", "True", "2026-11-29T10:00:00Z"),
                    _condition("Running", "True", "2026-11-29T10:00:01Z", "ExperimentRunning")],
        trials=3, trialsSucceeded=2, trialsRunning=1,
        currentOptimalTrial={"bestTrialName": "quad-b", "parameterAssignments": [{"name": "lr", "value": "0.05"}],
                             "observation": {"metrics": [{"name": "loss", "min": "0.02", "max": "0.4",
                                                          "latest": "0.02"}]}})
    row = experiment_row(experiment)
    assert row["name"] == "quad" and row["namespace"] == "team-a" and row["algorithm"] == "tpe"
    assert row["condition"]["type"] == "Running"
    assert row["counts"]["trials"] == 3 and row["counts"]["trialsSucceeded"] == 2 and row["counts"]["trialsFailed"] == 0
    assert row["objective"] == {"type": "minimize", "metric": "loss", "goal": 0.01}
    assert row["best"] == {"name": "quad-b", "parameters": {"lr": "0.05"}, "objective": 0.02,
                           "metrics": {"loss": 0.02}}
    assert experiment_row(_experiment())["best"] is None


def test_the_detail_lists_only_the_experiments_trials_oldest_first_with_their_objective() -> None:
    done = _condition("Succeeded", "True", "2026-11-29T10:02:00Z", "TrialSucceeded")
    trials = [
        _trial("quad-b", "2026-11-29T10:01:00Z", "0.05", {"min": "0.02", "max": "0.4", "latest": "0.03"}, done),
        _trial("quad-a", "2026-11-29T10:00:30Z", "0.09", {"min": "0.3", "max": "0.5", "latest": "0.3"}, done,
               owner=True),
        _trial("quad-c", "2026-11-29T10:01:30Z", "0.02", None,
               _condition("Running", "True", "2026-11-29T10:01:31Z")),
    ]
    other = _trial("other-a", "2026-11-29T10:00:00Z", "0.01", None)
    other["metadata"]["labels"] = {"katib.kubeflow.org/experiment": "other"}
    mine = [t for t in [*trials, other] if is_trial_of(t, "quad")]
    assert [t["metadata"]["name"] for t in mine] == ["quad-b", "quad-a", "quad-c"]
    detail = experiment_detail(_experiment(), mine)
    assert [t["name"] for t in detail["trials"]] == ["quad-a", "quad-b", "quad-c"]
    first = detail["trials"][0]
    assert first["parameters"] == {"lr": "0.09", "optimizer": "adam"} and first["objective"] == 0.3
    assert first["metrics"] == {"loss": 0.3, "accuracy": 0.8}  # accuracy's strategy: latest
    assert first["condition"]["type"] == "Succeeded" and first["primaryContainer"] == "training-container"
    assert first["primaryPodLabels"] == {"training.kubeflow.org/job-role": "master"}
    assert detail["trials"][2]["objective"] is None and detail["trials"][2]["condition"]["type"] == "Running"
    assert detail["parameters"] == [
        {"name": "lr", "type": "double", "min": 0.01, "max": 0.1, "list": []},
        {"name": "optimizer", "type": "categorical", "min": None, "max": None, "list": ["sgd", "adam"]}]
    assert detail["metricNames"] == ["loss", "accuracy"]

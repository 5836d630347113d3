"""The Katib SDK's ``KatibClient`` (``kubeflow-katib`` 0.19.0), unchanged, against ``millpond server``.

It runs in its own side environment (``tests/katib_sdk_env.py``: the SDK pins protobuf < 5) with the kubeconfig
``millpond kubeconfig`` writes for ``millpond server --tls`` with a token, as from a user's notebook:

- ``create_experiment`` of an Experiment built from the SDK's models (a batch Job trial printing
  ``loss=...`` from its parameter, a shifted quadratic least at x = 2), ``wait_for_experiment_condition``,
  ``get_optimal_hyperparameters``, ``list_experiments``, ``get_experiment_conditions``, ``list_trials``,
  ``get_success_trial_details``, ``get_suggestion``, ``get_job_logs``, ``edit_experiment_budget`` (resumePolicy
  LongRunning: one more trial) and ``delete_experiment``;
- ``tune`` of a Python objective function and a search space (``katib.search``): an Experiment whose batch Job
  trials run the function's source (``bash -c`` writing it to a file, then ``python -u``; here on the host, so
  ``base_image`` is not used), and the best trial found.

``get_trial_metrics`` reads Katib's DB-manager gRPC service (``katib-db-manager:6789``), which millpond does not
serve: the observation is in the Trial's ``status.observation`` (read here through ``list_trials``).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from tests.kube_sdk_env import SdkEnv, run_sdk
from tests.kube_support import Kubectl

CREATE = """\
    import json
    import sys
    import time

    from kubeflow.katib import (KatibClient, V1beta1AlgorithmSetting, V1beta1AlgorithmSpec, V1beta1Experiment,
                                V1beta1ExperimentSpec, V1beta1FeasibleSpace, V1beta1ObjectiveSpec,
                                V1beta1ParameterSpec, V1beta1TrialParameterSpec, V1beta1TrialTemplate)
    from kubernetes.client import V1ObjectMeta

    python = sys.argv[1]
    trial_spec = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {"restartPolicy": "Never",
        "containers": [{"name": "training-container", "image": "python:3.12", "command": [
            python, "-c", "import sys; x = float(sys.argv[1]); print(f'step 1 loss={(x - 2) ** 2 + 1:.6f}'); "
                          "print(f'loss={(x - 2) ** 2:.6f}')", "${trialParameters.x}"]}]}}}}
    experiment = V1beta1Experiment(
        api_version="kubeflow.org/v1beta1", kind="Experiment", metadata=V1ObjectMeta(name="quad", namespace="default"),
        spec=V1beta1ExperimentSpec(
            objective=V1beta1ObjectiveSpec(type="minimize", objective_metric_name="loss"),
            algorithm=V1beta1AlgorithmSpec(algorithm_name="random", algorithm_settings=[
                V1beta1AlgorithmSetting(name="random_state", value="3")]),
            max_trial_count=4, parallel_trial_count=2, resume_policy="LongRunning",
            parameters=[V1beta1ParameterSpec(name="x", parameter_type="double",
                                             feasible_space=V1beta1FeasibleSpace(min="-4", max="6"))],
            trial_template=V1beta1TrialTemplate(
                primary_container_name="training-container", retain=True,
                trial_parameters=[V1beta1TrialParameterSpec(name="x", reference="x")], trial_spec=trial_spec)))
    client = KatibClient()
    client.create_experiment(experiment)
    try:
        client.create_experiment(experiment)
        again = "created twice"
    except Exception as exc:
        again = str(exc)
    done = client.wait_for_experiment_condition("quad", timeout=180, polling_interval=1)
    optimal = client.get_optimal_hyperparameters("quad")
    trials = client.list_trials("quad")
    details = client.get_success_trial_details("quad")
    suggestion = client.get_suggestion("quad")
    best = optimal.best_trial_name
    pods = client.core_api.list_namespaced_pod("default", label_selector=f"katib.kubeflow.org/trial={best}").items
    logs = client.core_api.read_namespaced_pod_log(pods[0].metadata.name, "default",
                                                   container="training-container").splitlines()
    try:
        job_logs = list(client.get_job_logs("quad", best))
    except RuntimeError as exc:
        job_logs = str(exc)
    seen = {
        "again": again, "succeeded": client.is_experiment_succeeded("quad"),
        "conditions": [[c.type, c.status, c.reason] for c in client.get_experiment_conditions("quad")],
        "counts": [done.status.trials, done.status.trials_succeeded],
        "best": best, "assignments": [[p.name, p.value] for p in optimal.parameter_assignments],
        "metrics": [[m.name, m.min, m.max, m.latest] for m in optimal.observation.metrics],
        "trials": sorted([t.metadata.name, t.status.conditions[-1].type,
                          [[m.name, m.min] for m in t.status.observation.metrics]] for t in trials),
        "details": sorted([d["name"], [[p.name, p.value] for p in d["parameter_assignments"]]] for d in details),
        "suggestion": [suggestion.spec.requests, suggestion.status.suggestion_count],
        "listed": [e.metadata.name for e in client.list_experiments()],
        "pods": [[p.metadata.name, p.metadata.labels.get("katib.kubeflow.org/experiment"),
                  [c.name for c in p.spec.containers]] for p in pods],
        "logs": logs, "job_logs": job_logs}
    # resumePolicy LongRunning: a raised budget (the SDK patches the whole Experiment) runs one more trial
    client.edit_experiment_budget("quad", max_trial_count=5)
    deadline = time.monotonic() + 120
    while (resumed := client.get_experiment("quad")).status.trials_succeeded < 5 or \
            not client.is_experiment_succeeded("quad"):
        assert time.monotonic() < deadline, resumed.status
        time.sleep(0.5)
    seen["resumed"] = [resumed.spec.max_trial_count, resumed.status.trials, resumed.status.trials_succeeded]
    client.delete_experiment("quad")
    print(json.dumps({**seen, "left": [e.metadata.name for e in client.list_experiments()]}))
"""

TUNE = """\
    import json

    import kubeflow.katib as katib


    def objective(parameters):
        # What each trial runs: the SDK sends this function's source; the values arrive as strings.
        import math

        a, lr = int(parameters["a"]), float(parameters["lr"])
        print(f"result={-(a - 3) ** 2 - abs(math.log10(lr) + 2):.6f}")


    client = katib.KatibClient()
    client.tune(name="tuned", objective=objective,
                parameters={"a": katib.search.int(min=1, max=5), "lr": katib.search.double(min=0.001, max=0.1)},
                objective_metric_name="result", objective_type="maximize", algorithm_name="random",
                algorithm_settings={"random_state": "11"}, max_trial_count=4, parallel_trial_count=2,
                retain_trials=True)
    done = client.wait_for_experiment_condition("tuned", timeout=240, polling_interval=1)
    optimal = client.get_optimal_hyperparameters("tuned")
    experiment = client.get_experiment("tuned")
    template = experiment.spec.trial_template
    print(json.dumps({
        "succeeded": client.is_experiment_succeeded("tuned"), "counts": [done.status.trials,
                                                                        done.status.trials_succeeded],
        "trial_kind": template.trial_spec["kind"], "command": template.trial_spec["spec"]["template"]["spec"][
            "containers"][0]["command"],
        "parameters": sorted([p.name, p.parameter_type] for p in experiment.spec.parameters),
        "best": optimal.best_trial_name, "assignments": {p.name: p.value for p in optimal.parameter_assignments},
        "metric": [[m.name, m.latest] for m in optimal.observation.metrics],
        "all": [[{p.name: p.value for p in d["parameter_assignments"]}, [[m.name, m.latest] for m in d["metrics"]]]
                for d in client.get_success_trial_details("tuned")]}))
"""


def test_katib_client_creates_waits_for_reads_and_deletes_an_experiment(
        katib_sdk: SdkEnv, kubectl: Kubectl, tmp_path: Path) -> None:
    seen = run_sdk(katib_sdk, kubectl.config, tmp_path, "create", CREATE, sys.executable, timeout=300)
    assert "already exists" in seen["again"], seen["again"]
    assert seen["succeeded"] is True
    conditions = {kind: (status, reason) for kind, status, reason in seen["conditions"]}
    assert conditions["Succeeded"] == ("True", "ExperimentMaxTrialsReached") and conditions["Created"][0] == "True"
    assert seen["counts"] == [4, 4]
    trials = {name: (state, dict(metrics)) for name, state, metrics in seen["trials"]}
    assert len(trials) == 4 and all(name.startswith("quad-") for name in trials)
    assert {state for state, _ in trials.values()} == {"Succeeded"}
    # the best trial is the one of least loss (min over its two lines: the last one, (x-2)^2)
    best = seen["best"]
    assert float(trials[best][1]["loss"]) == min(float(metrics["loss"]) for _, metrics in trials.values())
    x = float(dict(seen["assignments"])["x"])
    (name, low, high, latest), = seen["metrics"]
    assert name == "loss" and abs(float(low) - (x - 2) ** 2) < 1e-5 and float(latest) == float(low)
    assert abs(float(high) - ((x - 2) ** 2 + 1)) < 1e-5
    assert sorted(name for name, _ in seen["details"]) == sorted(trials)
    assert seen["suggestion"] == [4, 4]
    assert seen["listed"] == ["quad"]
    # the best trial's pod, by Katib's trial label, and its log: the lines its metrics were read from
    (pod, experiment, containers), = seen["pods"]
    assert pod.startswith(f"{best}-") and experiment == "quad"
    assert containers == ["training-container", "metrics-logger-and-collector"]  # Katib's StdOut collector sidecar
    assert f"loss={(x - 2) ** 2:.6f}" in seen["logs"], seen["logs"]
    # get_job_logs reads the collector sidecar's log: with StdOut collection, the training container's output
    assert [line.rstrip("\n") for line in seen["job_logs"]] == seen["logs"], seen["job_logs"]
    assert seen["resumed"] == [5, 5, 5]
    assert seen["left"] == []


def test_katib_client_tunes_a_python_function_over_a_search_space(
        katib_sdk: SdkEnv, kubectl: Kubectl, tmp_path: Path) -> None:
    seen = run_sdk(katib_sdk, kubectl.config, tmp_path, "tune", TUNE, timeout=360)
    assert seen["succeeded"] is True and seen["counts"] == [4, 4]
    assert seen["trial_kind"] == "Job" and seen["command"] == ["bash", "-c"]
    assert seen["parameters"] == [["a", "int"], ["lr", "double"]]
    results = seen["all"]
    assert len(results) == 4
    best_value = max(float(metric[0][1]) for _, metric in results)
    assert seen["metric"][0][0] == "result" and float(seen["metric"][0][1]) == best_value
    a, lr = int(seen["assignments"]["a"]), float(seen["assignments"]["lr"])
    assert 1 <= a <= 5 and 0.001 <= lr <= 0.1
    assert abs(best_value - (-(a - 3) ** 2 - abs(math.log10(lr) + 2))) < 1e-5

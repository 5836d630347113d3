"""Katib Experiments through ``millpond apply`` and ``kubectl``: real supervisors, real batch Jobs whose pods are
host processes printing ``loss=...`` from their parameters (a shifted quadratic, least at x = 2), as Katib's
StdOut collector reads them.

An Experiment reaches Succeeded with its counts and currentOptimalTrial; parallelTrialCount is never
exceeded; the goal ends it early; failing trials are counted and maxFailedTrialCount ends it Failed; a metric
never printed makes the Trial MetricsUnavailable (not hung); retain false deletes the trial's job; a kill -9
of the supervisor mid-run resumes with no trial lost or run twice; resumePolicy LongRunning restarts by a
raised maxTrialCount (and Never refuses it); bad input is one error line naming the field, nothing stored.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond.katib.objects import supervisors
from millpond.store.resources import ResourceStore

PY = sys.executable
# The trial prints its loss from x (a shifted quadratic) and records that it ran (to tell a trial run twice).
QUADRATIC = ("import os,sys; x=float(sys.argv[1]); open(os.environ['RUNS'],'a').write(sys.argv[2]+'\\n'); "
             "print(f'loss={(x-2)**2:.6f}')")


def experiment(name: str, *, runs: Path, script: str = QUADRATIC, max_trials: int = 4, parallel: int = 2,
               **spec: Any) -> dict[str, Any]:
    template = spec.pop("trialTemplate", {})
    container = {"name": "training-container", "image": "python:3.12",
                 "command": [PY, "-c", script, "${trialParameters.x}", "${trialParameters.trial}"],
                 "env": [{"name": "RUNS", "value": str(runs)}]}
    return {
        "apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": name},
        "spec": {
            "objective": {"type": "minimize", "objectiveMetricName": "loss", **spec.pop("objective", {})},
            "algorithm": {"algorithmName": "random", "algorithmSettings": [{"name": "random_state", "value": "7"}]},
            "parallelTrialCount": parallel, "maxTrialCount": max_trials,
            "parameters": [{"name": "x", "parameterType": "double", "feasibleSpace": {"min": "-4", "max": "6"}}],
            "trialTemplate": {
                "primaryContainerName": "training-container",
                "trialParameters": [{"name": "x", "reference": "x"},
                                    {"name": "trial", "reference": "${trialSpec.Name}"}],
                "trialSpec": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {
                    "containers": [container], "restartPolicy": "Never"}}}},
                **template,
            },
            **spec,
        },
    }


def apply(cli: Callable[..., Any], tmp_path: Path, doc: dict[str, Any]) -> Any:
    path = tmp_path / f"experiment-{time.monotonic_ns()}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return cli("apply", "-f", path)


def shown(cli: Callable[..., Any], kind: str, name: str) -> dict[str, Any]:
    result = cli("get", kind, name, "-o", "json")
    assert result.code == 0, result.err
    found: dict[str, Any] = json.loads(result.out)
    return found


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((one for one in (obj.get("status") or {}).get("conditions") or []
                 if one["type"] == kind and one["status"] == "True"), None)


def until_done(cli: Callable[..., Any], name: str, timeout: float = 90,
               watch: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = shown(cli, "experiment", name)
        if watch is not None:
            watch(found)
        if condition(found, "Succeeded") or condition(found, "Failed"):
            return found
        time.sleep(0.3)
    raise AssertionError(f"experiment {name} did not finish: {json.dumps(found.get('status'))}")


def ran(runs: Path) -> list[str]:
    return runs.read_text().split() if runs.exists() else []


def test_an_experiment_of_batch_job_trials_succeeds_with_its_optimal_trial(cli: Any, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    assert apply(cli, tmp_path, experiment("quad", runs=runs)).code == 0
    most_running = 0

    def watch(found: dict[str, Any]) -> None:
        nonlocal most_running
        most_running = max(most_running, int(found["status"].get("trialsRunning") or 0)
                           + int(found["status"].get("trialsPending") or 0))

    deadline = time.monotonic() + 30
    while not condition(shown(cli, "experiment", "quad"), "Running") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert condition(shown(cli, "experiment", "quad"), "Running") and supervisors("default", "quad")  # live
    done = until_done(cli, "quad", watch=watch)
    status = done["status"]
    assert condition(done, "Succeeded")["reason"] == "ExperimentMaxTrialsReached"
    assert (status["trials"], status["trialsSucceeded"], status["trialsFailed"]) == (4, 4, 0)
    assert most_running <= 2  # parallelTrialCount
    best = status["currentOptimalTrial"]
    [x] = [float(one["value"]) for one in best["parameterAssignments"] if one["name"] == "x"]
    [loss] = [one for one in best["observation"]["metrics"] if one["name"] == "loss"]
    assert float(loss["latest"]) == pytest.approx((x - 2) ** 2, abs=1e-5)
    trials = json.loads(cli("get", "trials", "-o", "json").out)["items"]
    assert sorted(one["metadata"]["name"] for one in trials) == sorted(ran(runs))  # each ran once
    assert all(one["metadata"]["name"].startswith("quad-") and len(one["metadata"]["name"]) == 13 for one in trials)
    losses = [float(next(m["latest"] for m in one["status"]["observation"]["metrics"])) for one in trials]
    assert float(loss["latest"]) == min(losses)
    assert done["spec"]["resumePolicy"] == "Never"  # Katib's defaults, written in
    assert done["spec"]["metricsCollectorSpec"]["collector"]["kind"] == "StdOut"
    suggestion = shown(cli, "suggestion", "quad")
    assert suggestion["status"]["suggestionCount"] == 4
    ended = condition(suggestion, "Succeeded")  # resumePolicy Never: the Suggestion ends with its Experiment
    assert ended is not None and ended["message"] == "Suggestion is succeeded, can't be restarted"
    assert [one["type"] for one in done["status"]["conditions"]] == ["Created", "Running", "Succeeded"]
    assert cli("get", "jobs", "-o", "json").out.count('"kind": "Job"') == 0  # retain false: jobs deleted
    deadline = time.monotonic() + 30
    while supervisors("default", "quad") and time.monotonic() < deadline:  # finished: its supervisor leaves
        time.sleep(0.1)
    assert supervisors("default", "quad") == []


def test_the_goal_ends_the_experiment_early(cli: Any, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    doc = experiment("goal", runs=runs, max_trials=20, parallel=1, objective={"goal": 100.0})
    assert apply(cli, tmp_path, doc).code == 0
    done = until_done(cli, "goal")
    assert condition(done, "Succeeded")["reason"] == "ExperimentGoalReached"
    assert done["status"]["trials"] < 20


def test_failing_trials_end_it_failed_at_max_failed_trial_count(cli: Any, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    doc = experiment("fails", runs=runs, script="import sys; sys.exit(3)", max_trials=5, parallel=1,
                     maxFailedTrialCount=2)
    doc["spec"]["trialTemplate"]["trialSpec"]["spec"]["backoffLimit"] = 0
    assert apply(cli, tmp_path, doc).code == 0
    done = until_done(cli, "fails")
    assert condition(done, "Failed")["reason"] == "ExperimentFailed"
    assert done["status"]["trialsFailed"] == 2
    for trial in json.loads(cli("get", "trials", "-o", "json").out)["items"]:  # each says why, from its Job
        failed = condition(trial, "Failed")
        assert failed is not None and failed["reason"] == "TrialFailed. Job reason: BackoffLimitExceeded", failed
        assert failed["message"] == "Trial has failed. Job message: Job has reached the specified backoff limit"


def test_a_metric_never_printed_makes_the_trial_metrics_unavailable(cli: Any, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    doc = experiment("silent", runs=runs, script="print('nothing to see')", max_trials=1, parallel=1)
    assert apply(cli, tmp_path, doc).code == 0
    done = until_done(cli, "silent")
    assert done["status"]["trialMetricsUnavailable"] == 1
    [trial] = json.loads(cli("get", "trials", "-o", "json").out)["items"]
    unavailable = condition(trial, "MetricsUnavailable")
    assert unavailable is not None and "loss not reported" in unavailable["message"]


def test_a_killed_supervisor_resumes_without_losing_or_repeating_a_trial(cli: Any, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    slow = "import time; time.sleep(1.5); " + QUADRATIC
    assert apply(cli, tmp_path, experiment("resume", runs=runs, script=slow, max_trials=6, parallel=2)).code == 0
    deadline = time.monotonic() + 30
    while not ran(runs) and time.monotonic() < deadline:
        time.sleep(0.1)
    [record] = supervisors("default", "resume")
    os.kill(record.pid, signal.SIGKILL)
    time.sleep(1.0)  # trials keep running (their jobs' own controllers) while nothing supervises the Experiment
    assert apply(cli, tmp_path, experiment("resume", runs=runs, script=slow, max_trials=6, parallel=2)).code == 0
    [again] = supervisors("default", "resume")  # the apply started another (as millpond server's reconcile does)
    assert again.pid != record.pid
    done = until_done(cli, "resume")
    assert done["status"]["trialsSucceeded"] == 6
    names = [one["metadata"]["name"] for one in json.loads(cli("get", "trials", "-o", "json").out)["items"]]
    assert sorted(ran(runs)) == sorted(names) and len(set(names)) == 6  # every trial ran exactly once


def test_long_running_restarts_when_max_trial_count_is_raised(cli: Any, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    doc = experiment("longrun", runs=runs, max_trials=2, parallel=2, resumePolicy="LongRunning")
    assert apply(cli, tmp_path, doc).code == 0
    assert condition(until_done(cli, "longrun"), "Succeeded")["reason"] == "ExperimentMaxTrialsReached"
    doc["spec"]["maxTrialCount"] = 4
    assert apply(cli, tmp_path, doc).code == 0
    deadline = time.monotonic() + 60
    while shown(cli, "experiment", "longrun")["status"]["trialsSucceeded"] < 4:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    done = until_done(cli, "longrun")
    # Katib's order: a condition that changes moves last (Running False before Succeeded, the printer's column)
    assert [one["type"] for one in done["status"]["conditions"]] == ["Created", "Restarting", "Running", "Succeeded"]
    assert shown(cli, "suggestion", "longrun")["status"]["conditions"][-1]["type"] == "Running"  # LongRunning: kept
    never = experiment("never", runs=runs, max_trials=1, parallel=1)
    assert apply(cli, tmp_path, never).code == 0
    until_done(cli, "never")
    never["spec"]["maxTrialCount"] = 3
    refused = apply(cli, tmp_path, never)
    assert refused.code == 2 and "spec.resumePolicy" in refused.err


@pytest.mark.parametrize(("change", "field"), [
    (lambda spec: spec["algorithm"].update(algorithmName="nonesuch"), "spec.algorithm.algorithmName"),
    (lambda spec: spec["parameters"][0]["feasibleSpace"].update(min="9"), "spec.parameters[0]"),
    (lambda spec: spec.update(maxTrialCount=1_000_000), "spec.maxTrialCount"),
    (lambda spec: spec.update(parallelTrialCount=0), "spec.parallelTrialCount"),
    (lambda spec: spec["trialTemplate"]["trialParameters"].append({"name": "nope", "reference": "y"}),
     "spec.trialTemplate"),
    (lambda spec: spec["objective"].update(type="sideways"), "spec.objective.type"),
    (lambda spec: spec.update(nasConfig={"graphConfig": {"numLayers": 2}}), "spec.nasConfig"),
])
def test_bad_input_is_one_line_naming_the_field_and_nothing_is_stored(cli: Any, tmp_path: Path,
                                                                      change: Callable[[dict[str, Any]], None],
                                                                      field: str) -> None:
    doc = experiment("bad", runs=tmp_path / "runs")
    change(doc["spec"])
    result = apply(cli, tmp_path, doc)
    assert result.code == 2
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and field in lines[0], result.err
    assert ResourceStore().list("Experiment", None) == []


def test_a_pytorchjob_trial_reads_its_metrics_from_the_master(cli: Any, tmp_path: Path) -> None:
    """A PyTorchJob trial (Master + Worker): Katib's defaults pick the master's pod
    (``training.kubeflow.org/job-role: master``) and the ``pytorch`` container; only the master prints the loss."""
    runs = tmp_path / "runs"
    script = ("import os,sys; x=float(sys.argv[1]); master=os.environ.get('RANK','0')=='0'; "
              "master and open(os.environ['RUNS'],'a').write(sys.argv[2]+'\\n'); "
              "print(f'loss={(x-2)**2:.6f}' if master else 'loss=1000000')")
    container = {"name": "pytorch", "image": "python:3.12",
                 "command": [PY, "-c", script, "${trialParameters.x}", "${trialParameters.trial}"],
                 "env": [{"name": "RUNS", "value": str(runs)}]}
    replica = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}
    doc = experiment("torch", runs=runs, max_trials=2, parallel=2)
    template = doc["spec"]["trialTemplate"]
    template.pop("primaryContainerName")
    template["trialSpec"] = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": {
        "pytorchReplicaSpecs": {"Master": replica, "Worker": replica}}}
    assert apply(cli, tmp_path, doc).code == 0
    done = until_done(cli, "torch", timeout=120)
    assert condition(done, "Succeeded")["reason"] == "ExperimentMaxTrialsReached", done["status"]
    assert done["spec"]["trialTemplate"]["primaryPodLabels"] == {"training.kubeflow.org/job-role": "master"}
    assert done["status"]["trialsSucceeded"] == 2
    best = done["status"]["currentOptimalTrial"]
    [x] = [float(one["value"]) for one in best["parameterAssignments"] if one["name"] == "x"]
    [loss] = [one for one in best["observation"]["metrics"] if one["name"] == "loss"]
    assert float(loss["latest"]) == pytest.approx((x - 2) ** 2, abs=1e-5)  # the master's, never the worker's
    trial = shown(cli, "trial", best["bestTrialName"])
    assert trial["spec"]["runSpec"]["kind"] == "PyTorchJob" and trial["spec"]["primaryContainerName"] == "pytorch"

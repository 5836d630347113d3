"""``millpond.katib.components.katib_experiment`` (Katib's launcher component) in real compiled pipelines: an
Experiment run by a task that holds every CPU while its trials need theirs, whose best parameters the next task
takes as inputs; a Failed experiment failing its task with the reason; a refused spec failing it with Katib's
one line, nothing created; a retried task waiting again for its own experiment and never taking over another's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kfp import compiler, components

from millpond.errors import ConflictError, UserError
from millpond.katib import pipeline_step
from millpond.katib.components import katib_experiment
from millpond.katib.kinds import EXPERIMENT
from millpond.kind_handler import KindContext
from millpond.kinds import REGISTRY
from millpond.settings import load_settings
from tests.conftest import task
from tests.katib_pipeline import pipelines

pytestmark = pytest.mark.timeout(300)
STEP = "katib-experiment"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("katib-step")
    found = {}
    for name in ("tune_then_train", "tune_fails", "tune_refused"):
        found[name] = folder / f"{name}.yaml"
        compiler.Compiler().compile(getattr(pipelines, name), str(found[name]))
    return found


def experiments() -> dict[str, dict[str, Any]]:
    listed = REGISTRY.handler(EXPERIMENT).list_objects(EXPERIMENT, "", True, KindContext(load_settings()))
    return {one["metadata"]["name"]: one for one in listed}


def test_the_best_parameters_of_an_experiment_feed_the_next_task(cli: Any, compiled: dict[str, Path],
                                                                  home: Path) -> None:
    result = cli("run", compiled["tune_then_train"], "-o", "json")
    run = result.json()
    assert result.code == 0 and run["state"] == "SUCCEEDED", (run, result.err)
    outputs = task(run, STEP)["outputs"]
    best, optimal = outputs["best_parameters"], outputs["best_parameter_set"]
    # the launcher's "Best Parameter Set": currentOptimalTrial as Katib writes it
    assert set(optimal) >= {"bestTrialName", "parameterAssignments", "observation"}
    assert optimal["bestTrialName"].startswith("quad-")
    assert best == {one["name"]: one["value"] for one in optimal["parameterAssignments"]} and set(best) == {"x"}
    (metric,) = optimal["observation"]["metrics"]
    assert metric["name"] == "loss" and abs(float(metric["min"]) - (float(best["x"]) - 2) ** 2) < 1e-5
    assert run["outputs"] == {"Output": f"trained with x={float(best['x'])} from {optimal['bestTrialName']}"}
    log = Path(task(run, STEP)["log"]).read_text()
    assert "gave back this task's resources" in log, log  # else the trials would wait for its CPUs for ever
    assert "experiment.kubeflow.org/quad created" in log and "Succeeded: 4 succeeded" in log, log
    assert "quad" not in experiments()  # delete_finished_experiment (the default): deleted once finished


def test_a_failed_experiment_fails_its_task_with_the_reason(cli: Any, compiled: dict[str, Path], home: Path) -> None:
    result = cli("run", compiled["tune_fails"], "-o", "json")
    run = result.json()
    assert result.code == 1 and run["state"] == "FAILED", run
    step = task(run, STEP)
    assert step["state"] == "FAILED"
    assert "experiment broken Failed: ExperimentFailed" in step["error"], step["error"]
    assert not [t for t in run["tasks"] if t["name"] == "train-with" and t["state"] == "SUCCEEDED"]
    kept = experiments()["broken"]  # delete_finished_experiment=False: kept, Failed, for a look at its trials
    assert any(c["type"] == "Failed" and c["status"] == "True" for c in kept["status"]["conditions"])
    assert kept["status"]["trialsFailed"] >= 2
    assert not (kept["status"].get("currentOptimalTrial") or {}).get("bestTrialName")


def test_a_refused_spec_fails_its_task_with_one_line_and_nothing_is_created(cli: Any, compiled: dict[str, Path],
                                                                             home: Path) -> None:
    result = cli("run", compiled["tune_refused"], "-o", "json")
    run = result.json()
    assert result.code == 1 and run["state"] == "FAILED", run
    error = task(run, STEP)["error"]
    assert "spec.algorithm.algorithmName" in error and "annealing" in error, error
    assert "Traceback" not in error and "refused" not in experiments()


def test_a_retried_task_waits_for_its_own_experiment_and_never_takes_over_another(
        cli: Any, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = tmp_path / "taken.json"
    made.write_text(json.dumps({"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment",
                                "metadata": {"name": "taken"}, "spec": pipelines.spec(pipelines.QUADRATIC)}))
    assert cli("apply", "-f", made).code == 0
    monkeypatch.setenv("MILLPOND_RUN_ID", "run-1")
    monkeypatch.setenv("MILLPOND_TASK_ID", "task-1")
    inputs = pipeline_step.ExperimentInputs(pipelines.spec(pipelines.QUADRATIC, max_trials=2), "taken",
                                            delete_finished_experiment=False)
    with pytest.raises(ConflictError, match="created by kubectl, the SDK or a manifest"):
        pipeline_step.run_step(inputs)
    mine = pipeline_step.ExperimentInputs(inputs.experiment_spec, "mine", delete_finished_experiment=False)
    first = pipeline_step.run_step(mine)
    uid = experiments()["mine"]["metadata"]["uid"]
    again = pipeline_step.run_step(mine)  # the task's retry: the same experiment, waited for, not made again
    assert first == again and experiments()["mine"]["metadata"]["uid"] == uid
    assert experiments()["mine"]["status"]["trials"] == 2
    monkeypatch.setenv("MILLPOND_RUN_ID", "run-2")
    with pytest.raises(ConflictError, match="created by run run-1"):
        pipeline_step.run_step(mine)


@pytest.mark.parametrize(("values", "words"), [
    ({"experiment_spec": {}}, "experiment_spec: an Experiment's spec"),
    ({"experiment_spec": "objective: {}"}, "experiment_spec: an Experiment's spec"),
    ({"experiment_spec": {"objective": {}}, "experiment_timeout_minutes": 0}, "experiment_timeout_minutes 0"),
    ({"experiment_spec": {"objective": {}}, "experiment_name": "Not_A_Name"}, "experiment_name 'Not_A_Name'"),
    ({"experiment_spec": {"objective": {}}, "experiment_namespace": "a b"}, "experiment_namespace 'a b'"),
])
def test_bad_inputs_are_one_line_naming_the_input(values: dict[str, Any], words: str) -> None:
    with pytest.raises(UserError, match="^" + words.replace("(", r"\(")):
        pipeline_step.step_inputs(**values)


def test_the_component_round_trips_through_a_component_file(tmp_path: Path) -> None:
    path = tmp_path / "katib_experiment.yaml"
    compiler.Compiler().compile(katib_experiment, str(path))
    loaded = components.load_component_from_file(str(path))
    inputs = loaded.component_spec.inputs or {}
    assert set(inputs) == {"experiment_name", "experiment_namespace", "experiment_spec", "experiment_timeout_minutes",
                           "delete_finished_experiment"}
    assert set(loaded.component_spec.outputs or {}) == {"best_parameter_set", "best_parameters"}

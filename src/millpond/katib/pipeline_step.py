"""What the ``katib_experiment`` KFP component does inside its task: run a Katib Experiment, output its best trial.

Katib's own launcher component (``components/kubeflow-katib-launcher`` of kubeflow/katib, removed after v0.16)
takes the experiment's name, namespace and spec, a timeout in minutes and whether to delete the finished
experiment; it creates the Experiment, waits until it is Succeeded or Failed, and writes
``currentOptimalTrial`` (``bestTrialName``, ``parameterAssignments``, ``observation``) as its output
"Best Parameter Set". This step does the same on the host, in the engine's environment:

- **The same Experiment as ``millpond apply -f``**: the spec under ``apiVersion: kubeflow.org/v1beta1``,
  checked and stored through the kinds registry (Katib's defaulting and validation: a bad spec fails the task
  with the one line ``kubectl apply`` would print, nothing created), labelled with the run and task that made it.
- **A retried task waits again** for the Experiment an earlier attempt of the same run created under that name;
  one made by anyone else (no run label, or another run's) is never touched, and the task fails naming it, as
  the launcher's create fails with 409.
- **No deadlock over resources**: the trials ask the ledger for their own; the task gives its grant back, as
  ``train_job`` does.
- **The outputs**: ``best_parameter_set``, ``currentOptimalTrial`` as Katib writes it (the launcher's output),
  and ``best_parameters``, its assignments as ``{name: value}`` (strings, as Katib's), which a next task takes
  as its inputs. A Failed experiment, or one that ended with no optimal trial, fails the task with its condition's
  reason and message (the launcher logged it and wrote nothing, which failed its task for want of an output).
- **Cancelling the run** (SIGTERM, SIGINT, SIGHUP) stops the wait within a poll; the experiment is deleted
  (its trials with it) when ``delete_finished_experiment`` is set, else left as it is.
- **Timeout**: past ``experiment_timeout_minutes`` the task fails; the experiment stays (the launcher's too).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Any

from millpond.datasets.schema_check import check_schema_file
from millpond.errors import ConflictError, NotFoundError, TaskFailure, UserError
from millpond.katib.kinds import API_VERSION, EXPERIMENT
from millpond.kind_handler import ApplyBatch, KindContext
from millpond.kinds import REGISTRY
from millpond.names import label_problem
from millpond.runners.environment import RUN_ID_ENV, TASK_ID_ENV
from millpond.runners.stopping import StopFlag
from millpond.scheduling import GRANT_ENV, Ledger
from millpond.settings import load_settings
from millpond.store import config_documents
from millpond.store.secrets import ConfigStore

RUN_LABEL = "pipelines.kubeflow.org/run_id"  # as train_job and deploy_model label what they make
TASK_LABEL = "pipelines.kubeflow.org/task_id"
POLL_S = 0.5
FINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class ExperimentInputs:
    """The component's inputs, as Katib's launcher names them."""

    experiment_spec: dict[str, Any]
    experiment_name: str = ""
    experiment_namespace: str = "default"
    experiment_timeout_minutes: float = 60 * 24
    delete_finished_experiment: bool = True


@dataclass(frozen=True)
class StepResult:
    best_parameter_set: dict[str, Any]  # currentOptimalTrial, as Katib writes it
    best_parameters: dict[str, str]  # its parameterAssignments as {name: value}


def experiment_name(inputs: ExperimentInputs, run_id: str) -> str:
    """The name asked, else ``tune-`` and the run's id's first 8 characters (a DNS label led by a letter)."""
    if inputs.experiment_name.strip():
        return inputs.experiment_name.strip()
    return f"tune-{re.sub(r'[^a-z0-9]', '', run_id.lower())[:8] or 'local'}"


def manifest(inputs: ExperimentInputs, run_id: str, task_id: str) -> dict[str, Any]:
    """The Experiment the inputs describe, labelled with the run and task that run it."""
    labels = {key: value for key, value in ((RUN_LABEL, run_id), (TASK_LABEL, task_id)) if value}
    return {"apiVersion": API_VERSION, "kind": "Experiment",
            "metadata": {"name": experiment_name(inputs, run_id), "namespace": inputs.experiment_namespace,
                         **({"labels": labels} if labels else {})},
            "spec": inputs.experiment_spec}


def _context() -> KindContext:
    return KindContext(load_settings())


def _get(name: str, namespace: str) -> dict[str, Any] | None:
    entry = EXPERIMENT
    try:
        return REGISTRY.handler(entry).get(entry, name, namespace, _context())
    except NotFoundError:
        return None


def _apply(body: dict[str, Any]) -> None:
    """Check and store the Experiment as ``millpond apply -f`` does (UserError: nothing stored)."""
    settings = load_settings()
    batch = ApplyBatch(KindContext(settings), check_schema_file,
                       config_documents.batch_lookup([], ConfigStore(settings.home)))
    for plan in REGISTRY.plan([("the experiment_spec input", 1, body)], batch):
        for applied in plan.apply(batch).applied:
            print(applied.message, flush=True)


def _delete(name: str, namespace: str) -> None:
    entry = EXPERIMENT
    REGISTRY.handler(entry).delete(entry, name, namespace, _context())
    print(f"deleted experiment {namespace}/{name}", flush=True)


def run_step(inputs: ExperimentInputs) -> StepResult:
    """Create the Experiment (or find this run's), give back the task's grant, wait for its end: the best trial."""
    stop = StopFlag()
    with stop.installed():
        return _run(inputs, stop)


def _run(inputs: ExperimentInputs, stop: StopFlag) -> StepResult:
    run_id, task_id = os.environ.get(RUN_ID_ENV, ""), os.environ.get(TASK_ID_ENV, "")
    body = manifest(inputs, run_id, task_id)
    name, namespace = body["metadata"]["name"], body["metadata"]["namespace"]
    existing = _get(name, namespace)
    if existing is not None:
        owner = ((existing.get("metadata") or {}).get("labels") or {}).get(RUN_LABEL)
        if not run_id or owner != run_id:
            whose = f"run {owner}" if owner else "kubectl, the SDK or a manifest"
            raise ConflictError(f"the Experiment {name} already exists in namespace {namespace} (created by {whose}): "
                                "give the step another experiment_name, or delete that experiment")
        print(f"waiting again for experiment {namespace}/{name}, which an earlier attempt of this run created",
              flush=True)
    else:
        _apply(body)
    _give_back_grant()
    experiment = _wait(name, namespace, inputs, stop)
    condition = _final_condition(experiment)
    optimal = (experiment.get("status") or {}).get("currentOptimalTrial") or {}
    try:
        if condition.get("type") == "Failed":
            raise TaskFailure(f"experiment {name} Failed: {condition.get('reason', '')}: "
                              f"{condition.get('message', '')}")
        if not optimal.get("bestTrialName"):
            raise TaskFailure(f"experiment {name} Succeeded with no optimal trial (no trial reported the objective "
                              "metric)")
    finally:
        if inputs.delete_finished_experiment:
            _delete(name, namespace)
    best = {str(item.get("name")): str(item.get("value")) for item in optimal.get("parameterAssignments") or []}
    print(f"best trial {optimal['bestTrialName']}: {best}", flush=True)
    return StepResult(dict(optimal), best)


def _final_condition(experiment: dict[str, Any]) -> dict[str, Any]:
    """The experiment's Succeeded or Failed condition when one is True, else {}."""
    for condition in (experiment.get("status") or {}).get("conditions") or []:
        if condition.get("type") in FINAL and str(condition.get("status")) == "True":
            return dict(condition)
    return {}


def _wait(name: str, namespace: str, inputs: ExperimentInputs, stop: StopFlag) -> dict[str, Any]:
    """The experiment once Succeeded or Failed (TaskFailure: deleted meanwhile, timed out, the run cancelled)."""
    deadline = time.monotonic() + inputs.experiment_timeout_minutes * 60
    said = ""
    while True:
        experiment = _get(name, namespace)
        if experiment is None:
            raise TaskFailure(f"experiment {name} was deleted while its pipeline task waited for it")
        status = experiment.get("status") or {}
        now = (f"{status.get('trialsSucceeded', 0)} succeeded, {status.get('trialsRunning', 0)} running, "
               f"{status.get('trialsFailed', 0)} failed")
        final = _final_condition(experiment)
        state = f"{final.get('type', 'Running')}: {now}"
        if state != said:
            said = state
            print(state, flush=True)
        if final:
            return experiment
        if time.monotonic() >= deadline:
            raise TaskFailure(f"experiment {name}: not finished after {inputs.experiment_timeout_minutes:g} minutes "
                              f"({now}); it keeps running: kubectl get experiment {name} -n {namespace}")
        if stop.event.wait(POLL_S):
            if inputs.delete_finished_experiment:
                _delete(name, namespace)
            raise TaskFailure(f"experiment {name}: stopped waiting because its pipeline task got {stop.signal}")


def _give_back_grant() -> None:
    """Release the ledger grant the engine holds for this task: the trials ask for their own."""
    grant = os.environ.get(GRANT_ENV, "")
    if grant:
        Ledger().release(grant)
        print("gave back this task's resources: the trials ask for their own", flush=True)


def whole_numbers(value: Any) -> Any:
    """``value`` with every float that is a whole number as an int. A KFP ``dict`` input travels as a protobuf
    Struct, whose numbers are all doubles: ``maxTrialCount: 4`` arrives as 4.0, which Katib's webhook (Go's JSON
    into an int32) refuses; the launcher's SDK turned them back into ints when it deserialized the spec."""
    if isinstance(value, dict):
        return {key: whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def step_inputs(**values: Any) -> ExperimentInputs:
    """``ExperimentInputs`` from the component's arguments (numbers as KFP hands them over: 2.0 for 2)."""
    spec = values.pop("experiment_spec", None)
    if not isinstance(spec, dict) or not spec:
        raise UserError("experiment_spec: an Experiment's spec (a dict: objective, algorithm, parameters, "
                        "trialTemplate...), not " + (type(spec).__name__ if spec is not None else "nothing"))
    try:
        timeout = float(values.pop("experiment_timeout_minutes", 60 * 24))
    except (TypeError, ValueError):
        raise UserError("experiment_timeout_minutes: a number of minutes") from None
    if not timeout > 0:
        raise UserError(f"experiment_timeout_minutes {timeout:g}: more than 0")
    name = str(values.pop("experiment_name", "") or "").strip()
    problem = label_problem(name) if name else None
    if problem:
        raise UserError(f"experiment_name {name!r}: {problem}")
    namespace = str(values.pop("experiment_namespace", "") or "default").strip()
    problem = label_problem(namespace)
    if problem:
        raise UserError(f"experiment_namespace {namespace!r}: {problem}")
    return ExperimentInputs(experiment_spec=whole_numbers(spec), experiment_name=name, experiment_namespace=namespace,
                            experiment_timeout_minutes=timeout,
                            delete_finished_experiment=bool(values.pop("delete_finished_experiment", True)))


def main(**values: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The component's body: ``(best_parameter_set, best_parameters)``; a Failed experiment or bad inputs fail
    the task."""
    result = run_step(step_inputs(**values))
    return result.best_parameter_set, result.best_parameters

"""Katib's success/failure conditions (the GJSON subset) over the statuses millpond writes for each trial kind."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from millpond.katib import conditions, gjson
from millpond.katib.conditions import default_conditions, default_primary, matched_condition, matches
from millpond.store.training import JobRecord
from millpond.training import conditions as training_conditions
from millpond.training.batch.status import with_condition
from tests.katib_lib.katib_lib_support import at, corpus_experiments

ARGO_SUCCESS = 'status.[@this].#(phase=="Succeeded")#'
ARGO_FAILURE = 'status.[@this].#(phase=="Failed")#'


def batch_job(*conditions_: tuple[str, str]) -> dict[str, Any]:
    """A batch/v1 Job's status as millpond's batch supervisor writes it (training/batch/status.py)."""
    found: list[dict[str, Any]] = []
    for kind, reason in conditions_:
        found = with_condition(found, kind, reason, f"{kind} because {reason}")
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "t"},
            "status": {"active": 0 if conditions_ else 1, "conditions": found} if found else {"active": 1}}


def training_job(kind: str, status: str) -> dict[str, Any]:
    """A Kubeflow job's status as millpond's training supervisor writes it (training/conditions.py)."""
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    record = JobRecord(uid="u", name="t", namespace="ns", trainer="pytorchjob", spec={"manifest": {"kind": kind}},
                       status=status, reason=None, message=None, created_at=now,
                       started_at=now if status != "QUEUING" else None,
                       finished_at=now if status in ("SUCCEEDED", "FAILED") else None,
                       supervisor_pid=None, supervisor_start=None, attempt=0, gpus=())
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "status": {"conditions": training_conditions.conditions(
        record)}}


@pytest.mark.parametrize(("obj", "succeeded", "failed"), [
    (batch_job(), False, False),
    (batch_job(("SuccessCriteriaMet", "CompletionsReached"), ("Complete", "CompletionsReached")), True, False),
    (batch_job(("FailureTarget", "BackoffLimitExceeded"), ("Failed", "BackoffLimitExceeded")), False, True),
])
def test_batch_job_defaults(obj: dict[str, Any], succeeded: bool, failed: bool) -> None:
    success, failure = default_conditions("batch/v1", "Job")
    assert (matches(success, obj), matches(failure, obj)) == (succeeded, failed)


@pytest.mark.parametrize("kind", ["PyTorchJob", "TFJob", "XGBoostJob", "MPIJob"])
@pytest.mark.parametrize(("status", "succeeded", "failed"), [
    ("QUEUING", False, False), ("RUNNING", False, False), ("SUCCEEDED", True, False), ("FAILED", False, True)])
def test_kubeflow_job_defaults(kind: str, status: str, succeeded: bool, failed: bool) -> None:
    success, failure = default_conditions("kubeflow.org/v1", kind)
    obj = training_job(kind, status)
    assert (matches(success, obj), matches(failure, obj)) == (succeeded, failed)


def test_trainjob_defaults_read_complete() -> None:
    success, failure = default_conditions("trainer.kubeflow.org/v1alpha1", "TrainJob")
    obj = training_job("TrainJob", "SUCCEEDED")
    assert matches(success, obj) and not matches(failure, obj)
    assert default_primary("TrainJob") == ("node", {"jobset.sigs.k8s.io/replicatedjob-name": "node",
                                                    "batch.kubernetes.io/job-completion-index": "0"})


def test_the_matched_condition_gives_reason_and_message() -> None:
    obj = batch_job(("FailureTarget", "BackoffLimitExceeded"), ("Failed", "BackoffLimitExceeded"))
    found = matched_condition(default_conditions("batch/v1", "Job")[1], obj)
    assert found is not None and found["reason"] == "BackoffLimitExceeded" and found["message"]
    assert matched_condition(default_conditions("batch/v1", "Job")[0], obj) is None


def test_a_condition_that_is_false_does_not_match() -> None:
    obj = {"status": {"conditions": [{"type": "Complete", "status": "False"}]}}
    assert not matches(conditions.JOB_SUCCESS, obj)


def test_argo_and_tekton_forms_of_the_corpus() -> None:
    assert matches(ARGO_SUCCESS, {"status": {"phase": "Succeeded"}})
    assert not matches(ARGO_FAILURE, {"status": {"phase": "Succeeded"}})
    assert not matches(ARGO_SUCCESS, {"status": {}})
    assert not matches(ARGO_SUCCESS, {})
    tekton_failure = 'status.conditions.#(type=="Succeeded")#|#(status=="False")#'
    run = {"status": {"conditions": [{"type": "Succeeded", "status": "False", "reason": "Failed"}]}}
    assert matches(tekton_failure, run) and not matches(conditions.KUBEFLOW_SUCCESS, run)
    for _name, experiment in corpus_experiments():
        template = experiment["spec"]["trialTemplate"]
        for key in ("successCondition", "failureCondition"):
            if key in template:
                conditions.validate(template[key], f"spec.trialTemplate.{key}")


def test_default_primary_per_kind() -> None:
    assert default_primary("PyTorchJob") == ("pytorch", {"training.kubeflow.org/job-role": "master"})
    assert default_primary("Job") == (None, {})
    assert default_conditions("argoproj.io/v1alpha1", "Workflow") == ("", "")


DOC = {"status": {"conditions": [{"type": "Complete", "status": "True", "n": 3, "ok": True},
                                 {"type": "Failed", "status": "False", "n": 1, "ok": False, "x.y": "dot"}]},
       "list": ["fb", "tw"]}


@pytest.mark.parametrize(("path", "expected"), [
    ("status.conditions.#", 2),
    ("status.conditions.#.type", ["Complete", "Failed"]),
    ("status.conditions.1.type", "Failed"),
    ("status.conditions.#(n>2).type", "Complete"),
    ("status.conditions.#(n>=1)#.type", ["Complete", "Failed"]),
    ("status.conditions.#(n<3)#|#", 1),
    ('status.conditions.#(type%"Comp*").status', "True"),
    ('status.conditions.#(type!%"Comp*").status', "False"),
    ("status.conditions.#(ok==true).type", "Complete"),
    ("status.conditions.#(ok==false).type", "Failed"),
    ("status.conditions.#(x\\.y).type", "Failed"),
    ("status.cond*.0.type", "Complete"),
    ("status.conditio?s.#", 2),
    ('list.#(=="tw")', "tw"),
    ('status.conditions.#(type=="None")', None),
    ('status.conditions.#(type=="None")#', []),
    ("status.[@this,missing,conditions.#]", [DOC["status"], 2]),
    ("status.conditions.#(type==Complete).n", 3),  # GJSON reads an unquoted value as text
    ("missing.#", None),
    ("status.conditions.5", None),
])
def test_gjson_subset(path: str, expected: Any) -> None:
    assert gjson.get(path, DOC) == expected


@pytest.mark.parametrize("expression", [
    "", "status..conditions", "status.", ".status", "status.conditions.#(", "status.conditions.#(type==\"x)",
    "status.@reverse", "{a,b}", "status.conditions.#(type==~true)", "status.conditions.#(!(type==\"x\"))",
    "..status", "status.[a,", "status.#()", "status.a[b]", 'status.#(type=={"a": 1})', "x" * 3000,
])
def test_outside_the_subset_is_one_user_error_naming_the_field(expression: str) -> None:
    with at("spec.trialTemplate.successCondition"):
        conditions.validate(expression, "spec.trialTemplate.successCondition")

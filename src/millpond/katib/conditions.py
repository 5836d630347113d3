"""A trial's success and failure conditions, and Katib's defaults for each trial kind.

Katib's trial controller evaluates ``failureCondition`` then ``successCondition`` with GJSON over
the trial object (``GetDeployedJobStatus``): a condition holds when it selects an object or a
non-empty array, and the selected condition (the array's first element) gives the trial's reason
and message. Katib's webhook fills the conditions for a batch Job, a Kubeflow training job
(TFJob, PyTorchJob, XGBoostJob, MPIJob) and a TrainJob (``experiment_defaults.go``), and the
primary pod labels of the last two families; other kinds (an Argo Workflow, a Tekton PipelineRun)
must name their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from millpond.errors import UserError
from millpond.katib import gjson

JOB_SUCCESS = 'status.conditions.#(type=="Complete")#|#(status=="True")#'
JOB_FAILURE = 'status.conditions.#(type=="Failed")#|#(status=="True")#'
KUBEFLOW_SUCCESS = 'status.conditions.#(type=="Succeeded")#|#(status=="True")#'
KUBEFLOW_FAILURE = JOB_FAILURE
# Katib's KubeflowJobKinds (TrainJob among them, with its own defaults below).
KUBEFLOW_KINDS = frozenset({"TFJob", "PyTorchJob", "XGBoostJob", "MPIJob", "TrainJob"})
KUBEFLOW_PRIMARY_LABELS = {"training.kubeflow.org/job-role": "master"}
TRAINJOB_PRIMARY_LABELS = {"jobset.sigs.k8s.io/replicatedjob-name": "node",
                           "batch.kubernetes.io/job-completion-index": "0"}
# The container each operator runs its framework in (training-operator's DefaultContainerName per kind,
# the Trainer's "node"): Katib has no default for primaryContainerName and requires it.
OPERATOR_CONTAINERS = {"TFJob": "tensorflow", "PyTorchJob": "pytorch", "XGBoostJob": "xgboost",
                       "MPIJob": "mpi", "TrainJob": "node"}


def validate(expression: str, where: str) -> None:
    """Refuse a condition outside the GJSON subset millpond reads, naming ``where`` (the field)."""
    try:
        gjson.parse(expression)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None


def matches(expression: str, obj: Mapping[str, Any]) -> bool:
    """Whether ``expression`` holds on ``obj``: it selects an object or a non-empty array (Katib's rule)."""
    found = gjson.get(expression, obj)
    return isinstance(found, dict) or (isinstance(found, list) and len(found) > 0)


def matched_condition(expression: str, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """What ``expression`` selects when it holds (the first of an array), None when it does not.

    Katib reads the trial's reason and message from it; an element that is no object gives {}.
    """
    found = gjson.get(expression, obj)
    if isinstance(found, dict):
        return found
    if isinstance(found, list) and found:
        return found[0] if isinstance(found[0], dict) else {}
    return None


def default_conditions(api_version: str, kind: str) -> tuple[str, str]:
    """Katib's (successCondition, failureCondition) for a trial kind; ("", "") when Katib has none.

    Katib decides by the kind alone (``jobKind == "Job"``), whatever the apiVersion.
    """
    if kind == "Job":
        return JOB_SUCCESS, JOB_FAILURE
    if kind == "TrainJob":
        return JOB_SUCCESS, JOB_FAILURE
    if kind in KUBEFLOW_KINDS:
        return KUBEFLOW_SUCCESS, KUBEFLOW_FAILURE
    return "", ""


def default_primary(kind: str) -> tuple[str | None, dict[str, str]]:
    """(the operator's container name or None, Katib's default primaryPodLabels) for a trial kind.

    Katib defaults only the labels (Kubeflow jobs: the master replica; TrainJob: the first node);
    the container name is the operator's own, for a caller that chooses to offer it.
    """
    if kind == "TrainJob":
        return OPERATOR_CONTAINERS[kind], dict(TRAINJOB_PRIMARY_LABELS)
    if kind in KUBEFLOW_KINDS:
        return OPERATOR_CONTAINERS[kind], dict(KUBEFLOW_PRIMARY_LABELS)
    return None, {}

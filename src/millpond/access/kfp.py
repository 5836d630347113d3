"""KFP's authorization vocabulary: the attributes its API server puts in a SubjectAccessReview.

KFP's backend (``backend/src/apiserver/common/const.go``, ``resource_manager.IsAuthorized``) asks
Kubernetes whether the caller may ``VERB`` the ``RESOURCE`` of group ``pipelines.kubeflow.org``,
version ``v1beta1``, in the namespace the object belongs to (an experiment's, a run's experiment's, a
recurring run's; a namespaced pipeline's), the object's name as ``name``. Kubeflow's
``kubeflow-pipelines-edit``/``-view`` ClusterRoles grant those verbs, aggregated into
``kubeflow-edit``/``kubeflow-view``.
"""

from __future__ import annotations

from typing import Any

GROUP = "pipelines.kubeflow.org"
VERSION = "v1beta1"

PIPELINES, PIPELINE_VERSIONS = "pipelines", "pipelines/versions"
EXPERIMENTS, RUNS, JOBS = "experiments", "runs", "jobs"
VIEWERS, VISUALIZATIONS, ARTIFACTS = "viewers", "visualizations", "artifacts"
RESOURCES = (PIPELINES, EXPERIMENTS, RUNS, JOBS, VIEWERS, VISUALIZATIONS, ARTIFACTS)

# verbs (KFP's RbacResourceVerb*)
CREATE, GET, LIST, UPDATE, DELETE = "create", "get", "list", "update", "delete"
ARCHIVE, UNARCHIVE, TERMINATE, RETRY = "archive", "unarchive", "terminate", "retry"
READ_ARTIFACT, REPORT_METRICS, ENABLE, DISABLE = "readArtifact", "reportMetrics", "enable", "disable"

EDIT_RULES: list[dict[str, Any]] = [
    {"apiGroups": [GROUP], "resources": [PIPELINES, PIPELINE_VERSIONS],
     "verbs": [CREATE, GET, LIST, UPDATE, DELETE]},
    {"apiGroups": [GROUP], "resources": [EXPERIMENTS],
     "verbs": [ARCHIVE, CREATE, DELETE, GET, LIST, UNARCHIVE]},
    {"apiGroups": [GROUP], "resources": [RUNS],
     "verbs": [ARCHIVE, CREATE, DELETE, GET, LIST, READ_ARTIFACT, REPORT_METRICS, RETRY, TERMINATE, UNARCHIVE]},
    {"apiGroups": [GROUP], "resources": [JOBS], "verbs": [CREATE, DELETE, DISABLE, ENABLE, GET, LIST]},
    {"apiGroups": [GROUP], "resources": [VIEWERS], "verbs": [CREATE, DELETE, GET, LIST]},
    {"apiGroups": [GROUP], "resources": [VISUALIZATIONS], "verbs": [CREATE]},
    {"apiGroups": [GROUP], "resources": [ARTIFACTS], "verbs": [GET, LIST]},
]
VIEW_RULES: list[dict[str, Any]] = [
    {"apiGroups": [GROUP], "resources": [PIPELINES, PIPELINE_VERSIONS, EXPERIMENTS, JOBS], "verbs": [GET, LIST]},
    {"apiGroups": [GROUP], "resources": [RUNS], "verbs": [GET, LIST, READ_ARTIFACT]},
    {"apiGroups": [GROUP], "resources": [VIEWERS], "verbs": [GET, LIST]},
    {"apiGroups": [GROUP], "resources": [VISUALIZATIONS], "verbs": [CREATE]},
    {"apiGroups": [GROUP], "resources": [ARTIFACTS], "verbs": [GET, LIST]},
]

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
KUBEFLOW_GROUP = "kubeflow.org"  # viewers (and scheduledworkflows) are Kubeflow's, not the pipelines group's

# KFP's RbacResourceType* (common/const.go). A pipeline version is authorized as its pipeline (resource
# ``pipelines``, ``canAccessPipelineVersion``); ``pipelineversions`` is granted beside it by Kubeflow's roles.
# Reading a run's artifact files is the verb ``readArtifact`` on ``runs``; KFP master's native artifact service
# (``server/artifact_server.go``: ``canAccessArtifacts``) authorizes its lineage records on ``artifacts`` (get,
# list, create) in the artifact's namespace, which Kubeflow's view and edit roles here grant.
PIPELINES, PIPELINE_VERSIONS = "pipelines", "pipelineversions"
EXPERIMENTS, RUNS, JOBS = "experiments", "runs", "jobs"
VIEWERS, VISUALIZATIONS, ARTIFACTS = "viewers", "visualizations", "artifacts"
RESOURCES = (PIPELINES, EXPERIMENTS, RUNS, JOBS, VISUALIZATIONS)

# verbs (KFP's RbacResourceVerb*)
CREATE, GET, LIST, UPDATE, DELETE = "create", "get", "list", "update", "delete"
ARCHIVE, UNARCHIVE, TERMINATE, RETRY = "archive", "unarchive", "terminate", "retry"
READ_ARTIFACT, REPORT_METRICS, ENABLE, DISABLE = "readArtifact", "reportMetrics", "enable", "disable"

# As KFP's manifests (installs/multi-user/view-edit-cluster-roles.yaml): aggregate-to-kubeflow-pipelines-edit
# adds these writes to the view rules below (kubeflow-pipelines-view aggregates into -edit).
_VIEW_RULES: list[dict[str, Any]] = [
    {"apiGroups": [GROUP], "resources": [PIPELINES, PIPELINE_VERSIONS, EXPERIMENTS, JOBS], "verbs": [GET, LIST]},
    {"apiGroups": [GROUP], "resources": [RUNS], "verbs": [GET, LIST, READ_ARTIFACT]},
    {"apiGroups": [GROUP], "resources": [ARTIFACTS], "verbs": [GET, LIST]},
    {"apiGroups": [KUBEFLOW_GROUP], "resources": [VIEWERS], "verbs": [CREATE, GET, DELETE]},
    {"apiGroups": [GROUP], "resources": [VISUALIZATIONS], "verbs": [CREATE]},
]
_EDIT_WRITES: list[dict[str, Any]] = [
    {"apiGroups": [GROUP], "resources": [PIPELINES, PIPELINE_VERSIONS], "verbs": [CREATE, DELETE, UPDATE]},
    {"apiGroups": [GROUP], "resources": [EXPERIMENTS], "verbs": [ARCHIVE, CREATE, DELETE, UNARCHIVE]},
    {"apiGroups": [GROUP], "resources": [RUNS],
     "verbs": [ARCHIVE, CREATE, DELETE, RETRY, TERMINATE, UNARCHIVE, REPORT_METRICS, READ_ARTIFACT]},
    {"apiGroups": [GROUP], "resources": [JOBS], "verbs": [CREATE, DELETE, DISABLE, ENABLE]},
    {"apiGroups": [GROUP], "resources": [ARTIFACTS], "verbs": [CREATE]},
    {"apiGroups": [KUBEFLOW_GROUP], "resources": ["scheduledworkflows"], "verbs": ["*"]},
]
EDIT_RULES: list[dict[str, Any]] = _VIEW_RULES + _EDIT_WRITES
VIEW_RULES: list[dict[str, Any]] = list(_VIEW_RULES)

"""A RayJob's spec read as what runs here: an entrypoint submitted to a cluster, and what ends it.

KubeRay's fields, and what millpond does with them:

- ``entrypoint``: submitted through Ray's job submission API to the cluster's dashboard, with
  ``runtimeEnvYAML`` (parsed: a map), ``entrypointNumCpus``/``NumGpus``/``Resources`` and ``jobId``
  (the submission id; else one is made, as KubeRay makes one);
- ``rayClusterSpec``: a RayCluster of the job's own (``<job>-raycluster-<5 chars>``, owned by the
  job, deleted with it); ``clusterSelector`` (``ray.io/cluster: NAME``): an existing RayCluster,
  waited for while it is not ready, never deleted by the job;
- ``shutdownAfterJobFinishes`` with ``ttlSecondsAfterFinished``: the job's own cluster is deleted
  that long after the job ends; ``activeDeadlineSeconds``: a job running longer is stopped and
  Failed (``DeadlineExceeded``); ``preRunningDeadlineSeconds`` likewise before it runs; ``suspend``:
  nothing runs (a running job's cluster is deleted), as Kueue drives it;
- ``submissionMode``: K8sJobMode (the default) and HTTPMode both submit over HTTP here (there is no
  submitter pod to run); InteractiveMode and SidecarMode are refused (one line).

KubeRay's webhook rules kept: an entrypoint is required, a clusterSelector and rayClusterSpec
exclusive of each other, no shutdownAfterJobFinishes or suspend with a clusterSelector.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from millpond.documents import load_yaml_documents
from millpond.errors import UserError
from millpond.kuberay.kinds import CLUSTER_LABEL
from millpond.kuberay.specs import ClusterSpec, cluster_spec, field_path

MODES = ("K8sJobMode", "HTTPMode")


@dataclass(frozen=True)
class JobSpec:
    entrypoint: str
    runtime_env: dict[str, Any]
    cluster: ClusterSpec | None  # its own cluster; None: ``selector`` names an existing one
    selector: str  # the RayCluster named by clusterSelector's ray.io/cluster
    shutdown_after_finish: bool
    ttl_s: int
    active_deadline_s: int | None
    pre_running_deadline_s: int | None
    suspend: bool
    submission_id: str
    entrypoint_cpus: float | None
    entrypoint_gpus: float | None
    entrypoint_resources: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _seconds(spec: dict[str, Any], key: str, *, positive: bool) -> int | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < (1 if positive else 0):
        raise UserError(f"spec.{key}: {value!r} must be a whole number of seconds, at least {1 if positive else 0}")
    return value


def runtime_env(text: object) -> dict[str, Any]:
    """``runtimeEnvYAML`` as the map Ray's job submission takes; UserError when it is not one."""
    if text is None or text == "":
        return {}
    if not isinstance(text, str):
        raise UserError("spec.runtimeEnvYAML: expected a string of YAML")
    try:
        documents = load_yaml_documents(text, "spec.runtimeEnvYAML")
    except UserError as exc:
        raise UserError(f"spec.runtimeEnvYAML: {exc}") from None
    if len(documents) > 1:
        raise UserError("spec.runtimeEnvYAML: expected one YAML document")
    parsed = documents[0] if documents else None
    if parsed is None:
        return {}
    if not isinstance(parsed, dict):
        raise UserError("spec.runtimeEnvYAML: expected a map (pip, working_dir, env_vars...)")
    env_vars = parsed.get("env_vars")
    if env_vars is not None and not (isinstance(env_vars, dict) and all(isinstance(v, str) for v in env_vars.values())):
        raise UserError("spec.runtimeEnvYAML: env_vars: expected a map of strings")
    return parsed


def _number(spec: dict[str, Any], key: str) -> float | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise UserError(f"spec.{key}: {value!r} must be a number, at least 0")
    return float(value)


def job_spec(spec: object) -> JobSpec:
    """The RayJob ``spec`` as what runs here; UserError (one line naming the field) for what cannot."""
    if not isinstance(spec, dict):
        raise UserError("spec: required field is missing")
    mode = spec.get("submissionMode") or "K8sJobMode"
    if mode not in MODES:
        raise UserError(f"spec.submissionMode: {mode!r}: millpond submits the entrypoint itself "
                        f"({' or '.join(MODES)}); it runs no interactive or sidecar submitter")
    entrypoint = spec.get("entrypoint")
    if not isinstance(entrypoint, str) or not entrypoint.strip():
        raise UserError("spec.entrypoint: required field is missing")
    selector = spec.get("clusterSelector")
    named = ""
    if selector:
        if not isinstance(selector, dict) or not isinstance(selector.get(CLUSTER_LABEL), str):
            raise UserError(f"spec.clusterSelector: millpond selects a RayCluster by its {CLUSTER_LABEL} label "
                            "(the cluster's name)")
        named = selector[CLUSTER_LABEL]
        if spec.get("rayClusterSpec") is not None:
            raise UserError("spec.clusterSelector: a RayJob names an existing cluster or describes its own "
                            "(rayClusterSpec), not both")
        for key in ("shutdownAfterJobFinishes", "suspend"):
            if spec.get(key):
                raise UserError(f"spec.{key}: not with a clusterSelector (the cluster is not the job's own)")
    elif spec.get("rayClusterSpec") is None:
        raise UserError("spec.rayClusterSpec: required field is missing (or name a cluster in clusterSelector)")
    cluster = None if named else cluster_spec(spec["rayClusterSpec"], ["spec", "rayClusterSpec"])
    resources = spec.get("entrypointResources")
    parsed_resources: dict[str, float] = {}
    if resources:
        parsed = runtime_env(resources) if isinstance(resources, str) else resources
        if not isinstance(parsed, dict) or not all(isinstance(v, (int, float)) for v in parsed.values()):
            raise UserError(f"{field_path(['spec', 'entrypointResources'])}: expected a JSON map of amounts")
        parsed_resources = {str(k): float(v) for k, v in parsed.items()}
    notes = []
    if spec.get("submitterPodTemplate") is not None or spec.get("submitterConfig") is not None:
        notes.append("submitterPodTemplate/submitterConfig: millpond submits the entrypoint itself, with no pod")
    job_id = spec.get("jobId")
    return JobSpec(
        entrypoint=entrypoint, runtime_env=runtime_env(spec.get("runtimeEnvYAML")), cluster=cluster, selector=named,
        shutdown_after_finish=bool(spec.get("shutdownAfterJobFinishes")),
        ttl_s=_seconds(spec, "ttlSecondsAfterFinished", positive=False) or 0,
        active_deadline_s=_seconds(spec, "activeDeadlineSeconds", positive=True),
        pre_running_deadline_s=_seconds(spec, "preRunningDeadlineSeconds", positive=True),
        suspend=bool(spec.get("suspend")), submission_id=str(job_id) if job_id else "",
        entrypoint_cpus=_number(spec, "entrypointNumCpus"), entrypoint_gpus=_number(spec, "entrypointNumGpus"),
        entrypoint_resources=parsed_resources, notes=tuple(notes),
    )

"""Pipeline task attempts as the pods Kubeflow Pipelines (on Argo Workflows) runs for them.

A run is the Argo Workflow KFP makes of it, named as the run's resource name
(``PIPELINE-RUNID8``, the ``pipeline_job_resource_name`` its tasks are given); each container task
that ran (not a cache hit: KFP launches no executor pod for one; not a skipped branch) is one pod
``WORKFLOW-TASK-xxxxx`` (the suffix derived from the task's id), labelled as Argo and KFP label
theirs (``workflows.argoproj.io/workflow``, ``workflows.argoproj.io/completed``,
``pipeline/runid``, ``pipelines.kubeflow.org/v2_component: "true"`` for a v2 run) plus the task's
kfp-kubernetes pod metadata (``add_pod_label``: Kueue's ``kueue.x-k8s.io/queue-name`` among them),
owned by the Workflow, with the one container ``main`` (Argo's ``wait`` sidecar has nothing to show
here). Its namespace is the run's (``pipelines.queueing.run_namespace``: the namespace recorded on a
multi-user run, else the experiment's name lower-cased), ``default`` when that is no namespace name.

Bounded: only the ``RECENT_RUNS`` newest runs are read (one query per run), so listing pods costs the
same on a home with ten thousand runs. A task retried by its retry policy is one pod whose
container restarted (``restartCount``: its attempts after the first); the downward API's
``metadata.name`` a task reads is ``WORKFLOW-TASK`` without the suffix (simplified).
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

from millpond.kind_handler import KindContext
from millpond.names import label_problem
from millpond.pods.records import (
    ContainerState,
    ContainerView,
    LogFile,
    OwnerRef,
    PodView,
    ProcessRef,
    Running,
    Waiting,
    name_suffix,
    pod_uid,
    terminated,
)
from millpond.store.models import Run, Task
from millpond.store.runs import RunStore

RECENT_RUNS = 50
WORKFLOW = "workflows.argoproj.io/workflow"
_SHOWN_STATES = ("PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELED")
_FINISHED_RUNS = ("SUCCEEDED", "FAILED", "CANCELED", "SKIPPED")


class PipelinePods:
    """The task attempts of the newest runs of the home."""

    def pods(self, namespace: str | None, context: KindContext) -> list[PodView]:
        store = RunStore(context.settings.database_url)
        found: list[PodView] = []
        for run, experiment in reversed(store.list_runs(limit=RECENT_RUNS)):
            where = run.namespace or project(experiment)
            if namespace is not None and where != namespace:
                continue
            found += [task_pod(run, task, where) for task in store.list_tasks(run.id)
                      if task.kind == "container" and not task.cached and task.state in _SHOWN_STATES]
        return found


SOURCE = PipelinePods()


def project(experiment: str) -> str:
    """The namespace of a single-user run's pods (``queueing.run_namespace`` without a recorded namespace): its
    experiment's name lower-cased, else ``default``."""
    namespace = experiment.lower()
    return "default" if label_problem(namespace) else namespace


def _dns(text: str) -> str:
    """``text`` as a DNS-1123 label fragment: lower case, letters, digits and '-'."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-") or "task"


def workflow_name(run: Run) -> str:
    """The Argo Workflow KFP would make of the run: its resource name (``pipeline_job_resource_name``)."""
    return _dns(f"{run.pipeline_name}-{run.id[:8]}")[-63:].lstrip("-")


def task_pod(run: Run, task: Task, namespace: str) -> PodView:
    """One container task of ``run`` as its pod."""
    workflow = workflow_name(run)
    suffix = name_suffix(task.id)
    name = f"{workflow}-{_dns(task.name)}"[:63 - len(suffix) - 1].rstrip("-") + f"-{suffix}"
    executor = _executor(run.pipeline_spec, task.component)
    state = _state(task)
    metadata = task.pod_metadata or {}
    labels = {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()}
    labels.update({WORKFLOW: workflow, "workflows.argoproj.io/completed": str(run.state in _FINISHED_RUNS).lower(),
                   "pipeline/runid": run.id})
    if run.workflow is None:
        labels["pipelines.kubeflow.org/v2_component"] = "true"
    annotations = {str(k): str(v) for k, v in (metadata.get("annotations") or {}).items()}
    annotations.update({"workflows.argoproj.io/node-name": f"{workflow}.{task.path.replace('/', '.')}",
                        "kubectl.kubernetes.io/default-container": "main"})
    process = ProcessRef(task.pid, task.pid_start) if task.pid and isinstance(state, Running) else None
    container = ContainerView(
        name="main", image=str(task.image or executor.get("image") or ""), state=state,
        command=tuple(str(word) for word in executor.get("command") or ()),
        args=tuple(str(word) for word in executor.get("args") or ()), ready=isinstance(state, Running),
        restart_count=max(0, (task.attempts or 1) - 1),
        log=LogFile(Path(task.log_path), stamped=False) if task.log_path else None, process=process)
    started = _aware(task.started_at)
    return PodView(
        name=name, namespace=namespace, uid=pod_uid(task.id, name), created_at=_aware(task.created_at) or started
        or dt.datetime.now(dt.timezone.utc), containers=(container,),
        owner=OwnerRef("argoproj.io/v1alpha1", "Workflow", workflow, run.id), labels=labels,
        annotations=annotations, started_at=started)


IMAGE_PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull")


def _state(task: Task) -> ContainerState:
    started, finished = _aware(task.started_at), _aware(task.finished_at)
    if task.state == "RUNNING" and started is not None:
        return Running(started)
    if task.state == "SUCCEEDED":
        return terminated(task.exit_code or 0, started, finished)
    pull_reason = (task.error or "").split(":", 1)[0]
    if task.state == "FAILED" and pull_reason in IMAGE_PULL_REASONS:  # its image never came: the kubelet's waiting
        return Waiting(pull_reason, (task.error or "").split(":", 1)[1].strip())
    if task.state in ("FAILED", "CANCELED"):
        code = task.exit_code if task.exit_code not in (None, 0) else (143 if task.state == "CANCELED" else 1)
        return terminated(code, started, finished, task.error or "")
    return Waiting("ContainerCreating")


def _executor(pipeline_spec: dict[str, Any], component: str) -> dict[str, Any]:
    """The container the task's component runs (``deploymentSpec.executors``): image, command, args."""
    label = ((pipeline_spec.get("components") or {}).get(component) or {}).get("executorLabel")
    executor = ((pipeline_spec.get("deploymentSpec") or {}).get("executors") or {}).get(label) or {}
    container = executor.get("container") if isinstance(executor, dict) else None
    return container if isinstance(container, dict) else {}


def _aware(moment: dt.datetime | None) -> dt.datetime | None:
    """SQLite hands timestamps back without their zone: they were written in UTC."""
    if moment is None:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)

"""A run's tasks as Kueue workloads: which queue, priority class and user each task carries.

On Kubernetes, KFP and Kueue meet through the task's pod: a pod labelled
``kueue.x-k8s.io/queue-name`` (kfp-kubernetes ``add_pod_label``) is held by Kueue's pod
integration until its queue admits it. millpond reads the same labels from the run's
platform spec, so a pipeline written for that setup queues here unchanged. ``millpond run
--queue Q --priority P`` (and ``POST /runs`` with ``queue_name``/``priority_class_name``, named
after a Kueue Workload's ``spec.queueName``/``spec.priorityClassName``) writes those labels on
every container task that does not name its own, into the run's copy of the platform spec:
the run shows what it was started with, and ``runs resume``/``retry`` queue it the same way.

The submitter (``millpond.io/user``, an annotation) is written beside them on every task that
ends up in a queue: the OS user for the command line, the API caller for the server. The run's
experiment is the project: in single-user mode its name, lower-cased, is the namespace whose LocalQueue
the tasks name (the ``Default`` experiment is the ``default`` namespace, where jobs go by default too);
a queued run's experiment must be such a name (refused at once otherwise). In multi-user mode a run
belongs to its experiment's namespace, recorded on the run (``run_namespace`` answers both).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from millpond.errors import UserError
from millpond.names import label_problem
from millpond.pipelines.resources import ResourceRequest, ledger_request
from millpond.scheduling.queues.model import PRIORITY_LABEL, QUEUE_LABEL, Workload, WorkloadKind
from millpond.scheduling.queues.submission import ANONYMOUS, priority_class, requests

USER_ANNOTATION = "millpond.io/user"


def project_of(experiment: str) -> str:
    """The namespace a queued run's tasks belong to: its experiment's name, lower-cased (UserError when that is
    no namespace name)."""
    namespace = experiment.lower()
    if label_problem(namespace):
        raise UserError(f"the experiment {experiment!r} names a queued run's project, a Kueue namespace: "
                        "use an experiment named with letters, digits and '-' (--experiment)")
    return namespace


class RecordedRun(Protocol):
    """What ``run_namespace`` reads of a run: the ORM's ``Run`` and the journal's ``RunRecord`` both are one."""

    @property
    def namespace(self) -> str: ...
    @property
    def experiment_id(self) -> str: ...


class ExperimentNames(Protocol):
    """Where an experiment's name is read (``RunStore``, the engine's ``RunJournal``)."""

    def experiment_name(self, experiment_id: str) -> str: ...


def run_namespace(run: RecordedRun, experiments: ExperimentNames) -> str:
    """The namespace a run belongs to, and with it each of its tasks: their pods, their Kueue workloads, what
    isolation keeps apart. Multi-user mode: the namespace recorded on the run (its experiment's, as KFP's
    ``run.Namespace``). Single-user mode (nothing recorded): the project, its experiment's name lower-cased
    (UserError when that is no namespace name)."""
    return run.namespace or project_of(experiments.experiment_name(run.experiment_id))


def queued(pipeline_spec: dict[str, Any], platform_spec: dict[str, Any] | None) -> bool:
    """Whether any container task of the run names a queue."""
    return any(_labels(platform_spec, label).get(QUEUE_LABEL) for label in _containers(pipeline_spec))


def _containers(pipeline_spec: dict[str, Any]) -> list[str]:
    """The executor labels of the container tasks: only they take resources, so only they are queued."""
    executors = (pipeline_spec.get("deploymentSpec") or {}).get("executors") or {}
    return [label for label, executor in executors.items() if isinstance(executor, dict) and "container" in executor]


@dataclass(frozen=True)
class TaskQueueing:
    """What makes a task a workload: its LocalQueue, its WorkloadPriorityClass ("" for none), who asked."""

    queue: str
    priority_class: str = ""
    user: str = ANONYMOUS


def task_queueing(labels: Mapping[str, str], annotations: Mapping[str, str]) -> TaskQueueing | None:
    """A task's queueing from its pod metadata (``TaskPlatform.labels``/``annotations``); None: not queued."""
    queue = labels.get(QUEUE_LABEL, "")
    if not queue:
        return None
    return TaskQueueing(queue, labels.get(PRIORITY_LABEL, ""), annotations.get(USER_ANNOTATION) or ANONYMOUS)


def task_workload(task_id: str, name: str, namespace: str, resources: ResourceRequest, queueing: TaskQueueing,
                  created: float, holder: str = "") -> Workload:
    """One task as a workload (its id: the task's record id; one pod): its request or limit, as the ledger counts it."""
    wanted = ledger_request(resources)
    found = priority_class(queueing.priority_class) if queueing.priority_class else None
    return Workload(
        id=task_id, kind=WorkloadKind.TASK, name=name, namespace=namespace, user=queueing.user, queue=queueing.queue,
        requests=requests(wanted.cpu_millis, wanted.memory_bytes, wanted.gpus), priority=found.value if found else 0,
        priority_class=queueing.priority_class or None, created=created, holder=holder,
    )


def with_queue(pipeline_spec: dict[str, Any], platform_spec: dict[str, Any] | None, queue: str, priority: str,
               user: str) -> dict[str, Any] | None:
    """``platform_spec`` with the run's queue and priority class on each container task that names none, and
    ``user`` on each queued task; unchanged (the same object) when no task is queued and nothing was asked."""
    containers = _containers(pipeline_spec)
    if not (queue or priority) and not queued(pipeline_spec, platform_spec):
        return platform_spec
    result = copy.deepcopy(platform_spec) if platform_spec else {}
    configs = (result.setdefault("platforms", {}).setdefault("kubernetes", {})
               .setdefault("deploymentSpec", {}).setdefault("executors", {}))
    for label in containers:
        config = configs.setdefault(label, {})
        metadata = config.setdefault("podMetadata", {})
        labels = metadata.setdefault("labels", {})
        for key, value in ((QUEUE_LABEL, queue), (PRIORITY_LABEL, priority)):
            if value and not labels.get(key):
                labels[key] = value
        if labels.get(QUEUE_LABEL):
            metadata.setdefault("annotations", {})[USER_ANNOTATION] = user or ANONYMOUS
        else:
            _prune(configs, label, config, metadata, labels)
    return result


def _labels(platform_spec: dict[str, Any] | None, label: str) -> dict[str, Any]:
    executors = (((platform_spec or {}).get("platforms") or {}).get("kubernetes") or {}).get("deploymentSpec") or {}
    config = (executors.get("executors") or {}).get(label) or {}
    return (config.get("podMetadata") or {}).get("labels") or {}


def _prune(configs: dict[str, Any], label: str, config: dict[str, Any], metadata: dict[str, Any],
           labels: dict[str, Any]) -> None:
    """Take back the empty maps ``with_queue`` made for a task it left unqueued."""
    if not labels:
        del metadata["labels"]
    if not metadata:
        del config["podMetadata"]
    if not config:
        del configs[label]

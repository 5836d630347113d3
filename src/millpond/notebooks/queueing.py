"""A Notebook labelled ``kueue.x-k8s.io/queue-name`` as a Kueue workload, admitted through its LocalQueue.

Kueue admits a notebook through its pod (or StatefulSet) integration: the pod, labelled with the queue, is
created with the ``kueue.x-k8s.io/admission`` scheduling gate and stays ``PodScheduled`` False with
reason ``SchedulingGated`` until its Workload is admitted; the Workload's own condition says why it waits
(Kueue's ``Pending`` and message: the ClusterQueue's quota, how many are ahead of it). Here the workload is
the training jobs' one (``training.batch.queueing.JobWorkload``): one pod set of one pod asking what the
notebook's container asks, its priority the ``kueue.x-k8s.io/priority-class`` label's class, held by the
notebook's supervisor (a supervisor killed with ``kill -9`` hands its quota on: ``cycle.reclaim_dead``).

The labels are read from the Notebook's ``metadata.labels``, else from its pod template's (where Kueue's
pod integration reads them). The supervisor asks ``poll`` before it asks the machine's ledger, finishes
the workload when the notebook is stopped (culled included: a stopped notebook holds no quota, as a
scaled-to-zero StatefulSet holds none) or deleted, and stops its server when it is evicted (preempted),
then requeues it. The submitter is the ``notebooks.kubeflow.org/creator`` annotation the Jupyter web app
writes, else the OS user. Simplified: partial admission does not apply (one pod).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from millpond.notebooks.manifests import NotebookSpec
from millpond.scheduling.queues.model import PRIORITY_LABEL, QUEUE_LABEL
from millpond.scheduling.queues.submission import os_user
from millpond.settings import Settings
from millpond.training.batch.queueing import JobWorkload, Standing

CREATOR_ANNOTATION = "notebooks.kubeflow.org/creator"


@dataclass(frozen=True)
class QueueLabels:
    queue: str
    priority: str


def queue_labels(manifest: dict[str, Any]) -> QueueLabels | None:
    """The notebook's queue and priority class (the metadata's labels, else its pod template's); None: not queued."""
    template = ((manifest.get("spec") or {}).get("template") or {}).get("metadata") or {}
    for labels in ((manifest.get("metadata") or {}).get("labels") or {}, template.get("labels") or {}):
        if isinstance(labels, dict) and labels.get(QUEUE_LABEL):
            return QueueLabels(str(labels[QUEUE_LABEL]), str(labels.get(PRIORITY_LABEL) or ""))
    return None


class NotebookQueue:
    """The notebook's workload while it is queued (one per supervisor; re-submitted when its labels change)."""

    def __init__(self, settings: Settings, namespace: str, name: str) -> None:
        self.settings, self.namespace, self.name = settings, namespace, name
        self.workload: JobWorkload | None = None
        self.labels: QueueLabels | None = None

    def poll(self, manifest: dict[str, Any], spec: NotebookSpec) -> Standing | None:
        """Where its workload stands (submitted on first call); None when the notebook names no queue."""
        labels = queue_labels(manifest)
        if labels != self.labels:
            self.finish("the notebook's queue changed")
            self.labels = labels
        if labels is None:
            return None
        if self.workload is None:
            annotations = (manifest.get("metadata") or {}).get("annotations") or {}
            self.workload = JobWorkload(self.settings, name=self.name, namespace=self.namespace,
                                        user=str(annotations.get(CREATOR_ANNOTATION) or os_user()),
                                        queue=labels.queue, priority=labels.priority, pods=1, per_pod=spec.request)
        return self.workload.poll()

    def requeue(self) -> None:
        if self.workload is not None:
            self.workload.requeue()

    def finish(self, reason: str) -> None:
        """Give its quota back (stopped, deleted, its queue changed); the next ``poll`` submits it again."""
        if self.workload is not None:
            self.workload.finish(reason)
            self.workload = None

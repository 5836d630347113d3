"""A batch/v1 Job's pods as the Job controller makes them: ``JOB-xxxxx`` (``JOB-INDEX-xxxxx`` for an Indexed
Job), with the controller's labels (``batch.kubernetes.io/job-name``, ``batch.kubernetes.io/controller-uid``,
``job-name``, ``controller-uid`` and, for an Indexed Job, ``batch.kubernetes.io/job-completion-index``)
beside the template's, one container, owned by the Job.

Read from what the Job's controller records (``training.batch.pods``); a pod that ended stays shown, as
the Job controller keeps finished pods until the Job goes. Deleting a running one stops its process:
its Job counts it failed and makes another, as Kubernetes' Job controller does.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from millpond.kind_handler import KindContext
from millpond.pods.records import (
    ContainerState,
    ContainerView,
    LogFile,
    OwnerRef,
    PodView,
    ProcessRef,
    Running,
    Terminated,
    Waiting,
    parse_instant,
    pod_uid,
)
from millpond.training.batch.pods import JobPod, JobPods, job_folder, job_pods
from millpond.training.images import ran_in, recorded


class BatchJobPods:
    """The pods of every batch/v1 Job."""

    def pods(self, namespace: str | None, context: KindContext) -> list[PodView]:
        found = []
        for job in job_pods(context.settings, namespace):
            ran = ran_in(recorded(job_folder(job.uid, context.settings)), "pod")
            found += [_pod(job, pod, ran) for pod in job.pods]
        return found


SOURCE = BatchJobPods()


def _pod(job: JobPods, pod: JobPod, ran: dict[str, str] | None = None) -> PodView:
    state = _state(pod)
    running = isinstance(state, Running) and pod.pid is not None
    container = ContainerView(
        name=job.container or "job", image=job.image, state=state, restart_count=pod.restarts, ready=running,
        log=LogFile(Path(pod.log_path)) if pod.log_path else None,  # stamped per line, as instances write logs
        process=ProcessRef(pod.pid, pod.pid_start) if running and pod.pid is not None else None)
    return PodView(
        name=pod.name, namespace=job.namespace, uid=pod_uid(job.uid, pod.name, pod.restarts),
        created_at=parse_instant(pod.created_at) or dt.datetime.now(dt.timezone.utc), containers=(container,),
        owner=OwnerRef("batch/v1", "Job", job.job, job.uid), labels=job.pod_labels(pod),
        annotations={**job.pod_annotations(pod), **(ran or {})}, started_at=parse_instant(pod.started_at),
        restart_policy="Never")


def _state(pod: JobPod) -> ContainerState:
    started, finished = parse_instant(pod.started_at), parse_instant(pod.finished_at)
    if pod.phase == "Running" and started is not None:
        return Running(started)
    if pod.phase in ("Succeeded", "Failed"):
        code = pod.exit_code if pod.exit_code is not None else (0 if pod.phase == "Succeeded" else 1)
        reason = pod.reason or ("Completed" if code == 0 else "Error")
        return Terminated(code, reason, started, finished, pod.message)
    return Waiting(pod.reason or "ContainerCreating", pod.message)


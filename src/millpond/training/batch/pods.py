"""A Job's pods as its controller records them, and the one reader other families use to list them.

Each pod is one process (``training.instances``) run by the Job's controller; its record is kept in
``$MILLPOND_HOME/batch/UID/pods.json`` (written whole, atomically, by the controller alone, and once
by the reader that finds the controller dead), its output in ``logs/POD.log`` beside it, the Job
controller's events in ``events.jsonl``. Pods are named as the Job controller names them:
``JOB-xxxxx`` (NonIndexed) and ``JOB-INDEX-xxxxx`` (Indexed), five random characters each.

:func:`job_pods` is what the ``v1`` Pod view (and anything else that shows what runs) calls: every
Job's pods with their index, process, phase, exit code and log, and the labels the Job controller
puts on them (``batch.kubernetes.io/job-name``, ``controller-uid``, ``batch.kubernetes.io/job-completion-index``);
:func:`stop_pod` is ``kubectl delete pod`` of one: its process group gets SIGTERM, and the Job's controller
reaps it as a failed pod and replaces it, as the Job controller replaces a deleted pod.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import signal
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from millpond.runners.processes import is_running
from millpond.settings import Settings, load_settings
from millpond.store.resources import ResourceStore
from millpond.training.batch.kinds import KIND

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # the pod's annotation and label (Indexed)
SUFFIX = "bcdfghjklmnpqrstvwxz2456789"


class Phase:
    """A pod's phase, as Kubernetes names it."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True)
class JobPod:
    """One pod of a Job: ``index`` is its completion index (Indexed), None for a NonIndexed Job's pod.

    ``reason`` says why it ended when its exit code does not (``DeadlineExceeded``, ``BackoffLimitExceeded``,
    ``Suspended``, ``SupervisorDied``: stopped by its Job); ``restarts`` counts its container's restarts
    (restartPolicy OnFailure). Times are UTC ISO 8601.
    """

    name: str
    index: int | None
    phase: str
    pid: int | None = None
    pid_start: str | None = None
    exit_code: int | None = None
    log_path: str = ""
    restarts: int = 0
    created_at: str = ""
    started_at: str | None = None
    finished_at: str | None = None
    reason: str = ""
    message: str = ""

    @property
    def active(self) -> bool:
        return self.phase in (Phase.PENDING, Phase.RUNNING)


@dataclass(frozen=True)
class JobPods:
    """A Job and its pods, as a Pod view needs them: the pods' labels and annotations, container and image."""

    namespace: str
    job: str
    uid: str
    container: str
    image: str
    labels: dict[str, str]
    annotations: dict[str, str]
    pods: tuple[JobPod, ...] = field(default=())

    def pod_labels(self, pod: JobPod) -> dict[str, str]:
        """The labels the Job controller puts on ``pod`` (with the template's)."""
        labels = {**self.labels, "batch.kubernetes.io/controller-uid": self.uid, "batch.kubernetes.io/job-name":
                  self.job, "controller-uid": self.uid, "job-name": self.job}
        if pod.index is not None:
            labels[COMPLETION_INDEX] = str(pod.index)
        return labels

    def pod_annotations(self, pod: JobPod) -> dict[str, str]:
        return {**self.annotations, **({COMPLETION_INDEX: str(pod.index)} if pod.index is not None else {})}


def job_folder(uid: str, settings: Settings | None = None) -> Path:
    return (settings or load_settings()).home / "batch" / uid


def pod_log(uid: str, pod: str, settings: Settings | None = None) -> Path:
    return job_folder(uid, settings) / "logs" / f"{pod}.log"


def controller_log(uid: str, settings: Settings | None = None) -> Path:
    return job_folder(uid, settings) / "controller.log"


def pod_name(job: str, index: int | None) -> str:
    """``JOB-xxxxx`` or ``JOB-INDEX-xxxxx``, as the Job controller names its pods."""
    suffix = "".join(secrets.choice(SUFFIX) for _ in range(5))
    return f"{job}-{suffix}" if index is None else f"{job}-{index}-{suffix}"


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_pods(uid: str, settings: Settings | None = None) -> list[JobPod]:
    """The pods recorded for Job ``uid`` (none before its controller made one)."""
    try:
        rows = json.loads((job_folder(uid, settings) / "pods.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [JobPod(**row) for row in rows if isinstance(row, dict)]


def write_pods(uid: str, pods: list[JobPod], settings: Settings | None = None) -> None:
    """Replace the record (a temporary file renamed over it: a reader never sees half of it)."""
    folder = job_folder(uid, settings)
    folder.mkdir(parents=True, exist_ok=True)
    temporary = folder / f".pods.{os.getpid()}.json"
    temporary.write_text(json.dumps([asdict(pod) for pod in pods]), encoding="utf-8")
    os.replace(temporary, folder / "pods.json")


def ended_by_job(pods: list[JobPod], reason: str, message: str) -> list[JobPod]:
    """The pods with every active one Failed, stopped by its Job for ``reason``."""
    at = now_iso()
    return [replace(pod, phase=Phase.FAILED, finished_at=at, reason=reason, message=message) if pod.active else pod
            for pod in pods]


def job_pods(settings: Settings | None = None, namespace: str | None = None) -> list[JobPods]:
    """Every Job (of ``namespace``; all when None) with its pods: what the ``v1`` Pod view lists."""
    settings = settings or load_settings()
    found = []
    for resource in ResourceStore(settings).list(KIND, namespace):
        template = resource.spec.get("template") or {}
        containers = (template.get("spec") or {}).get("containers") or [{}]
        metadata: dict[str, Any] = template.get("metadata") or {}
        found.append(JobPods(resource.namespace, resource.name, resource.uid, str(containers[0].get("name") or ""),
                             str(containers[0].get("image") or ""), dict(metadata.get("labels") or {}),
                             dict(metadata.get("annotations") or {}), tuple(read_pods(resource.uid, settings))))
    return found


def stop_pod(uid: str, name: str, settings: Settings | None = None) -> bool:
    """SIGTERM the process group of pod ``name`` of Job ``uid`` if it runs (True); its controller does the rest."""
    pod = next((pod for pod in read_pods(uid, settings) if pod.name == name), None)
    if pod is None or pod.pid is None or not pod.active or not is_running(pod.pid, pod.pid_start):
        return False
    try:
        os.killpg(pod.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return False
    return True

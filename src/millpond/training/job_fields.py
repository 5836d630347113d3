"""What every Kubeflow job kind's spec shares, read once: metadata and ``runPolicy`` into a ``JobSpec``, and the
fields that only mean something on a cluster.

Below both readers of job manifests (``manifests`` for PyTorchJob, TFJob and MPIJob; ``trainjobs`` for
Trainer v2's TrainJob), so neither imports the other to reach it.
"""

from __future__ import annotations

from typing import Any, Callable

from millpond.errors import UserError
from millpond.scheduling.queues.model import PRIORITY_LABEL, QUEUE_LABEL
from millpond.scheduling.queues.submission import check_queue_name
from millpond.training.spec import CleanTaskPolicy, DataBinding, HostBinding, JobSpec, ReplicaSpec, Trainer

# Fields that only mean something on a cluster: accepted, recorded, named in one info line.
_CLUSTER_ONLY = ("elasticPolicy", "suspend", "managedBy", "launcherCreationPolicy", "sshAuthMountPath",
                 "mpiImplementation", "successPolicy", "enableDynamicWorker",
                 "podTemplateOverrides", "podSpecOverrides")

RuntimeLookup = Callable[[str, str, str], "dict[str, Any] | None"]  # (kind, name, namespace) -> manifest


def cluster_only_notes(spec: dict[str, Any]) -> list[str]:
    found = [name for name in _CLUSTER_ONLY if _dig(spec, name.split(".")) is not None]
    return [f"only meaningful on a cluster, recorded: {', '.join(found)}"] if found else []


def _dig(value: Any, path: list[str]) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def job_spec(body: dict[str, Any], trainer: Trainer, replicas: tuple[ReplicaSpec, ...], images: list[str],
              run_policy: dict[str, Any], data: list[DataBinding], data_dirs: list[HostBinding],
              working_dirs: set[str]) -> JobSpec:
    """What every job kind shares: metadata, runPolicy (clean-up, retries, deadline, TTL, queue).

    Kueue's labels name the job's LocalQueue and WorkloadPriorityClass; a priority class label
    wins over ``schedulingPolicy.priorityClass`` (a Kubernetes PriorityClass), as Kueue takes a
    workload's priority from the label first. ``schedulingPolicy.queue`` is Volcano's queue, not
    Kueue's: recorded in the manifest, it leaves the job outside Kueue (as Kueue ignores it).
    """
    metadata = body["metadata"]
    labels = metadata.get("labels") or {}
    scheduling = run_policy.get("schedulingPolicy") or {}
    if len(working_dirs - {""}) > 1:
        raise UserError("workingDir: the replicas' containers name different working folders; give them one")
    clean = run_policy.get("cleanPodPolicy") or "Running"
    return JobSpec(
        name=metadata["name"], namespace=metadata["namespace"], trainer=trainer, replicas=replicas,
        image=next((image for image in images if image), ""), working_dir=next(iter(working_dirs - {""}), ""),
        data=tuple(data), data_dirs=tuple(data_dirs), retry=int(run_policy.get("backoffLimit") or 0),
        running_timeout_s=run_policy.get("activeDeadlineSeconds"),
        ttl_after_finished_s=run_policy.get("ttlSecondsAfterFinished"),
        clean_task_policy=CleanTaskPolicy(clean),
        priority=str(labels.get(PRIORITY_LABEL) or scheduling.get("priorityClass") or ""),
        queue=check_queue_name(str(labels.get(QUEUE_LABEL) or ""), f"metadata.labels[{QUEUE_LABEL}]"),
        labels=tuple(sorted(labels.items())), annotations=tuple(sorted((metadata.get("annotations") or {}).items())),
        source="manifest", manifest=body,
    )

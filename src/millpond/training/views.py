"""A job as Arena shows it: ``TrainingJobInfo`` (``arena get -o json``) and the ``arena list`` row.

The field names are those of Arena's ``pkg/apis/types/training.go``; on one machine the node
is this host and every instance's address the loopback.
"""

from __future__ import annotations

import datetime as dt
import socket
from collections.abc import Mapping
from typing import Any

from millpond.scheduling.gpu_metrics import GpuMetric
from millpond.store.keys import utcnow
from millpond.store.training import EventRecord, InstanceRecord, JobRecord

LOCAL_IP = "127.0.0.1"


def short_duration(seconds: float) -> str:
    """Arena's (Kubernetes') ShortHumanDuration: ``45s``, ``12m``, ``5h``, ``3d``, ``2y``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h"
    if s < 86400 * 365:
        return f"{s // 86400}d"
    return f"{s // (86400 * 365)}y"


def duration_s(job: JobRecord) -> float:
    """From the job's start (its creation while it waited) to its end, or to now."""
    begin = job.started_at or job.created_at
    end = job.finished_at or utcnow()
    return (end - begin).total_seconds()


def requested_gpus(job: JobRecord) -> int:
    return sum(int(r.get("replicas", 0)) * int((r.get("resources") or {}).get("gpus", 0))
               for r in job.spec.get("replicas", []))


def role_shares(job: JobRecord) -> dict[str, tuple[int, int]]:
    """Each role whose instances hold a GPU share (``--gpumemory``): (GiB of memory, percent of cores)."""
    found = {}
    for replica in job.spec.get("replicas", []):
        for share in (replica.get("resources") or {}).get("shares") or ():
            found[str(replica.get("role"))] = (int(share["memory_bytes"]) // 2**30, int(share.get("core_percent", 0)))
    return found


def share_words(gib: int, cores: int) -> str:
    """``6GiB`` or ``6GiB/30%``: a share in a table cell."""
    return f"{gib}GiB" + (f"/{cores}%" if cores else "")


def allocated_gpus(job: JobRecord) -> int:
    """GPUs the job holds now: its grant while it runs, none once it ended or while it waits."""
    return len(job.gpus) if job.status in ("PENDING", "RUNNING") else 0


def _chief(instance: InstanceRecord) -> bool:
    return instance.role in ("master", "chief", "launcher")


def node_name() -> str:
    return socket.gethostname()


def instance_metrics(instance: InstanceRecord, metrics: Mapping[int, GpuMetric]) -> dict[str, GpuMetric]:
    """The metrics of the GPUs a running instance holds, keyed by device index as Arena keys them."""
    if instance.status != "Running":
        return {}
    return {str(index): metrics[index] for index in instance.gpus if index in metrics}


def instance_info(instance: InstanceRecord, metrics: Mapping[int, GpuMetric] | None = None,
                  share: tuple[int, int] | None = None) -> dict[str, Any]:
    """One instance; ``share`` (GiB, percent): the GPU share it holds, shown instead of whole GPUs."""
    start = instance.started_at
    held = instance_metrics(instance, metrics or {})
    info = {
        "name": instance.name, "status": instance.status,
        "age": short_duration((utcnow() - start).total_seconds()) if start else "0s",
        "node": node_name() if start else "N/A", "ip": LOCAL_IP if start else "",
        "chief": _chief(instance), "requestGPUs": 0 if share else len(instance.gpus),
        "gpuMetrics": {index: metric.as_arena() for index, metric in held.items()},
    }
    if share:
        info["requestGPUMemory"], info["requestGPUCore"] = share
    return info


def job_info(job: JobRecord, instances: list[InstanceRecord],
             metrics: Mapping[int, GpuMetric] | None = None) -> dict[str, Any]:
    """Arena's ``TrainingJobInfo``; ``metrics`` (``gpu_metrics.read()``) fills its instances' gpuMetrics."""
    chief = next((i.name for i in instances if _chief(i)), "")
    shares = role_shares(job)
    info = {
        "name": job.name, "namespace": job.namespace, "uuid": job.uid, "duration": short_duration(duration_s(job)),
        "status": job.status, "trainer": job.trainer, "tensorboard": "", "chiefName": chief,
        "priority": job.spec.get("priority") or "N/A",
        **_queueing(job),
        "requestGPUs": requested_gpus(job), "allocatedGPUs": allocated_gpus(job),
        "creationTimestamp": int(job.created_at.timestamp()),
        "instances": [instance_info(i, metrics, shares.get(i.role)) for i in instances],
    }
    if shares:  # GiB of GPU memory the job's instances ask for together (Arena's gpushare jobs show it)
        info["requestGPUMemory"] = sum(
            int(r.get("replicas", 0)) * shares.get(str(r.get("role")), (0, 0))[0] for r in job.spec["replicas"])
    return info


def _queueing(job: JobRecord) -> dict[str, str]:
    """Kueue's side of a job (millpond's additions to Arena's info): its LocalQueue, who submitted it, and
    while it is QUEUING why it waits (Kueue's reason, then the message: the quota short, how many are ahead)."""
    found = {key: str(job.spec[key]) for key in ("queue", "user") if job.spec.get(key)}
    if job.status == "QUEUING" and job.message:
        found["waiting"] = f"{job.reason}: {job.message}" if job.reason else job.message
    return found


def event_info(event: EventRecord) -> dict[str, Any]:
    return {"type": event.type, "reason": event.reason, "message": event.message,
            "time": event.at.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "age": short_duration((utcnow() - event.at).total_seconds())}

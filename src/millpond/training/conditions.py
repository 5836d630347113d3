"""A job's status as the Kubeflow operators write it: conditions and replicaStatuses.

The training operator (v1 kinds) appends ``Created``, then ``Running``, then ``Succeeded`` or
``Failed`` (the Running condition turning ``False``), with reasons ``<Kind>Created``…. Trainer v2
knows only ``Suspended``, ``Complete`` and ``Failed`` on a TrainJob (``trainjob_types.go``): a
TrainJob that waits for its queue is Suspended, one that runs has no condition (the Kubeflow SDK
calls exactly that ``Running``), one that ended is Complete or Failed. ``kubectl get``'s STATE column
is the last condition's type (empty for a running TrainJob, as upstream's printer column shows it).
``replicaStatuses`` counts each replica type's instances active, succeeded and failed.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from millpond.store.training import InstanceRecord, JobRecord
from millpond.training.kinds import job_kind

_ACTIVE = frozenset({"Pending", "Running"})
# Kueue's reasons for an Evicted workload: while the job waits to be admitted again, an Evicted condition says why
EVICTED = frozenset({"Preempted", "ClusterQueueStopped", "LocalQueueStopped", "Evicted"})
# the supervisor's reasons while it waits QUEUING (Kueue's Pending: its queue has no room yet)
WAITING = frozenset({"Queuing", "WaitingForDataset", "Pending", "WorkloadPriorityClassNotFound"}) | EVICTED


def _stamp(moment: dt.datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(kind: str, what: str, moment: dt.datetime | None, message: str, reason: str | None = None,
               status: str = "True") -> dict[str, Any]:
    stamp = _stamp(moment)
    return {"type": what, "status": status, "reason": reason or f"{kind}{what}", "message": message,
            "lastUpdateTime": stamp, "lastTransitionTime": stamp}


def conditions(job: JobRecord) -> list[dict[str, Any]]:
    kind = job_kind(job.trainer, job.spec.get("manifest") or {})
    name = f"{job.namespace}/{job.name}"
    created = f"{kind} {name} is created."
    if job.status == "QUEUING" and job.reason in WAITING and job.message:
        created = f"{created} Waiting: {job.message}"  # what its pods would show as Pending, and why
    trainjob = kind == "TrainJob"
    found = [] if trainjob else [_condition(kind, "Created", job.created_at, created)]
    evicted = job.status == "QUEUING" and job.reason in EVICTED  # Kueue took its quota back: it waits again
    if trainjob and job.status == "QUEUING" and not evicted:  # Kueue keeps it suspended until admitted
        found.append(_condition(kind, "Suspended", job.created_at, created, reason="Suspended"))
    ran = job.started_at is not None and not trainjob
    if ran:
        found.append(_condition(kind, "Running", job.started_at, f"{kind} {name} is running.",
                                status="False" if job.finished or evicted else "True"))
    if evicted:  # as Kueue's Workload shows it until it is admitted again: the last condition, kubectl's STATE
        found.append(_condition(kind, "Evicted", job.started_at or job.created_at, job.message or "",
                                reason=job.reason))
    if job.status == "SUCCEEDED":
        what = "Complete" if trainjob else "Succeeded"
        done = job.message or f"{kind} {name} is successfully completed."
        found.append(_condition(kind, what, job.finished_at, done))
    elif job.status == "FAILED":
        found.append(_condition(kind, "Failed", job.finished_at, job.message or f"{kind} {name} has failed.",
                                reason=job.reason if job.reason and job.reason != "JobFailed" else f"{kind}Failed"))
    return found


def replica_statuses(job: JobRecord, instances: list[InstanceRecord]) -> dict[str, dict[str, int]]:
    """Per replica type (as the manifest spells it: ``Master``, ``PS``…), its instances' counts."""
    names = {role.lower(): role for role in _replica_types(job)}
    statuses: dict[str, dict[str, int]] = {}
    for instance in instances:
        counts = statuses.setdefault(names.get(instance.role, instance.role.capitalize()), {})
        key = "active" if instance.status in _ACTIVE else instance.status.lower()
        if key in ("active", "succeeded", "failed"):
            counts[key] = counts.get(key, 0) + 1
    return statuses


def _replica_types(job: JobRecord) -> list[str]:
    spec = (job.spec.get("manifest") or {}).get("spec") or {}
    for key, value in spec.items():
        if key.endswith("ReplicaSpecs") and isinstance(value, dict):
            return list(value)
    return ["Master", "Worker", "Launcher", "Chief", "PS", "Evaluator", "Node"]


def job_status(job: JobRecord, instances: list[InstanceRecord]) -> dict[str, Any]:
    """The ``status`` of ``get -o yaml``: conditions, replicaStatuses, startTime, completionTime."""
    status: dict[str, Any] = {"conditions": conditions(job), "replicaStatuses": replica_statuses(job, instances)}
    if job.started_at:
        status["startTime"] = _stamp(job.started_at)
    if job.finished_at:
        status["completionTime"] = _stamp(job.finished_at)
    return status


def state(job: JobRecord) -> str:
    """kubectl's STATE column: the last condition's type ("" for none: a running TrainJob)."""
    found = conditions(job)
    return str(found[-1]["type"]) if found else ""

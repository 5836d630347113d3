"""A Job's controller process: started when the Job is created, judged by every reader, ended by ``delete``.

``start`` spawns ``training.batch.controller`` detached (``millpond ps`` lists it as ``batch-job``) and
records it (pid + start ticks) in the Job's row. Every read goes through ``observed``, the liveness
reconciler of one Job, as the training jobs' readers do:

1. NEVER_STARTED: no controller recorded ``UNSTARTED_GRACE_S`` after the Job was created → Failed;
2. SUPERVISOR_DIED: the recorded controller no longer runs (``kill -9``, the machine restarted) while
   the Job is unfinished → its pods' processes are killed (their groups and every process carrying
   their mark), the pods Failed, the Job Failed ``SupervisorDied`` saying which pid died;
3. EXPIRED: finished longer ago than ``ttlSecondsAfterFinished`` (its controller, which deletes it
   then, was gone) → deleted, as Kubernetes' TTL controller deletes it.

Each write after a death is a compare-and-set on the dead process's record (``swap_process``), and the
status is read again after the process was seen gone, so a controller that ended the Job itself is
never contradicted and two readers never both write.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from enum import Enum
from typing import Any

from millpond.runners.detached import spawn_detached
from millpond.runners.process_groups import MARK_VAR, end_groups, end_marked
from millpond.runners.processes import ProcessIdentity
from millpond.runners.reconcile import applied
from millpond.settings import Settings
from millpond.store.keys import utcnow
from millpond.store.resources import ProcessRecord, Resource, ResourceStore
from millpond.training.batch import events, lineage
from millpond.training.batch import status as job_status
from millpond.training.batch.kinds import KIND
from millpond.training.batch.manifest import settings_of
from millpond.training.batch.pods import controller_log, ended_by_job, job_folder, read_pods, write_pods
from millpond.training.images import remove_containers
from millpond.training.instances import mark_of

PROCESS_KIND = "batch-job"  # among the home's background processes (millpond ps)
UNSTARTED_GRACE_S = 60.0
DELETE_WAIT_S = 15.0
RECONCILER = "batch-jobs"


class JobTransition(Enum):
    """What a reader does to a Job whose controller it finds gone (see the module's docstring)."""

    NEVER_STARTED = "no controller recorded UNSTARTED_GRACE_S after the Job was created: Failed"
    SUPERVISOR_DIED = "its controller no longer runs: its pods are ended, the Job Failed (SupervisorDied)"
    EXPIRED = "finished longer ago than ttlSecondsAfterFinished: deleted"


def start(store: ResourceStore, resource: Resource, settings: Settings, user: str = "") -> None:
    """Spawn the Job's controller and record it; a controller that cannot start fails the Job, saying why."""
    try:
        process = spawn_detached(
            "millpond.training.batch.controller", [resource.namespace, resource.name, resource.uid, user],
            log=controller_log(resource.uid, settings),
            env={name: value for name, value in os.environ.items() if name != MARK_VAR},
            kind=PROCESS_KIND, served=f"{resource.namespace}/{resource.name}", uid=resource.uid)
    except OSError as exc:
        why = f"cannot start its controller: {exc}"
        store.set_status(KIND, resource.name, {"conditions": [job_status.condition("Failed", "JobFailed", why)]},
                         resource.namespace)
        lineage.job_ended(store.get(KIND, resource.name, resource.namespace), settings)
        return
    if process.start is not None:
        store.record_process(KIND, resource.name, resource.namespace, ProcessRecord(process.pid, process.start))


def due(resource: Resource, now: dt.datetime) -> JobTransition | None:
    """The transition a Job is due, from its row, its age and its controller's process (nothing changed)."""
    status = resource.status or {}
    if job_status.finished(status):
        ttl = settings_of(resource.manifest).ttl_s
        done = job_status.completion_time(status)
        if ttl is not None and done is not None and (now - done).total_seconds() > ttl + 1:
            process = resource.process
            if process is None or not ProcessIdentity(process.pid, process.start).is_running():
                return JobTransition.EXPIRED
        return None
    if resource.process is None:
        late = (now - resource.created_at).total_seconds() >= UNSTARTED_GRACE_S
        return JobTransition.NEVER_STARTED if late else None
    alive = ProcessIdentity(resource.process.pid, resource.process.start).is_running()
    return None if alive else JobTransition.SUPERVISOR_DIED


def observed(store: ResourceStore, resource: Resource) -> Resource | None:
    """The Job as it is now (None: it expired and was deleted); see the module's docstring."""
    transition = due(resource, utcnow())
    if transition is None:
        return resource
    subject = f"Job {resource.namespace}/{resource.name}"
    if transition is JobTransition.EXPIRED:
        remove(store, resource)
        applied(RECONCILER, transition, subject, uid=resource.uid)
        return None
    fresh = store.get(KIND, resource.name, resource.namespace)
    if fresh is None or fresh.uid != resource.uid or job_status.finished(fresh.status or {}):
        return fresh
    reason = "SupervisorDied" if transition is JobTransition.SUPERVISOR_DIED else "JobFailed"
    why = (f"its controller (pid {resource.process.pid}) died" if resource.process is not None
           else "its controller never started")
    pods = read_pods(resource.uid)
    end_groups([(pod.pid, pod.pid_start) for pod in pods if pod.active])
    end_marked(*(mark_of(resource.uid, pod.name) for pod in pods))
    remove_containers(job_folder(resource.uid), resource.uid)  # a container does not end with its runtime's client
    pods = ended_by_job(pods, reason, why)
    status: dict[str, Any] = dict(fresh.status or {})
    conditions = list(status.get("conditions") or ())
    for kind in ("FailureTarget", "Failed"):
        conditions = job_status.with_condition(conditions, kind, reason, why)
    status = {**{k: v for k, v in status.items() if k not in ("active", "ready")}, "conditions": conditions,
              **job_status.counts(pods, indexed=settings_of(fresh.manifest).indexed)}
    if store.swap_process(KIND, resource.name, resource.namespace, resource.process, None, status):
        write_pods(resource.uid, pods)
        events.record(resource.uid, reason, why + "; its pods were stopped", "Warning")
        lineage.job_ended(store.get(KIND, resource.name, resource.namespace))
        applied(RECONCILER, transition, subject, why, uid=resource.uid)
    return store.get(KIND, resource.name, resource.namespace)


def remove(store: ResourceStore, resource: Resource) -> None:
    """Forget the Job: its pods' processes ended, its row and its folder removed."""
    pods = read_pods(resource.uid)
    end_groups([(pod.pid, pod.pid_start) for pod in pods if pod.active])
    end_marked(*(mark_of(resource.uid, pod.name) for pod in pods))
    remove_containers(job_folder(resource.uid), resource.uid)
    store.delete(KIND, resource.name, resource.namespace)
    shutil.rmtree(job_folder(resource.uid), ignore_errors=True)


def delete(store: ResourceStore, resource: Resource) -> None:
    """Stop the controller (it stops its pods and gives back its workload), then forget the Job."""
    if resource.process is not None:
        ProcessIdentity(resource.process.pid, resource.process.start).stop(DELETE_WAIT_S)
    remove(store, resource)

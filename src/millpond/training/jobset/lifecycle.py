"""A JobSet's controller process: started when the JobSet is created, resumed by any reader, ended by ``delete``.

``start`` spawns ``training.jobset.controller`` detached (``millpond ps`` lists it as ``jobset``) and records
it (pid + start ticks) in the JobSet's row. Every read goes through ``observed``: a JobSet whose recorded
controller no longer runs (``kill -9``, the machine restarted) while unfinished gets a new controller, the
record swapped compare-and-set on the dead one (``resumes`` counted), so of two readers exactly one resumes
it (the other's spare process is ended). Nothing is lost: the JobSet's Jobs run under their own controllers
(``training.batch``) meanwhile, its restarts are in its status, and the new controller adopts the Jobs it
finds by their ``jobset-uid`` label, making only the missing ones: no Job runs twice.
"""

from __future__ import annotations

import os
import shutil
from enum import Enum

from millpond.runners.detached import spawn_detached
from millpond.runners.process_groups import MARK_VAR
from millpond.runners.processes import ProcessIdentity
from millpond.runners.reconcile import applied
from millpond.settings import Settings, load_settings
from millpond.store.resources import ProcessRecord, Resource, ResourceStore
from millpond.training.batch import events
from millpond.training.batch import lifecycle as job_lifecycle
from millpond.training.batch.kinds import KIND as JOB_KIND
from millpond.training.batch.pods import job_folder
from millpond.training.jobset import status
from millpond.training.jobset.jobs import JOBSET_UID
from millpond.training.jobset.kinds import KIND

PROCESS_KIND = "jobset"  # among the home's background processes (millpond ps)
DELETE_WAIT_S = 15.0
RECONCILER = "jobsets"


class JobSetTransition(Enum):
    """What a reader does to a JobSet whose controller it finds gone."""

    RESUMED = "its controller no longer runs while it is unfinished: a new one takes over its Jobs"


def _spawn(resource: Resource, settings: Settings, user: str) -> ProcessIdentity:
    return spawn_detached(
        "millpond.training.jobset.controller", [resource.namespace, resource.name, resource.uid, user],
        log=job_folder(resource.uid, settings) / "controller.log",
        env={name: value for name, value in os.environ.items() if name != MARK_VAR},
        kind=PROCESS_KIND, served=f"{resource.namespace}/{resource.name}", uid=resource.uid)


def start(store: ResourceStore, resource: Resource, settings: Settings, user: str = "") -> None:
    """Spawn the JobSet's controller and record it; one that cannot start fails the JobSet, saying why."""
    try:
        process = _spawn(resource, settings, user)
    except OSError as exc:
        store.set_status(KIND, resource.name, status.failed({}, "ControllerFailed", f"cannot start its controller: "
                                                             f"{exc}"), resource.namespace)
        return
    if process.start is not None:
        store.record_process(KIND, resource.name, resource.namespace, ProcessRecord(process.pid, process.start))


def observed(store: ResourceStore, resource: Resource) -> Resource:
    """The JobSet as it is now, its controller resumed if it died while the JobSet was unfinished."""
    dead = resource.process
    if dead is None or status.finished(resource.status or {}) or ProcessIdentity(dead.pid, dead.start).is_running():
        return resource
    settings = load_settings()
    try:
        process = _spawn(resource, settings, "")
    except OSError:
        return resource  # the next reader tries again
    if process.start is None or not store.swap_process(KIND, resource.name, resource.namespace, dead,
                                                       ProcessRecord(process.pid, process.start, dead.resumes + 1)):
        process.kill_group()  # another reader resumed it first
        return store.get(KIND, resource.name, resource.namespace) or resource
    why = f"its controller (pid {dead.pid}) died; resumed by pid {process.pid}"
    events.record(resource.uid, "ControllerResumed", why, settings=settings)
    applied(RECONCILER, JobSetTransition.RESUMED, f"JobSet {resource.namespace}/{resource.name}", why, uid=resource.uid)
    return store.get(KIND, resource.name, resource.namespace) or resource


def children(store: ResourceStore, namespace: str, uid: str) -> list[Resource]:
    """The JobSet's Jobs (by their ``jobset-uid`` label), each observed by the batch family's reader."""
    found = []
    for job in store.list(JOB_KIND, namespace):
        if (job.manifest["metadata"].get("labels") or {}).get(JOBSET_UID) == uid:
            current = job_lifecycle.observed(store, job)
            if current is not None:
                found.append(current)
    return found


def delete(store: ResourceStore, resource: Resource) -> None:
    """Stop the controller, delete the JobSet's Jobs (and their pods), then forget it."""
    if resource.process is not None:
        ProcessIdentity(resource.process.pid, resource.process.start).stop(DELETE_WAIT_S)
    for job in children(store, resource.namespace, resource.uid):
        job_lifecycle.delete(store, job)
    store.delete(KIND, resource.name, resource.namespace)
    shutil.rmtree(job_folder(resource.uid), ignore_errors=True)

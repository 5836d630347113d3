"""Training jobs over HTTP, under ``/apis/millpond/v1/jobs``: what ``arena list/get/logs/delete`` show.

- ``GET /jobs``: a page of jobs (``namespace``, or ``all_namespaces``; KFP's ``page_token``,
  ``page_size``, ``sort_by`` and ``filter`` on ``name``, ``namespace``, ``status``, ``trainer``,
  ``created_at``), each as Arena's ``TrainingJobInfo`` (``arena get -o json``).
- ``GET /jobs/{namespace}/{name}``: one job as ``TrainingJobInfo``.
- ``GET /jobs/{namespace}/{name}/events``: its events, as ``arena get -e`` lists them.
- ``GET /jobs/{namespace}/{name}/logs?instance=&tail=``: an instance's log (the chief's by
  default) as plain text, the last ``tail`` lines of at most its last ``MAX_LOG_BYTES`` bytes.
- ``DELETE /jobs/{namespace}/{name}``: stop a running job's processes and forget it.

Every read goes through ``training.jobs`` (a job whose supervisor died is marked FAILED, as
``arena get`` would); an unknown job or instance is 404, a bad parameter 400.

Multi-user mode (``route_access``): a job is its Kubeflow kind (``pytorchjobs``, ``tfjobs``, ``mpijobs``
of ``kubeflow.org``, ``trainjobs`` of ``trainer.kubeflow.org``, ``rayjobs`` of ``ray.io``) in its namespace:
``get`` to read it and its events, ``delete`` to delete it, and its log is a ``get`` on ``pods/log`` there
too (``arena logs`` reads its pods' logs). A job another namespace holds is refused (403) before anything
is read, whether or not it exists (a name that names none: refused unless the caller may ``get`` some job
kind there). The list shows the namespaces where the caller may ``list`` jobs (403 for one it names and may
not).
"""

from __future__ import annotations

import threading
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import PlainTextResponse

from millpond.access.attributes import Attributes
from millpond.errors import NotFoundError
from millpond.kind_handler import KindName
from millpond.kinds import REGISTRY
from millpond.server.callers import require
from millpond.server.listing import list_query, next_page_token
from millpond.server.route_access import kind_attributes, list_scope, require_any
from millpond.server.state import state_of
from millpond.settings import Settings
from millpond.store.training import InstanceRecord, JobRecord, JobStore
from millpond.training import jobs, logs, views
from millpond.training.kinds import KIND_OF_TRAINER, job_kind
from millpond.training.paths import instance_log

PREFIX = "/apis/millpond/v1"
MAX_LOG_LINES = 10_000
MAX_LOG_BYTES = 1024 * 1024
router = APIRouter(tags=["TrainingJobs"])


def check_jobs(settings: Settings) -> None:
    """At server start: every unfinished job whose supervisor died while nothing watched is marked FAILED
    (its instances' process groups killed), as the first read would, without waiting for one.

    In a background thread, so the API answers at once (a read meanwhile checks the job it reads too).
    """
    threading.Thread(target=jobs.reconcile_all, args=(JobStore(settings),), daemon=True,
                     name="check-training-jobs").start()


def _store(request: Request) -> JobStore:
    return state_of(request).jobs


def _job_kinds() -> list[KindName]:
    """The kinds a training job shows as (what ``arena submit`` makes, and TrainJob)."""
    names = [*KIND_OF_TRAINER.values(), "TrainJob"]
    return [entry for entry in (REGISTRY.named(kind) for kind in dict.fromkeys(names)) if entry is not None]


def _job(request: Request, namespace: str, name: str, verb: str = "get") -> JobRecord:
    """The job, once the caller may ``verb`` it (refused before a missing job is told apart from a hidden one)."""
    try:
        job = jobs.get(name, namespace, _store(request))
    except NotFoundError:
        require_any(request, [kind_attributes(entry, verb, namespace, name) for entry in _job_kinds()])
        raise
    entry = REGISTRY.named(job_kind(job.trainer, job.spec.get("manifest") or {}))
    require_any(request, [kind_attributes(entry, verb, namespace, name)] if entry is not None else
                [kind_attributes(kind, verb, namespace, name) for kind in _job_kinds()])
    return job


@router.get("/jobs")
def list_training_jobs(
    request: Request, namespace: str = "default", all_namespaces: bool = False, page_token: str | None = None,
    page_size: int | None = None, sort_by: str | None = None, filter: str | None = None,
) -> dict[str, Any]:
    """A page of training jobs, each as ``arena get -o json`` prints it."""
    store = _store(request)
    kinds = [(entry.group, entry.plural) for entry in _job_kinds()]
    where: str | frozenset[str] | None
    if all_namespaces:
        where = list_scope(request, kinds, lambda: {job.namespace for job in store.list(None)})
    else:
        require_any(request, [Attributes("list", namespace, group, plural) for group, plural in kinds])
        where = namespace
    page = jobs.page_jobs(where, list_query(filter, sort_by, page_token, page_size), store)
    return {"jobs": [views.job_info(job, store.instances(job.uid)) for job in page.items],
            "total_size": page.total, "next_page_token": next_page_token(page)}


@router.get("/jobs/{namespace}/{name}")
def get_training_job(namespace: str, name: str, request: Request) -> dict[str, Any]:
    """One job: Arena's ``TrainingJobInfo`` (status, trainer, duration, GPUs, instances)."""
    job = _job(request, namespace, name)
    return views.job_info(job, _store(request).instances(job.uid))


@router.get("/jobs/{namespace}/{name}/events")
def training_job_events(namespace: str, name: str, request: Request) -> dict[str, Any]:
    """The job's events, oldest first (why it waits QUEUING, restarts, failures)."""
    job = _job(request, namespace, name)
    require(request, Attributes("list", namespace, "", "events"))
    return {"events": [views.event_info(event) for event in _store(request).events(job.uid)]}


def _chosen(job: JobRecord, instances: list[InstanceRecord], wanted: str) -> str:
    names = [instance.name for instance in instances]
    if wanted:
        if wanted not in names:
            raise NotFoundError(f"the job {job.name} has no instance {wanted!r} (its instances: "
                                f"{', '.join(names) or 'none yet'})")
        return wanted
    chief = next((i.name for i in instances if i.role in ("master", "chief", "launcher")), "")
    return chief or (names[0] if names else "")


@router.get("/jobs/{namespace}/{name}/logs", response_class=PlainTextResponse,
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}})
def training_job_logs(
    namespace: str, name: str, request: Request, instance: str = "",
    tail: int = Query(1000, ge=0, le=MAX_LOG_LINES), timestamps: bool = False,
) -> PlainTextResponse:
    """An instance's log (the chief's by default): its last ``tail`` lines, as plain text."""
    job = _job(request, namespace, name)
    require(request, Attributes("get", namespace, "", "pods", "log"))  # what arena logs reads
    chosen = _chosen(job, _store(request).instances(job.uid), instance)
    lines = logs.tail_bounded(instance_log(job.uid, chosen), tail, MAX_LOG_BYTES, timestamps) if chosen else []
    return PlainTextResponse("".join(line + "\n" for line in lines), headers={
        "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store", "X-Millpond-Instance": chosen})


@router.delete("/jobs/{namespace}/{name}")
def delete_training_job(namespace: str, name: str, request: Request) -> dict[str, Any]:
    """Delete the job; a running one's processes are stopped first (as ``arena delete``)."""
    _job(request, namespace, name, "delete")
    jobs.delete(name, namespace, _store(request))
    return {"name": name, "namespace": namespace,
            "message": f"The training job {name} has been deleted successfully"}

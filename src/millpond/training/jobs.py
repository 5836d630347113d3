"""What every front end does with training jobs: submit, read (with the supervisor checked), delete, prune.

``submit`` checks the spec (datasets exist, the machine can ever meet the request), records the
job QUEUING and starts its supervisor in the background; nothing is recorded when a check fails.
Every read goes through ``observed``: an unfinished job whose recorded supervisor is no longer
running (pid + start ticks, as ``runners.processes`` tells) was abandoned — killed with
``kill -9``, or its machine restarted — and is marked FAILED, saying so, with its instances'
process groups killed. Only one reader wins that write (a compare-and-set on the dead
supervisor), and a supervisor that ended the job itself is never contradicted.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import shutil
from dataclasses import dataclass, replace
from enum import Enum

from millpond.errors import NotFoundError, UserError
from millpond.runners.detached import spawn_detached
from millpond.runners.process_groups import MARK_VAR, end_groups, end_marked
from millpond.runners.processes import ProcessIdentity
from millpond.runners.ray_cluster import connect
from millpond.runners.reconcile import Applied, applied
from millpond.runners.reconcile import reconcile as reconcile_pass
from millpond.scheduling import pod_room
from millpond.scheduling.queues.submission import check_priority, os_user
from millpond.store.keys import utcnow
from millpond.store.listing import ListQuery, Page
from millpond.store.resources import ResourceStore
from millpond.store.training import JobRecord, JobStore
from millpond.training import lineage
from millpond.training.images import remove_containers
from millpond.training.instances import mark_of
from millpond.training.launch import PLANNERS
from millpond.training.launch_mpi import slots_per_worker
from millpond.training.paths import job_folder, supervisor_log
from millpond.training.ray_jobs import check as check_on_cluster
from millpond.training.ray_jobs import end_everywhere
from millpond.training.resources import allocator
from millpond.training.spec import JobSpec, Trainer, spec_from_json, spec_to_json

NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
UNSTARTED_GRACE_S = 60.0  # a job recorded this long with no supervisor lost it before it started
DELETE_WAIT_S = 30.0

logger = logging.getLogger(__name__)


def check(spec: JobSpec, *, as_manifest: bool = False) -> None:
    """Refuse a spec that can never run here (UserError: one line, nothing recorded).

    ``as_manifest``: what Kubernetes accepts and leaves Pending is accepted and waits QUEUING,
    saying why — a request larger than this machine ("Insufficient cpu"), and a claim naming a
    dataset that does not exist yet (the supervisor starts the job once it does); ``millpond
    apply`` of a manifest does that, while ``arena submit`` refuses both at once (Arena's bad input).
    """
    if spec.trainer not in PLANNERS:
        raise UserError(f"{spec.trainer.value} jobs cannot run on this version of millpond")
    if spec.trainer is Trainer.MPI:
        roles = [(replica.role, replica.replicas) for replica in spec.replicas]
        if sorted(role for role, _ in roles) != ["launcher", "worker"] or ("launcher", 1) not in roles:
            raise UserError("an mpi job here has one launcher and at least one worker (mpirun's ranks)")
        if shutil.which("mpirun") is None:
            raise UserError("an mpi job needs mpirun: install Debian's openmpi-bin (scripts/setup.sh does)")
    if not NAME.match(spec.name) or len(spec.name) > 63:
        raise UserError(f"--name {spec.name!r} must be a DNS-1123 label: lower case letters, digits and '-'")
    if spec.instance_count < 1:
        raise UserError("a job needs at least one instance (--workers is at least 1)")
    if not spec.ray_address:  # a count no machine can hold waits forever: refused, manifest or not
        too_many = pod_room.too_many(spec.instance_count, processes(spec))
        if too_many:
            raise UserError(f"the job {spec.name} can never run here: {too_many}")
    if not as_manifest:  # Arena looks the priority class up before it creates anything; Kueue's webhook does not
        check_priority(spec.priority)
    if any(not replica.command or not replica.command[-1].strip() for replica in spec.replicas):
        raise UserError("no command: put the training command after the flags")
    if spec.trainer is Trainer.RAY:  # a driver runs here: the cluster it joins must answer
        connect(spec.ray_address)
    elif spec.ray_address and spec.total.shares:
        raise UserError("a GPU share (--gpumemory, aliyun.com/gpu-mem) is scheduled on this machine's GPUs; "
                        "on a Ray cluster ask for whole GPUs")
    elif spec.ray_address:  # cluster mode: the cluster's nodes, not this machine, must be able to hold it
        check_on_cluster(spec)
        return
    resources = ResourceStore()
    for data in spec.data:
        if not as_manifest and resources.get("Dataset", data.dataset, spec.namespace) is None:
            raise NotFoundError(f"--data {data.dataset}:{data.path}: no dataset {data.dataset} in namespace "
                                f"{spec.namespace} (millpond get datasets)")
    for host in spec.data_dirs:
        if not os.path.isdir(host.host):
            raise UserError(f"--data-dir {host.host}:{host.path}: {host.host} is not a folder on this machine")
    why = allocator().impossible(spec.total, spec.namespace, spec.instance_count)
    if why and not as_manifest:
        raise UserError(f"the job {spec.name} can never run here: {why}")


def processes(spec: JobSpec) -> int:
    """The processes the job runs at once: an MPI launcher and its ranks (workers × slots), else each
    instance's (torchrun's ``--nproc-per-node``/``PET_NPROC_PER_NODE`` per instance, else one)."""
    if spec.trainer is Trainer.MPI:
        workers = sum(replica.replicas for replica in spec.replicas if replica.role == "worker")
        return 1 + workers * slots_per_worker(spec)
    total = 0
    for replica in spec.replicas:
        named = dict(replica.env).get("PET_NPROC_PER_NODE", "")
        total += replica.replicas * (spec.nproc_per_node or (int(named) if named.isdigit() else 1))
    return total


def submit(spec: JobSpec, store: JobStore | None = None, *, as_manifest: bool = False,
           user: str = "") -> JobRecord:
    """Record the job QUEUING and start its supervisor; returns at once.

    ``user`` is who asked (the server's caller); the spec's own, else this process's OS user.
    """
    check(spec, as_manifest=as_manifest)
    spec = replace(spec, user=spec.user or user or os_user())
    store = store or JobStore()
    job = store.create(spec.name, spec.namespace, spec.trainer.value, spec_to_json(spec), "QUEUING",
                       "Submitted", "waiting for its supervisor")
    store.add_event(job.uid, "Submitted", f"{spec.trainer.value} {spec.name}: {spec.instance_count} instances")
    _spawn(store, job)
    return store.by_uid(job.uid) or job


def _spawn(store: JobStore, job: JobRecord) -> None:
    """``python -m millpond.training.supervisor UID`` in its own session, recorded by pid + start ticks."""
    try:
        supervisor = spawn_detached(
            "millpond.training.supervisor", [job.uid], log=supervisor_log(job.uid),
            # submitted from a task or an instance: the job is not one of its processes, to end with it
            env={name: value for name, value in os.environ.items() if name != MARK_VAR},
            kind="training-job", served=f"{job.namespace}/{job.name}", uid=job.uid,
        )
    except OSError as exc:
        if store.set_status(job.uid, "FAILED", "JobFailed", f"cannot start its supervisor: {exc}"):
            lineage.job_ended(store.by_uid(job.uid))
        return
    if supervisor.start is not None:
        store.set_supervisor(job.uid, supervisor.pid, supervisor.start)


def supervisor_of(job: JobRecord) -> ProcessIdentity:
    """The job's supervisor as recorded (pid 0, never alive, when none was)."""
    return ProcessIdentity(job.supervisor_pid or 0, job.supervisor_start)


class JobTransition(Enum):
    """What the training-job reconciler does to an unfinished job."""

    NEVER_STARTED = "no supervisor was recorded UNSTARTED_GRACE_S after it was submitted: FAILED"
    SUPERVISOR_DIED = "its recorded supervisor no longer runs: its instances are ended, FAILED (SupervisorDied)"


@dataclass(frozen=True)
class JobSeen:
    """One unfinished job as observed, and the transition it is due (None: its supervisor runs, or may yet start)."""

    job: JobRecord
    due: JobTransition | None


@dataclass(frozen=True)
class JobsSnapshot:
    """The home's unfinished jobs, observed."""

    jobs: tuple[JobSeen, ...]


def observe_job(job: JobRecord) -> JobSeen:
    """Which transition an unfinished job is due, from its record, its age and its supervisor's process."""
    if job.supervisor_pid is None:
        late = (utcnow() - job.created_at).total_seconds() >= UNSTARTED_GRACE_S
        return JobSeen(job, JobTransition.NEVER_STARTED if late else None)
    return JobSeen(job, None if supervisor_of(job).is_running() else JobTransition.SUPERVISOR_DIED)


def step_job(store: JobStore, seen: JobSeen) -> tuple[JobRecord, Applied | None]:
    """Apply the transition ``seen`` is due; the job as it is now, and the transition if this call applied it.

    A supervisor that ended the job itself after it was observed is never contradicted, and of two
    readers seeing the same death only one writes it (a compare-and-set on the dead supervisor).
    """
    job = seen.job
    subject = f"{job.namespace}/{job.name}"
    if seen.due is JobTransition.NEVER_STARTED:
        if store.set_status(job.uid, "FAILED", "JobFailed", "its supervisor never started", supervisor=(None, None)):
            lineage.job_ended(store.by_uid(job.uid))
        return store.by_uid(job.uid) or job, applied(JobsReconciler.name, seen.due, subject, uid=job.uid)
    if seen.due is not JobTransition.SUPERVISOR_DIED:
        return job, None
    fresh = store.by_uid(job.uid)
    if fresh is None or fresh.finished:
        return fresh or job, None
    _end_instances(store, job)
    _end_on_cluster(job)
    why = f"its supervisor (pid {job.supervisor_pid}) died"
    done = None
    if store.set_status(job.uid, "FAILED", "SupervisorDied", why,
                        supervisor=(job.supervisor_pid, job.supervisor_start)):
        store.add_event(job.uid, "SupervisorDied", why + "; its instances were stopped", "Warning")
        for instance in store.instances(job.uid):
            if instance.status in ("Pending", "Running"):
                store.update_instance(job.uid, instance.name, status="Failed", finished_at=utcnow())
        lineage.job_ended(store.by_uid(job.uid))
        done = applied(JobsReconciler.name, seen.due, subject, why, uid=job.uid)
    return store.by_uid(job.uid) or fresh, done


def observed(store: JobStore, job: JobRecord) -> JobRecord:
    """The job as it is: FAILED (and its instances killed) if its supervisor died before ending it."""
    if job.finished:
        return job
    seen = observe_job(job)
    return job if seen.due is None else step_job(store, seen)[0]


def _end_instances(store: JobStore, job: JobRecord) -> None:
    """SIGKILL what the job's instances left here: their groups and sessions, and every process carrying
    an instance's mark (what moved out of both: ``setsid sleep 60 &``), and its containers."""
    instances = store.instances(job.uid)
    end_groups([(instance.pid, instance.pid_start) for instance in instances])
    end_marked(*(mark_of(job.uid, instance.name) for instance in instances))
    remove_containers(job_folder(job.uid), job.uid)  # a container does not end with its runtime's client


def _end_on_cluster(job: JobRecord) -> None:
    """A Ray job's instances run on the cluster's nodes: end what is left of them there."""
    spec = spec_from_json(job.spec)
    if not spec.instances_on_ray:
        return
    try:
        end_everywhere(spec.ray_address, job.uid)
    except Exception:  # noqa: BLE001, S110 - the cluster is gone or does not answer: nothing of it to end
        pass


class JobsReconciler:
    """Every unfinished job of the home has a live supervisor, or is FAILED saying why.

    1. NEVER_STARTED: no supervisor recorded ``UNSTARTED_GRACE_S`` after submission → FAILED.
    2. SUPERVISOR_DIED: the recorded supervisor no longer runs (``kill -9``, the machine restarted)
       → its instances' processes are killed, the job FAILED ``SupervisorDied``.
    """

    name = "training-jobs"

    def __init__(self, store: JobStore) -> None:
        self.store = store

    def observe(self) -> JobsSnapshot:
        return JobsSnapshot(tuple(observe_job(job) for job in self.store.list(None) if not job.finished))

    def step(self, snapshot: JobsSnapshot) -> list[Applied]:
        done = []
        for seen in snapshot.jobs:
            try:
                transition = step_job(self.store, seen)[1]
            except Exception:  # noqa: BLE001 - one job must not keep the others unchecked
                logger.exception("checking the supervisor of training job %s/%s", seen.job.namespace, seen.job.name)
                continue
            if transition is not None:
                done.append(transition)
        return done


def reconcile_all(store: JobStore | None = None) -> list[JobRecord]:
    """One reconcile of every unfinished job of the home: the jobs it found abandoned (now FAILED).

    What ``millpond ps`` does, and ``millpond server`` when it starts (a supervisor killed while
    nothing was watching is settled then, not at the first read). One job's trouble (a store
    error) is logged and the others are still checked.
    """
    store = store or JobStore()
    ended = []
    for done in reconcile_pass(JobsReconciler(store)):
        job = store.by_uid(done.uid)
        if job is not None:
            ended.append(job)
    return ended


def get(name: str, namespace: str = "default", store: JobStore | None = None) -> JobRecord:
    store = store or JobStore()
    job = store.get(name, namespace)
    if job is None:
        raise NotFoundError(f"no training job {name} in namespace {namespace} (arena list)")
    return observed(store, job)


def list_jobs(namespace: str | None = "default", store: JobStore | None = None) -> list[JobRecord]:
    """Every job (of ``namespace``, all when None), observed; finished jobs past their TTL are deleted."""
    store = store or JobStore()
    jobs = []
    for job in store.list(namespace):
        job = observed(store, job)
        ttl = job.spec.get("ttl_after_finished_s")
        if job.finished and ttl and job.finished_at and (utcnow() - job.finished_at).total_seconds() > ttl:
            _remove(store, job)
            continue
        jobs.append(job)
    return jobs


def page_jobs(namespace: str | frozenset[str] | None, spec: ListQuery,
              store: JobStore | None = None) -> Page[JobRecord]:
    """One page of jobs (the REST list; ``namespace`` a set: of those namespaces), after every job was observed
    and the expired ones deleted, as ``list_jobs`` does, so a page never shows a job whose supervisor died as
    still running."""
    store = store or JobStore()
    list_jobs(namespace if isinstance(namespace, str) else None, store)
    return store.page(namespace, spec)


def delete(name: str, namespace: str = "default", store: JobStore | None = None) -> None:
    """Stop the job's processes (supervisor first, so it stops its instances), then forget it."""
    store = store or JobStore()
    job = store.get(name, namespace)
    if job is None:
        raise NotFoundError(f"no training job {name} in namespace {namespace} (arena list)")
    supervisor_of(job).stop(DELETE_WAIT_S, poll_s=0.1)
    _remove(store, job)


def _remove(store: JobStore, job: JobRecord) -> None:
    _end_instances(store, job)
    store.delete(job.uid)
    shutil.rmtree(job_folder(job.uid), ignore_errors=True)


def prune(older_than_s: float, namespace: str | None = "default", store: JobStore | None = None) -> list[str]:
    """Delete the finished jobs that ended more than ``older_than_s`` ago; their names."""
    store = store or JobStore()
    cutoff = utcnow() - dt.timedelta(seconds=older_than_s)
    pruned = []
    for job in list_jobs(namespace, store):
        if job.finished and job.finished_at is not None and job.finished_at < cutoff:
            _remove(store, job)
            pruned.append(job.name)
    return pruned

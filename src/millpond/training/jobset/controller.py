"""``python -m millpond.training.jobset.controller NAMESPACE NAME UID``: the JobSet controller of one JobSet.

Started by ``lifecycle.start`` (or, after its death, by a reader: ``lifecycle.observed``). One reconcile step
every ``POLL_S``, as JobSet's controller reconciles (``pkg/controllers/jobset_controller.go``), every input
read afresh from the store, so a new controller takes over where a killed one stopped:

1. the JobSet read: deleted (or re-created: another uid) → exit (``delete`` removes its Jobs);
2. its Jobs read (``lifecycle.children``, each observed by the batch family); those of an earlier restart
   attempt (``restart-attempt`` below ``status.restarts``) are deleted;
3. ``replicatedJobsStatus`` computed; a failed Job → the failure policy, enough succeeded → the success
   policy (``policy.decide``): Completed or Failed ends it (its active Jobs deleted, as upstream deletes them);
   a restart counts ``status.restarts`` (and ``restartsCountTowardsMax``) up, written before any Job is
   deleted, so a controller killed mid-restart is resumed into the same restart;
4. suspended (``spec.suspend``, or labelled for a Kueue queue whose admission is pending or was evicted: the
   whole JobSet is one workload, its pods all its Jobs' pods) → its Jobs are made and kept suspended,
   condition Suspended; resumed → unsuspended;
5. the Jobs of the replicatedJobs that may start (``policy.startable``: InOrder, dependsOn) made if missing,
   each ``batch/v1`` Job stored and its own controller started (``training.batch.lifecycle``): its pods are
   the batch family's.

Once finished the controller gives back its workload and exits. SIGTERM (``delete``) exits at once.
"""

from __future__ import annotations

import signal
import sys
import threading
import traceback
from typing import Any

from millpond.scheduling.ledger import Request
from millpond.scheduling.queues.model import PRIORITY_LABEL, QUEUE_LABEL
from millpond.scheduling.queues.submission import os_user
from millpond.settings import Settings, load_settings
from millpond.store.resources import Resource, ResourceStore
from millpond.training.batch import events
from millpond.training.batch import lifecycle as job_lifecycle
from millpond.training.batch.manifest import check_body, settings_of
from millpond.training.batch.queueing import JobWorkload
from millpond.training.jobset import jobs, policy, status
from millpond.training.jobset.kinds import KIND
from millpond.training.jobset.lifecycle import children
from millpond.training.jobset.manifest import covered
from millpond.training.pod_template import read_pod

POLL_S = 0.25


def _child_of(job: Resource) -> policy.ChildJob:
    labels = job.manifest["metadata"].get("labels") or {}
    settings = settings_of(job.manifest)
    return policy.ChildJob(job.name, labels.get(jobs.RJOB_NAME, ""), int(labels.get(jobs.JOB_INDEX, 0)),
                           int(labels.get(jobs.RESTART_ATTEMPT, 0)), dict(job.status or {}), settings.parallelism,
                           settings.completions, settings.suspend)


def pods_and_request(spec: dict[str, Any]) -> tuple[int, Request]:
    """The JobSet as Kueue's one workload: its pods at once (every Job's), and what the largest pod asks
    (simplified: Kueue counts one pod set per replicatedJob, each with its own requests)."""
    pods, cpu, memory, gpus = 0, 0, 0, 0
    for rjob in spec["replicatedJobs"]:
        job = rjob["template"]["spec"]
        wanted = int(job.get("parallelism", 1))
        if job.get("completions") is not None:
            wanted = min(wanted, int(job["completions"]))
        pods += wanted * int(rjob["replicas"])
        asked = read_pod(job["template"].get("spec") or {}, "", ["spec"], downward=True).resources
        cpu, memory, gpus = max(cpu, asked.cpu_millis), max(memory, asked.memory_bytes), max(gpus, asked.gpus)
    return pods, Request(cpu, memory, gpus)


class Controller:
    """One JobSet's Jobs and status, driven a step at a time."""

    def __init__(self, settings: Settings, namespace: str, name: str, uid: str, user: str = "") -> None:
        self.settings = settings
        self.namespace, self.name, self.uid, self.user = namespace, name, uid, user
        self.store = ResourceStore(settings)
        self.stopping = threading.Event()
        self.workload: JobWorkload | None = None
        self.waiting_said = ""

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                resource = self.store.get(KIND, self.name, self.namespace)
                if resource is None or resource.uid != self.uid:
                    return
                if self.step(resource):
                    return
                self.stopping.wait(POLL_S)
        finally:
            if self.workload is not None:
                self.workload.finish("the JobSet ended")

    def step(self, resource: Resource) -> bool:
        """One reconcile step; True once the JobSet finished."""
        body = resource.manifest
        spec = body["spec"]
        current: dict[str, Any] = dict(resource.status or {})
        if status.finished(current):
            self._end(current)
            return True
        restarts = int(current.get("restarts") or 0)
        found = children(self.store, self.namespace, self.uid)
        for job in [job for job in found if _child_of(job).attempt < restarts]:
            job_lifecycle.delete(self.store, job)
        found = [job for job in found if _child_of(job).attempt >= restarts]
        mine = [_child_of(job) for job in found]
        current["restarts"] = restarts
        current.setdefault("restartsCountTowardsMax", 0)
        current["replicatedJobsStatus"] = policy.rjob_statuses(spec, mine)
        decision = policy.decide(spec, int(current["restartsCountTowardsMax"]), mine)
        if decision.outcome == "Restart":
            current["restarts"] = restarts + 1
            if decision.counts:
                current["restartsCountTowardsMax"] += 1
            events.record(self.uid, "Restarting", f"{decision.message}: restart attempt {restarts + 1}",
                          "Warning", settings=self.settings)
            self._write(current)  # before any Job is deleted: the next step (or controller) deletes them
            return False
        if decision.outcome is not None:
            current = (status.completed if decision.outcome == "Completed" else status.failed)(
                current, decision.reason, decision.message)
            events.record(self.uid, decision.reason, decision.message,
                          "Normal" if decision.outcome == "Completed" else "Warning", settings=self.settings)
            self._write(current)
            self._end(current)
            return True
        suspended = self._suspended(body)
        current = self._suspension(current, suspended, found)
        self._create(body, resource.uid, current, suspended, {job.name for job in found})
        self._write(current)
        return False

    def _suspended(self, body: dict[str, Any]) -> bool:
        """Whether the JobSet must not run now: asked to be suspended, or queued and not (or no longer) admitted."""
        labels = body["metadata"].get("labels") or {}
        if body["spec"].get("suspend"):
            if self.workload is not None:
                self.workload.finish("the JobSet was suspended")
                self.workload = None
            return True
        queue = str(labels.get(QUEUE_LABEL) or "")
        if not queue:
            return False
        if self.workload is None:
            pods, per_pod = pods_and_request(body["spec"])
            self.workload = JobWorkload(self.settings, name=self.name, namespace=self.namespace,
                                        user=self.user or os_user(), queue=queue,
                                        priority=str(labels.get(PRIORITY_LABEL) or ""), pods=pods, per_pod=per_pod)
        standing = self.workload.poll()
        if standing.evicted:
            self._say("Evicted", f"{standing.message}: its Jobs are suspended and it is requeued", "Warning")
            self.workload.requeue()
            return True
        if not standing.admitted:
            self._say(standing.reason, standing.message)
        return not standing.admitted

    def _suspension(self, current: dict[str, Any], suspended: bool, found: list[Resource]) -> dict[str, Any]:
        """The Suspended condition, and each Job's ``suspend`` brought to the JobSet's."""
        was = any(c.get("type") == "Suspended" for c in current.get("conditions") or ())
        if suspended:
            current = status.with_condition(current, "Suspended", *status.SUSPENDED)
        elif was:
            current = status.with_condition(current, "Suspended", *status.RESUMED, value="False")
        for job in found:
            if bool(job.spec.get("suspend")) != suspended and not _child_of(job).succeeded:
                self.store.apply([{**job.manifest, "spec": {**job.manifest["spec"], "suspend": suspended}}])
        return current

    def _create(self, body: dict[str, Any], uid: str, current: dict[str, Any], suspended: bool,
                existing: set[str]) -> None:
        """The missing Jobs of the replicatedJobs that may start now; InOrder's conditions."""
        spec = body["spec"]
        allowed = policy.startable(spec, current["replicatedJobsStatus"])
        for rjob in spec["replicatedJobs"]:
            if rjob["name"] not in allowed:
                continue
            for index in range(int(rjob["replicas"])):
                name = jobs.job_name(self.name, rjob["name"], index)
                if name in existing:
                    continue
                made = self.store.create(check_body(jobs.child(body, uid, rjob, index, int(current["restarts"]),
                                                               suspended), covered).body)
                if made is None:
                    continue  # a Job of that name is there (not this JobSet's): the next step sees it
                job_lifecycle.start(self.store, made, self.settings, self.user)
                events.record(self.uid, "SuccessfulCreate", f"Created job: {name}", settings=self.settings)
        if (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder":
            every = all(s["ready"] + s["succeeded"] >= int(r["replicas"])
                        for s, r in zip(current["replicatedJobsStatus"], spec["replicatedJobs"], strict=True))
            if every:
                current.update(status.with_condition(current, "StartupPolicyInProgress", *status.IN_ORDER, "False"))
                current.update(status.with_condition(current, "StartupPolicyCompleted", *status.IN_ORDER_DONE))
            else:
                current.update(status.with_condition(current, "StartupPolicyInProgress", *status.IN_ORDER))

    def _end(self, current: dict[str, Any]) -> None:
        """A finished JobSet: its active Jobs deleted (their pods stopped), its workload given back."""
        for job in children(self.store, self.namespace, self.uid):
            child = _child_of(job)
            if not child.failed and not child.succeeded:
                job_lifecycle.delete(self.store, job)
        if self.workload is not None:
            self.workload.finish("the JobSet finished")
            self.workload = None

    def _say(self, reason: str, message: str, kind: str = "Normal") -> None:
        if f"{reason}: {message}" != self.waiting_said:
            self.waiting_said = f"{reason}: {message}"
            events.record(self.uid, reason, message, kind, settings=self.settings)

    def _write(self, current: dict[str, Any]) -> None:
        resource = self.store.get(KIND, self.name, self.namespace)
        if resource is not None and resource.uid == self.uid and resource.status != current:
            self.store.set_status(KIND, self.name, current, self.namespace)


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    namespace, name, uid = args[:3]
    controller = Controller(load_settings(), namespace, name, uid, args[3] if len(args) > 3 else "")
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda _num, _frame: controller.stopping.set())
    try:
        controller.run()
    except Exception as exc:  # noqa: BLE001 - any failure ends the JobSet Failed with its cause
        traceback.print_exc()  # into controller.log
        resource = controller.store.get(KIND, name, namespace)
        if resource is not None and resource.uid == uid:
            controller.store.set_status(KIND, name, status.failed(resource.status or {}, "ControllerFailed",
                                        f"its controller failed: {type(exc).__name__}: {exc}"), namespace)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

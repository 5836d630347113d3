"""``python -m millpond.training.batch.controller NAMESPACE NAME UID``: the Job controller of one Job.

Started by ``lifecycle.start`` in a session of its own when the Job is created; it records its pods in
``pods.json`` and the Job's status in the store. One reconcile step at once, then every ``POLL_S`` and
at once when a pod's process ends (so a finished pod is seen in milliseconds, not a poll later), as
Kubernetes' Job controller syncs a Job (every input read afresh, so a re-applied ``parallelism``, ``suspend``,
``activeDeadlineSeconds``, ``backoffLimit`` or TTL takes effect at the next step):

1. read the stored Job: deleted (or re-created: another uid) → every pod is stopped, exit;
2. reap pods that exited: exit 0 → Succeeded; else Failed, or under restartPolicy OnFailure the
   container restarts in its pod after the back-off (each restart counts towards ``backoffLimit``);
3. the end: pod failures (failed pods + restarts) above ``backoffLimit`` → Failed
   ``BackoffLimitExceeded``; running longer than ``activeDeadlineSeconds`` since ``startTime`` → Failed
   ``DeadlineExceeded`` (the active pods stopped, Failed with that reason); ``completions`` pods
   succeeded (Indexed: every index 0..completions-1; no completions: one pod succeeded and none is
   active) → Complete;
4. suspended (``spec.suspend``, or labelled for a Kueue queue and not admitted, or evicted): the
   active pods are deleted (not counted as failures), condition Suspended; resumed: Suspended False,
   ``startTime`` reset, as Kubernetes resets it;
5. pods created up to ``parallelism`` (a queued Job's admitted count, fewer after Kueue's partial
   admission; never more than the completions left; Indexed: the lowest
   indexes neither succeeded nor running, each with ``JOB_COMPLETION_INDEX``), after a failure only
   once its back-off passed (``MILLPOND_JOB_BACKOFF_S``, Kubernetes' 10 s, doubling to 6 min);
6. each Pending pod starts once the machine's ledger grants what its container asks (cpu, memory,
   GPUs: ``CUDA_VISIBLE_DEVICES`` names the ones granted), else waits Pending, saying why, as an
   unschedulable pod waits; in the template's image when the runtime policy says so (``training.images``,
   decided once, before the first pod starts: a pull the policy insists on that fails ends the Job
   Failed with Kubernetes' reason, ``ErrImagePull``/``ErrImageNeverPull``);
7. the status written when it changed (``status``), the pods' record too.

Once the Job is finished the controller gives back what it holds (grants, its workload, its dataset
mounts) and, with ``ttlSecondsAfterFinished``, deletes the Job that long after it finished. SIGTERM
(``delete``) stops every pod and exits. A failure of the controller itself ends the Job Failed
(``SupervisorFailed``, the traceback in ``controller.log``); a controller killed outright is found by
the next reader (``lifecycle.observed``: Failed ``SupervisorDied``).
"""

from __future__ import annotations

import calendar
import signal
import sys
import threading
import time
import traceback
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from millpond.datasets.config import load_config
from millpond.datasets.shared_mounts import release, use
from millpond.errors import MillpondError
from millpond.runners.base import Bind
from millpond.runners.containers.images import ImagePullError
from millpond.runners.processes import own_identity
from millpond.runners.sandbox import sandbox_problem
from millpond.scheduling.ledger import Holder, Ledger
from millpond.scheduling.queues.submission import os_user
from millpond.settings import Settings, load_settings
from millpond.store.resources import Resource, ResourceStore
from millpond.training import images, instances
from millpond.training.batch import decisions, dns, downward, events, lifecycle, lineage
from millpond.training.batch import status as job_status
from millpond.training.batch.kinds import KIND
from millpond.training.batch.manifest import MIN_PARALLELISM, JobSettings, pod_spec, settings_of
from millpond.training.batch.pods import JobPod, JobPods, Phase, job_folder, now_iso, pod_log, pod_name, write_pods
from millpond.training.batch.queueing import JobWorkload
from millpond.training.planned import Planned
from millpond.training.pod_template import Container, read_pod

POLL_S = 0.25


@dataclass
class Live:
    """A pod's process here and the ledger grant it holds."""

    running: instances.Running
    grant: str


class Controller:
    """One Job's pods and status, driven a step at a time."""

    def __init__(self, settings: Settings, namespace: str, name: str, uid: str, user: str = "") -> None:
        self.settings = settings
        self.namespace, self.name, self.uid, self.user = namespace, name, uid, user
        self.store = ResourceStore(settings)
        self.ledger = Ledger(settings)
        self.me = own_identity()
        self.stopping = threading.Event()
        self.wake = threading.Event()  # set by a pod's output closing (it ended) and by stop(): step now
        self.pods: list[JobPod] = []
        self.written: list[JobPod] | None = None  # the pods as last written to pods.json
        self.live: dict[str, Live] = {}
        self.status: dict[str, Any] = {}
        self.conditions: list[dict[str, Any]] = []
        self.start_time: str | None = None
        self.suspended: bool | None = None  # None: not decided yet
        self.last_failure = 0.0  # monotonic time of the last pod failure (the back-off runs from it)
        self.workload: JobWorkload | None = None
        self.admitted_pods = 0  # a queued Job: the pods at once its workload was admitted with (0: not queued)
        self.held = ExitStack()
        self.binds: list[Bind] | None = None
        self.waiting_said = ""
        self.placed: images.RoleRuntime | None = None  # where its pods run (the template's image or the host): once
        self.body: dict[str, Any] = {}  # the stored Job as last read (its pod template's labels, subdomain)

    # ------------------------------------------------------------------ the loop

    def stop(self) -> None:
        """Asked to stop (a signal): the loop ends at once, its pods stopped."""
        self.stopping.set()
        self.wake.set()

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                self.wake.clear()
                resource = self.store.get(KIND, self.name, self.namespace)
                if resource is None or resource.uid != self.uid:
                    return  # deleted: the finally below stops what runs
                if self.step(resource):
                    break
                self.wake.wait(POLL_S)
            else:
                return
            lineage.job_ended(self.store.get(KIND, self.name, self.namespace), self.settings)  # its end is written
            self._after_end()
        finally:
            self._stop_all("")
            self._give_back("the Job ended")

    def step(self, resource: Resource) -> bool:
        """One reconcile step; True once the Job finished."""
        settings = settings_of(resource.manifest)
        template = resource.manifest["spec"].get("template") or {}
        container = read_pod(pod_spec(resource.manifest), "", ["spec", "template", "spec"],
                             (template.get("metadata") or {}).get("annotations"), downward=True)
        self.body = resource.manifest
        self._reap(settings)
        ended = self._end_due(settings)
        if ended is None:
            if self._suspended(settings, container):
                self._set_suspended(True)
            else:
                self._set_suspended(False)
                self._create(settings)
                ended = self._place(resource, container)
                if ended is None:
                    self._start_pending(container)
        self._write(settings)
        return ended is not None

    # ------------------------------------------------------------------ pods

    def _reap(self, settings: JobSettings) -> None:
        for name, live in list(self.live.items()):
            code = live.running.process.poll()
            if code is None:
                continue
            code = 128 - code if code < 0 else code  # killed by signal N: the container's exit code is 128 + N
            instances.end(live.running)
            live.running.pump.join(timeout=instances.LOG_DRAIN_S)
            self.ledger.release(live.grant)
            del self.live[name]
            pod = self._pod(name)
            if code == 0:
                self._update(name, phase=Phase.SUCCEEDED, exit_code=0, finished_at=now_iso(), reason="Completed")
                continue
            self.last_failure = time.monotonic()
            note = images.host_note(self.placed or images.RoleRuntime(None))
            if settings.restart_on_failure:  # the kubelet restarts the container in its pod
                self._update(name, phase=Phase.PENDING, exit_code=code, restarts=pod.restarts + 1,
                             reason="CrashLoopBackOff",
                             message=f"the container exited with code {code}{note}; restarting")
            else:
                self._update(name, phase=Phase.FAILED, exit_code=code, finished_at=now_iso(), reason="Error",
                             message=f"the container exited with code {code}{note}")

    def _create(self, settings: JobSettings) -> None:
        """New Pending pods, up to what the Job wants running now (``decisions.pods_wanted``); above it (a lowered
        parallelism) the newest are deleted."""
        parallelism = min(settings.parallelism, self.admitted_pods or settings.parallelism)
        failed = decisions.failures(self.pods)
        held_back = bool(failed) and time.monotonic() - self.last_failure < decisions.backoff_s(failed)
        changes = decisions.pods_wanted(settings, self.pods, parallelism, held_back=held_back)
        for name in changes.delete:
            self._delete_pod(name)
        for index in changes.create:
            name = pod_name(self.name, index)
            self.pods.append(JobPod(name, index, Phase.PENDING, log_path=str(pod_log(self.uid, name, self.settings)),
                                    created_at=now_iso()))
            events.record(self.uid, "SuccessfulCreate", f"Created pod: {name}", settings=self.settings)

    def _start_pending(self, container: Container) -> None:
        """Start the Pending pods the ledger has room for; the first refused leaves the rest (they ask the
        same) waiting with its reason, so a wide Job costs one ledger query per step, not one per pod."""
        binds = self._binds(container)
        refused = ""
        for pod in list(self.pods):
            if pod.phase != Phase.PENDING or pod.name in self.live or self.stopping.is_set() or binds is None:
                continue
            backing_off = time.monotonic() - self.last_failure < decisions.backoff_s(pod.restarts)
            if pod.reason == "CrashLoopBackOff" and backing_off:
                continue
            grant = None if refused else self.ledger.try_acquire(
                container.resources, Holder("pod", f"{self.namespace}/{pod.name}", *self.me, namespace=self.namespace))
            if grant is None:
                refused = refused or (self.ledger.impossible(container.resources) or
                                      self.ledger.why_waiting(container.resources, self.namespace))
                if pod.reason != "CrashLoopBackOff":
                    self._update(pod.name, message=f"0/1 nodes are available: {refused}", reason="Unschedulable")
                self._say("FailedScheduling", f"0/1 nodes are available: {refused}", "Warning")
                continue
            self._start(pod, container, binds, grant.id, tuple(grant.gpus))

    def _place(self, resource: Resource, container: Container) -> str | None:
        """Where the pods run, decided before the first one starts (the image pulled then); "Failed" when the
        policy insists on an image that cannot be had, else None."""
        if self.placed is not None or not any(pod.phase == Phase.PENDING for pod in self.pods):
            return None
        try:
            placed = images.decide_roles(
                {"pod": container.image_spec}, namespace=self.namespace,
                annotations=(resource.manifest.get("metadata") or {}).get("annotations") or {},
                labels=images.owner_labels(KIND, self.namespace, self.name, self.uid), settings=self.settings,
                log=getattr(sys.stdout, "buffer", None))
        except ImagePullError as exc:
            return self._fail(exc.reason, str(exc))
        except MillpondError as exc:
            return self._fail("JobFailed", str(exc))
        images.record(job_folder(self.uid, self.settings), placed)
        self.placed = placed.of("pod")
        if self.placed.in_image is not None:
            events.record(self.uid, "Pulled", f'Container image "{self.placed.in_image.image}" is present: the pods '
                          f"run in it ({self.placed.in_image.runtime.name})", settings=self.settings)
        elif placed.unused:
            events.record(self.uid, "ImageNotUsed", placed.unused,
                          "Normal" if "policy is host" in placed.unused else "Warning", settings=self.settings)
        return None

    def _start(self, pod: JobPod, container: Container, binds: list[Bind], grant: str, gpus: tuple[int, ...]) -> None:
        env = {**dict(container.env), "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus))}
        if pod.index is not None:
            env["JOB_COMPLETION_INDEX"] = str(pod.index)
        env.update(downward.environment(container.field_env, self._facts(pod)))
        binds = [*binds, *self._hosts(pod, env)]
        role = self.placed or images.RoleRuntime(None)
        argv, cwd, in_image = container.argv, self._cwd(container), images.for_instance(role, pod.name)
        if role.in_image is not None and role.image is not None:
            argv = images.instance_argv(argv, role.image, ())
            cwd = images.cwd_in_image(role, container.working_dir, job_folder(self.uid, self.settings) / "work")
        planned = Planned(pod.name, "pod", pod.index or 0, pod.index or 0, argv, env, gpus)
        try:
            running = instances.start(planned, binds, cwd, Path(pod.log_path), None,
                                      instances.mark_of(self.uid, pod.name), in_image,
                                      job_folder(self.uid, self.settings))
        except MillpondError as exc:
            self.ledger.release(grant)
            self.last_failure = time.monotonic()
            self._update(pod.name, phase=Phase.FAILED, finished_at=now_iso(), reason="StartError", message=str(exc))
            return
        self.live[pod.name] = Live(running, grant)
        threading.Thread(target=self._wake_after, args=(running,), daemon=True, name=f"ended-{pod.name}").start()
        self._update(pod.name, phase=Phase.RUNNING, pid=running.process.pid, pid_start=running.ticks,
                     started_at=now_iso(), reason="", message="")

    def _wake_after(self, running: instances.Running) -> None:
        """The next step at once when the pod's process ends: its output closes, then it exits (a process that
        only closed its output is found running by that step, and the loop polls on)."""
        running.pump.join()
        deadline = time.monotonic() + POLL_S
        while running.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        self.wake.set()

    def _facts(self, pod: JobPod) -> downward.PodFacts:
        """The pod's metadata as its downward API reads it: the template's labels and annotations with the Job
        controller's."""
        template = (self.body.get("spec") or {}).get("template") or {}
        metadata = template.get("metadata") or {}
        pods = JobPods(self.namespace, self.name, self.uid, "", "", dict(metadata.get("labels") or {}),
                       dict(metadata.get("annotations") or {}))
        account = str((template.get("spec") or {}).get("serviceAccountName") or "default")
        return downward.PodFacts(pod.name, self.namespace, f"{self.uid}-{pod.name}", pods.pod_labels(pod),
                                 pods.pod_annotations(pod), account)

    def _hosts(self, pod: JobPod, env: dict[str, str]) -> list[Bind]:
        """An Indexed Job's pod is host ``JOB-INDEX`` (``HOSTNAME``); with a ``subdomain``, its peers' names
        resolve through the subdomain's hosts file, seen as its /etc/hosts (``dns``)."""
        if pod.index is None:
            return []
        env["HOSTNAME"] = f"{self.name}-{pod.index}"
        subdomain = dns.subdomain_of(self.body)
        if not subdomain:
            return []
        if sandbox_problem() is not None:
            self._say("HostnamesNotResolvable", f"the pods' DNS names under {subdomain} do not resolve here: "
                      f"{sandbox_problem()}", "Warning")
            return []
        return [Bind(dns.hosts_file(self.namespace, subdomain, self.settings), "/etc/hosts", read_only=True)]

    def _cwd(self, container: Container) -> Path:
        if container.working_dir:
            return Path(container.working_dir)
        folder = job_folder(self.uid, self.settings) / "work"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def _binds(self, container: Container) -> list[Bind] | None:
        """The pods' volumes (a claim naming a dataset, a hostPath), mounted once; None while a dataset is missing."""
        if self.binds is not None:
            return self.binds
        missing = [d.dataset for d in container.data if self.store.get("Dataset", d.dataset, self.namespace) is None]
        if missing:
            self._say("WaitingForDataset", f"waiting for dataset {missing[0]} (namespace {self.namespace}), which a "
                      "volume names: it does not exist yet")
            return None
        binds = []
        for data in container.data:
            shared = use(data.dataset, self.namespace, f"job {self.namespace}/{self.name}")
            self.held.callback(release, shared)
            binds.append(Bind(shared.folder, data.path, read_only=load_config(data.dataset, self.namespace).read_only))
        binds += [Bind(Path(host.host), host.path) for host in container.data_dirs]
        self.binds = binds
        return binds

    def _delete_pod(self, name: str) -> None:
        """A pod deleted by its Job (suspended, parallelism lowered): stopped and forgotten, not a failure."""
        live = self.live.pop(name, None)
        if live is not None:
            instances.stop([live.running])
            self.ledger.release(live.grant)
        self.pods = [pod for pod in self.pods if pod.name != name]
        events.record(self.uid, "SuccessfulDelete", f"Deleted pod: {name}", settings=self.settings)

    def _stop_all(self, reason: str, message: str = "") -> None:
        """Stop every running pod (Failed with ``reason``, when given); give back their grants."""
        running = list(self.live.values())
        instances.stop([live.running for live in running])
        for live in running:
            self.ledger.release(live.grant)
        self.live.clear()
        if reason:
            self.pods = [replace(pod, phase=Phase.FAILED, finished_at=now_iso(), reason=reason, message=message)
                         if pod.active else pod for pod in self.pods]

    # ------------------------------------------------------------------ the Job

    def _end_due(self, settings: JobSettings) -> str | None:
        """Complete or Failed when the Job ended now (``decisions.end_due``: its pods stopped, its conditions
        written); else None."""
        running_s = None
        if self.start_time and not self.suspended:
            running_s = time.time() - calendar.timegm(time.strptime(self.start_time, "%Y-%m-%dT%H:%M:%SZ"))
        ending = decisions.end_due(settings, self.pods, running_s)
        if ending is None:
            return None
        if ending.outcome == "Failed":
            return self._fail(ending.reason, ending.message)
        self._stop_all("")
        self.pods = [pod for pod in self.pods if not pod.active]
        for kind in ("SuccessCriteriaMet", "Complete"):
            self.conditions = job_status.with_condition(self.conditions, kind, ending.reason, ending.message)
        self.status["completionTime"] = now_iso()
        events.record(self.uid, "Completed", "Job completed", settings=self.settings)
        return ending.outcome

    def _fail(self, reason: str, message: str) -> str:
        self._stop_all(reason, message)
        for kind in ("FailureTarget", "Failed"):
            self.conditions = job_status.with_condition(self.conditions, kind, reason, message)
        events.record(self.uid, reason, message, "Warning", settings=self.settings)
        return "Failed"

    def _suspended(self, settings: JobSettings, container: Container) -> bool:
        """Whether the Job must not run now: asked to be suspended, or queued and not (or no longer) admitted."""
        if settings.suspend:
            if self.workload is not None:
                self.workload.finish("the Job was suspended")
            return True
        if not settings.queue:
            return False
        if self.workload is None:
            self.workload = JobWorkload(self.settings, name=self.name, namespace=self.namespace,
                                        user=self.user or os_user(), queue=settings.queue,
                                        priority=settings.priority, pods=settings.pods_wanted,
                                        per_pod=container.resources, min_pods=settings.min_parallelism)
        standing = self.workload.poll()
        if standing.evicted:
            self._say("Evicted", f"{standing.message}: its pods are stopped and it is requeued", "Warning")
            for pod in [pod for pod in self.pods if pod.active]:
                self._delete_pod(pod.name)
            self.workload.requeue()
            return True
        if not standing.admitted:
            self._say(standing.reason, standing.message)
        elif standing.pods < settings.pods_wanted and standing.pods != self.admitted_pods:
            self._say("PartiallyAdmitted", f"admitted with {standing.pods} of {settings.pods_wanted} pods "
                      f"({MIN_PARALLELISM})")
        self.admitted_pods = standing.pods if standing.admitted else self.admitted_pods
        return not standing.admitted

    def _set_suspended(self, suspended: bool) -> None:
        if suspended == self.suspended:
            return
        first = self.suspended is None
        self.suspended = suspended
        if suspended:
            for pod in [pod for pod in self.pods if pod.active]:
                self._delete_pod(pod.name)
            self.conditions = job_status.with_condition(self.conditions, "Suspended", "JobSuspended", "Job suspended")
            events.record(self.uid, "Suspended", "Job suspended", settings=self.settings)
            return
        self.start_time = now_iso()  # set when the Job first runs, reset when it resumes
        if not first:
            self.conditions = job_status.with_condition(self.conditions, "Suspended", "JobResumed", "Job resumed",
                                                        "False")
            events.record(self.uid, "Resumed", "Job resumed", settings=self.settings)

    def _say(self, reason: str, message: str, kind: str = "Normal") -> None:
        """An event when why the Job waits changes (not at every step)."""
        if f"{reason}: {message}" != self.waiting_said:
            self.waiting_said = f"{reason}: {message}"
            events.record(self.uid, reason, message, kind, settings=self.settings)

    def _write(self, settings: JobSettings) -> None:
        status: dict[str, Any] = {}
        if self.conditions:
            status["conditions"] = list(self.conditions)
        if self.start_time:
            status["startTime"] = self.start_time
        if self.status.get("completionTime"):
            status["completionTime"] = self.status["completionTime"]
        status.update(job_status.counts(self.pods, indexed=settings.indexed))
        if self.pods != self.written:
            write_pods(self.uid, self.pods, self.settings)
            self.written = list(self.pods)
        if status != self.status:
            self.status = status
            self.store.set_status(KIND, self.name, status, self.namespace)

    def _after_end(self) -> None:
        """Give back what the Job held; with a TTL, wait it out (re-read: it may change) and delete the Job."""
        self._give_back("the Job finished")
        finished_at = time.time()
        while not self.stopping.is_set():
            resource = self.store.get(KIND, self.name, self.namespace)
            if resource is None or resource.uid != self.uid:
                return
            ttl = settings_of(resource.manifest).ttl_s
            if ttl is None:
                return
            if time.time() - finished_at >= ttl:
                lifecycle.remove(self.store, resource)
                return
            self.stopping.wait(min(1.0, ttl))

    def _give_back(self, reason: str) -> None:
        if self.workload is not None:
            self.workload.finish(reason)
        self.held.close()

    # ------------------------------------------------------------------ records

    def _pod(self, name: str) -> JobPod:
        return next(pod for pod in self.pods if pod.name == name)

    def _update(self, name: str, **values: Any) -> None:
        self.pods = [replace(pod, **values) if pod.name == name else pod for pod in self.pods]

    def fail_itself(self, why: str) -> None:
        """The controller failed: its pods stopped, the Job Failed ``SupervisorFailed``."""
        self._stop_all("SupervisorFailed", why)
        self.conditions = job_status.with_condition(self.conditions, "Failed", "SupervisorFailed", why)
        events.record(self.uid, "SupervisorFailed", why, "Warning", settings=self.settings)
        resource = self.store.get(KIND, self.name, self.namespace)
        if resource is not None and resource.uid == self.uid:
            self._write(settings_of(resource.manifest))
            lineage.job_ended(self.store.get(KIND, self.name, self.namespace), self.settings)


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    namespace, name, uid = args[:3]
    controller = Controller(load_settings(), namespace, name, uid, args[3] if len(args) > 3 else "")
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda _num, _frame: controller.stop())
    try:
        controller.run()
    except Exception as exc:  # noqa: BLE001 - any failure ends the Job Failed with its cause, not "died"
        traceback.print_exc()  # into controller.log
        controller.fail_itself(f"its controller failed: {type(exc).__name__}: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``python -m millpond.training.supervisor UID``: the background process that runs one training job.

Started by ``submit`` in its own session, it outlives the command that submitted the job. It
records itself (pid + start ticks) in the job's row, then:

0. QUEUING, for a job that names a Kueue queue (``--queue``): submits its workload (all its
   instances together, ``training.queueing``) and waits until an admission cycle admits it, its
   reason (``Pending``: Kueue's message, and how many are ahead of it) in the job's row and events;
1. QUEUING: waits until every dataset it mounts exists (a manifest's claim may name one not
   applied yet), then asks the ledger for everything the job's instances ask for together, and
   waits (the reason in the job's row and events) until it is granted (on a Ray cluster,
   ``ray_jobs``: until Ray has placed the job's placement group instead);
2. PENDING: decides once where each replica runs (``training.images``: in its pod template's image
   as the runtime policy says, the image pulled first; a pull the policy insists on that fails ends
   the job FAILED with Kubernetes' reason, ``ErrImagePull``/``ErrImageNeverPull``; images ``auto`` did
   not use are named once in an event), mounts the ``--data`` datasets (shared mounts, read-write for
   ReadWrite datasets), starts every instance (``instances.start``; an MPI job's workers are its launcher's ranks;
   on a Ray cluster ``Placement.start``, a Ray task in the instance's bundle), RUNNING once all started;
3. watches them: all exited 0 → SUCCEEDED; one failed → the others are stopped (per
   ``--clean-task-policy``) and the job restarts while ``--retry`` allows, else FAILED;
   ``--running-timeout`` passed → FAILED; SIGTERM (``arena delete``) → instances stopped, FAILED;
4. stops what is left, releases the mounts and the grant, finishes its workload, exits.

Each end it writes (SUCCEEDED or FAILED) is then recorded in the lineage (``training.lineage``).

A queued job whose workload Kueue evicts (preempted by a higher priority, its queue drained)
has its instances stopped (SIGTERM, SIGKILL after the grace period), gives back its grant, goes
back to its queue (reason ``Preempted``, an ``Evicted`` condition) and, admitted again, starts
them again with the same command and folders: a job that checkpoints resumes from its last
checkpoint. An eviction is not a failure: ``--retry`` does not count it.

Every status it writes is conditional on the job still being its own and unfinished, so a
reader that saw it dead (``status.observed``) and this process never both decide the end.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from millpond.datasets.config import load_config
from millpond.datasets.shared_mounts import release, use
from millpond.errors import MillpondError
from millpond.runners import isolation
from millpond.runners.base import Bind, InImage
from millpond.runners.containers.images import ImagePullError
from millpond.runners.processes import ProcessIdentity, own_identity
from millpond.scheduling.ledger import Request
from millpond.scheduling.queues.submission import eviction_reason
from millpond.scheduling.share_env import mps_running
from millpond.settings import load_settings
from millpond.store.keys import utcnow
from millpond.store.resources import ResourceStore
from millpond.store.training import FINISHED, InstanceRecord, JobRecord, JobStore
from millpond.training import images, lineage
from millpond.training import instances as launching
from millpond.training.kinds import job_kind
from millpond.training.launch import free_port, plan, torchrun
from millpond.training.launch_share import with_shares
from millpond.training.paths import instance_log, job_folder
from millpond.training.planned import Planned
from millpond.training.queueing import QueuedJob
from millpond.training.ray_jobs import Placement
from millpond.training.resources import Allocator, Granted, allocator
from millpond.training.spec import CleanTaskPolicy, JobSpec, Trainer, spec_from_json

if TYPE_CHECKING:
    from millpond.training.ray_jobs import Placement

POLL_S = 0.2
QUEUE_POLL_S = 1.0
EVICTION_POLL_S = 0.5  # how often a running queued job reads its workload's row
EVICTED = "evicted"  # what an attempt returns when Kueue evicted the job's workload (compared by identity)


class Supervisor:
    """One job's run, in its supervisor process: every status it writes is conditional on being its own."""

    def __init__(self, store: JobStore, job: JobRecord) -> None:
        self.store = store
        self.job = job
        self.spec: JobSpec = spec_from_json(job.spec)
        self.me = own_identity()
        self.stopping = threading.Event()
        self.stop_reason = ""
        self.followers: dict[str, list[str]] = {}  # instance -> the instances its process starts (MPI ranks)
        self.placement: Placement | None = None  # cluster mode: the job's placement group on Ray
        self.queued: QueuedJob | None = None  # its Kueue workload, when it names a queue
        self.evicted = ""  # Kueue's message once the workload was evicted during this admission
        self.eviction = ""  # the last eviction's message, shown while the job waits to be admitted again
        self.next_eviction_check = 0.0
        self.said: tuple[str, str] = ("", "")  # the last waiting reason told in an event
        self.attempt = 0  # attempts so far, across evictions (the instances' restarts)
        self.ledger: Allocator | None = None  # this machine's ledger (local mode)
        self.placed: images.Placed | None = None  # where each replica runs (its image or the host): decided once
        self.failure_note = ""  # a failed instance ran on the host though it has an image: said in the events

    # ---------------------------------------------------------------- status

    def status(self, status: str, reason: str | None = None, message: str | None = None) -> bool:
        """Write ``status`` if the job is still this process's; the end it writes is recorded in the lineage
        (``training.lineage``) after it is written, so neither a slow nor a failing record delays or changes it."""
        return self._write(status, reason, message, None)

    def finish(self, status: str, reason: str, message: str, said: str | None = None, kind: str = "Warning") -> None:
        """End the job with ``status`` and, in the same write, its event (``said``, else ``message``): a client
        that sees the end never misses the event that explains it."""
        self._write(status, reason, message, (message if said is None else said, kind))

    def _write(self, status: str, reason: str | None, message: str | None, event: tuple[str, str] | None) -> bool:
        written = self.store.set_status(self.job.uid, status, reason, message, supervisor=self.me, event=event)
        if written and status in FINISHED:
            lineage.job_ended(self.store.by_uid(self.job.uid))
        return written

    def event(self, reason: str, message: str, kind: str = "Normal") -> None:
        self.store.add_event(self.job.uid, reason, message, kind)

    def ask_stop(self, reason: str) -> None:
        self.stop_reason = self.stop_reason or reason
        self.stopping.set()

    # ---------------------------------------------------------------- the job

    def run(self) -> None:
        self.store.set_supervisor(self.job.uid, *self.me)
        self.queued = QueuedJob(self.job, self.spec) if self.spec.queue else None
        try:
            while True:
                if self.queued is not None and not self.queued.admit(self.stopping, self._pending):
                    self._end_stopped()
                    return
                self.evicted = ""
                if self.spec.instances_on_ray:
                    self._run_on_cluster()
                else:
                    self._run_here()
                if not self.evicted or self.queued is None:
                    return
                self._requeue(self.queued)
        finally:
            if self.queued is not None:
                self.queued.finish(f"the job ended: {self.stop_reason or 'done'}")

    def _run_here(self) -> None:
        ledger = self.ledger = allocator()
        wanted = self.spec.total
        grant = self._queue(ledger, wanted)
        if grant is None:
            if not self.evicted:
                self._end_stopped()
            return
        fallback = ledger.fallback_warning(wanted)
        if fallback:
            self.event("GPUFallback", fallback, "Warning")
        try:
            self.placed = self.placed or self._place()
            with ExitStack() as held:
                binds = self._binds(held)
                self._attempts(grant, binds)
        except ImagePullError as exc:  # the policy insists on the image: the pod's ErrImagePull, as its job's end
            self.finish("FAILED", exc.reason, str(exc))
        except MillpondError as exc:
            self.finish("FAILED", "JobFailed", str(exc))
        finally:
            ledger.release(grant.id)

    def _place(self) -> images.Placed:
        """Where each replica runs (``training.images``), once per job: its images had (pulled) first."""
        # an MPIJob's workers are its launcher's ranks (launch_mpi): they run where the launcher runs, in its image
        roles = {replica.role: replica.image for replica in self.spec.replicas
                 if not (self.spec.trainer is Trainer.MPI and replica.role == "worker")}
        if any(roles.values()):
            self.status("PENDING", "ContainerCreating", "deciding where the instances run (pulling their images)")
        kind = job_kind(self.spec.trainer.value, self.spec.manifest)
        out = getattr(sys.stdout, "buffer", None)
        placed = images.decide_roles(
            roles, namespace=self.job.namespace, annotations=dict(self.spec.annotations),
            labels=images.owner_labels(kind, self.job.namespace, self.job.name, self.job.uid),
            settings=load_settings(), log=out)
        images.record(job_folder(self.job.uid), placed)
        in_image = sorted({(one.in_image.image, one.in_image.runtime.name) for one in placed.roles.values()
                           if one.in_image is not None})
        for image, runtime in in_image:
            roles_in = [role for role, one in placed.roles.items() if one.in_image and one.in_image.image == image]
            self.event("Pulled", f'Container image "{image}" is present: {", ".join(roles_in)} run in it ({runtime})')
        if placed.unused:
            self.event("ImageNotUsed", placed.unused, "Normal" if "policy is host" in placed.unused else "Warning")
        return placed

    def _in_image(self, item: Planned, cwd: Path) -> tuple[Planned, Path, InImage | None]:
        """``item`` as it runs where its replica was placed: in its image (its argv and folder there), or on
        the host."""
        role = (self.placed or images.Placed()).of(item.role)
        if role.in_image is None or role.image is None:
            return item, cwd, None
        argv = images.instance_argv(item.argv, role.image, torchrun() if self.spec.nproc_per_node else ())
        folder = images.cwd_in_image(role, self.spec.working_dir, job_folder(self.job.uid) / "work")
        return replace(item, argv=argv), folder, images.for_instance(role, item.name)

    # ---------------------------------------------------------------- Kueue

    def _pending(self, reason: str, message: str, place: str) -> None:
        """Why the job's workload waits for its queue (after an eviction: that first, then why), in its status
        with its place in the queue; an event when the reason itself changes, not at each move up the queue."""
        if self.eviction:
            reason, message = eviction_reason(self.eviction), f"{self.eviction}; requeued: {message}"
        self.status("QUEUING", reason, f"{message} ({place})" if place else message)
        if (reason, message) != self.said:
            self.said = (reason, message)
            self.event(reason, message, "Warning" if reason != "Pending" else "Normal")

    def _check_evicted(self) -> bool:
        """Whether Kueue told the job to stop (polled at most every EVICTION_POLL_S while it runs)."""
        if self.queued is None or self.evicted:
            return bool(self.evicted)
        now = time.monotonic()
        if now < self.next_eviction_check:
            return False
        self.next_eviction_check = now + EVICTION_POLL_S
        self.evicted = self.queued.evicted() or ""
        return bool(self.evicted)

    def _requeue(self, queued: QueuedJob) -> None:
        """After an eviction: the processes are stopped; back to the queue, as Kueue requeues the workload."""
        self.eviction = self.evicted
        reason = eviction_reason(self.evicted)
        self.event("Evicted", f"{reason}: {self.evicted}; its instances were stopped and it is requeued", "Warning")
        self.status("QUEUING", reason, f"{self.evicted}; requeued")
        queued.requeue()

    def _run_on_cluster(self) -> None:
        """Cluster mode: Ray's placement group is the job's grant (QUEUING until every bundle is placed)."""
        def waiting(why: str) -> None:
            self.status("QUEUING", "Queuing", why)
            self.event("Queuing", why)

        try:
            self.placement = Placement(self.spec, self.job.uid, job_folder(self.job.uid), self.job.namespace)
            try:
                if not self.placement.wait_ready(self.stopping, waiting):
                    self._end_stopped()
                    return
                self._attempts(Granted(id="", gpus=()), [])
            finally:
                self.placement.remove()
        except MillpondError as exc:
            self.finish("FAILED", "JobFailed", str(exc))

    def _queue(self, ledger: Allocator, wanted: Request) -> Granted | None:
        """Wait QUEUING until every dataset it mounts exists and the ledger grants the whole job;
        None when stopped meanwhile."""
        said = ""
        while not self.stopping.is_set() and not self._check_evicted():
            missing = self._missing_datasets()
            grant = None if missing else ledger.try_acquire(wanted, f"{self.job.namespace}/{self.job.name}", *self.me,
                                                            namespace=self.job.namespace,
                                                            pods=self.spec.instance_count)
            if grant is not None:
                return grant
            if missing:  # a manifest's claim naming a dataset not applied yet: Kubernetes leaves such pods Pending
                reason = "WaitingForDataset"
                why = (f"waiting for dataset {missing} (namespace {self.job.namespace}), which a volume names: "
                       "it does not exist yet (millpond apply -f its Dataset)")
            else:
                reason = "Queuing"
                why = ledger.impossible(wanted) or ledger.why_waiting(  # beyond the machine: waits, saying so
                    wanted, self.job.namespace, self.spec.instance_count)
            if why != said:
                said = why
                self.status("QUEUING", reason, why)
                self.event(reason, why)
            self.stopping.wait(QUEUE_POLL_S)
        return None

    def _missing_datasets(self) -> str:
        """The first dataset the job mounts that does not exist (yet), or ""."""
        resources = ResourceStore()
        for data in self.spec.data:
            if resources.get("Dataset", data.dataset, self.job.namespace) is None:
                return data.dataset
        return ""

    def _binds(self, held: ExitStack) -> list[Bind]:
        """The job's datasets (shared mounts, held until the job ends) and host folders, as binds."""
        binds = []
        for data in self.spec.data:
            user = f"job {self.job.namespace}/{self.job.name}"
            shared = use(data.dataset, self.job.namespace, user)
            held.callback(release, shared)
            read_only = load_config(data.dataset, self.job.namespace).read_only
            binds.append(Bind(shared.folder, data.path, read_only=read_only))
        for host in self.spec.data_dirs:
            isolation.check_host_folder(Path(host.host), f"--data-dir {host.host}")
            binds.append(Bind(Path(host.host), host.path))
        return binds

    def _cwd(self) -> Path:
        if self.spec.working_dir:  # multi-user: never a folder that would show the home past the covers
            isolation.check_host_folder(Path(self.spec.working_dir), f"--working-dir {self.spec.working_dir}")
            return Path(self.spec.working_dir)
        folder = job_folder(self.job.uid) / "work"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def _attempts(self, grant: Granted, binds: list[Bind]) -> None:
        """Run the job, restarting it after a failure while ``--retry`` allows; an eviction ends this
        admission's attempts without a final status (the job goes back to its queue, its failures uncounted)."""
        deadline = (time.monotonic() + self.spec.running_timeout_s) if self.spec.running_timeout_s else None
        failures = 0
        while True:
            if self.stopping.is_set():  # stopped while its datasets were being mounted, or between attempts
                self._end_stopped()
                return
            if self._check_evicted():
                return
            self.failure_note = ""
            outcome = self._attempt(self.attempt, grant, binds, deadline)
            self.attempt += 1
            if outcome is EVICTED:
                return
            if outcome is None:
                self.finish("SUCCEEDED", "JobSucceeded", f"{self.job.name} succeeded",
                            f"all {self.spec.instance_count} instances exited 0", "Normal")
                return
            final = self.stopping.is_set() or failures >= self.spec.retry
            if final:
                self.finish("FAILED", "JobFailed", outcome, outcome + self.failure_note)
                return
            failures += 1
            self.event("Restarting", f"{outcome}{self.failure_note}; restarting (retry {failures} of "
                       f"{self.spec.retry})", "Warning")

    def _attempt(self, attempt: int, grant: Granted, binds: list[Bind], deadline: float | None) -> str | None:
        """Run every instance once: None when all exited 0, else why the attempt failed.

        Instances started by another (MPI workers: mpirun's ranks) are not started here; their
        status follows their starter's (``_record``).
        """
        self.store.set_attempt(self.job.uid, attempt, grant.gpus)
        self.status("PENDING", "Starting", f"starting {self.spec.instance_count} instances (attempt {attempt})")
        placement = self.placement
        if placement is None:
            planned = plan(self.spec, grant.gpus, free_port(), job_folder(self.job.uid))
            ledger = self.ledger or allocator()
            planned = with_shares(self.spec, planned, grant.share_gpus, ledger.gpu_memory, mps_running())
        else:
            if not placement.wait_ready(self.stopping, lambda why: self.status("PENDING", "Starting", why)):
                return self.stop_reason  # a bundle lost with its node is placed again first
            address, port, where = placement.master_endpoint()
            planned = placement.with_master(plan(self.spec, (), port, job_folder(self.job.uid)), address, port)
            self.event("Placed", "; ".join(f"{p.name} on node {node[:12]} ({ip})"
                                           for p, (node, ip) in zip(planned, where, strict=True)))
        self.store.replace_instances(self.job.uid, [
            InstanceRecord(p.name, p.role, p.index, p.rank, "Pending", log_path=str(instance_log(self.job.uid, p.name)),
                           gpus=p.gpus) for p in planned])
        self.followers = {p.name: [q.name for q in planned if q.started_by == p.name] for p in planned}
        cwd = self._cwd()
        running: list[launching.Running] = []
        try:
            for item in planned:
                if self.stopping.is_set():  # arena delete while instances start: stop starting them
                    return self.stop_reason
                if item.started_by:
                    continue
                for path, text in item.files:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text)
                rank_logs = [instance_log(self.job.uid, name) for name in item.rank_logs]
                log = instance_log(self.job.uid, item.name)
                if placement is None:
                    item, folder, in_image = self._in_image(item, cwd)
                    started = launching.start(item, binds, folder, log, rank_logs,
                                              launching.mark_of(self.job.uid, item.name), in_image,
                                              job_folder(self.job.uid))
                else:
                    started = placement.start(planned.index(item), item, log)
                running.append(started)
                self._record(item.name, status="Running", pid=started.process.pid, pid_start=started.ticks,
                             started_at=utcnow())
            if attempt == 0:
                self.status("RUNNING", "Running", f"{len(running)} instances running")
            else:
                self.status("RUNNING", "Restarted", f"{len(running)} instances running (attempt {attempt})")
            self.event("Started", f"started {', '.join(r.planned.name for r in running)} (attempt {attempt})")
            return self._watch(running, deadline)
        finally:
            if placement is None:
                launching.stop(running)
            else:
                placement.stop(running)
            for instance in running:
                code = instance.process.returncode
                if code is not None:
                    self._record(instance.planned.name, exit_code=code, status="Succeeded" if code == 0 else "Failed",
                                 finished_at=utcnow())

    def _record(self, name: str, **fields: object) -> None:
        """Update an instance's row and those of the instances it started: their status and times
        follow its own (mpirun does not say how each rank ended), with no pid or exit code of their own."""
        self.store.update_instance(self.job.uid, name, **fields)
        follower_fields = {key: value for key, value in fields.items() if key not in ("pid", "pid_start", "exit_code")}
        for follower in self.followers.get(name, ()):
            self.store.update_instance(self.job.uid, follower, **follower_fields)

    def _watch(self, running: list[launching.Running], deadline: float | None) -> str | None:
        finished: set[str] = set()
        while True:
            for item in running:
                code = item.process.poll()
                if code is None or item.planned.name in finished:
                    continue
                finished.add(item.planned.name)
                launching.end(item)  # what it left running ends with it (nothing to do for a Ray task)
                self._record(item.planned.name, exit_code=code, status="Succeeded" if code == 0 else "Failed",
                             finished_at=utcnow())
                if code != 0:
                    why = item.failure or f"{item.planned.name} exited with code {code}"
                    self.failure_note = images.host_note((self.placed or images.Placed()).of(item.planned.role))
                    if self.spec.clean_task_policy is CleanTaskPolicy.NONE:
                        self._wait_others(running)  # the others run on; the job ends when they do
                    return why
            if len(finished) == len(running):
                return None
            if self.stopping.is_set():
                return self.stop_reason
            if self._check_evicted():
                return EVICTED
            if deadline is not None and time.monotonic() > deadline:
                self.stopping.set()
                return f"running timeout: the job ran longer than {self.spec.running_timeout_s}s (--running-timeout)"
            time.sleep(POLL_S)

    def _wait_others(self, running: list[launching.Running]) -> None:
        while not self.stopping.is_set() and any(item.process.poll() is None for item in running):
            time.sleep(POLL_S)

    def _end_stopped(self) -> None:
        self.finish("FAILED", "JobStopped", self.stop_reason)


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    store = JobStore()
    job = store.by_uid(args[0])
    if job is None or job.finished:
        return 0
    other = ProcessIdentity(job.supervisor_pid or 0, job.supervisor_start)
    if other.pid not in (0, os.getpid()) and other.is_running():
        return 0  # another supervisor runs this job: one per job
    supervisor = Supervisor(store, job)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda num, _frame: supervisor.ask_stop(
            f"stopped: its supervisor got {signal.Signals(num).name}"))
    try:
        supervisor.run()
    except Exception as exc:  # noqa: BLE001 - any failure ends the job FAILED with its cause, not "died"
        traceback.print_exc()  # into supervisor.log
        why = f"its supervisor failed: {type(exc).__name__}: {exc}"
        if supervisor.status("FAILED", "SupervisorFailed", why):
            supervisor.event("SupervisorFailed", why, "Warning")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

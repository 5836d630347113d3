"""``python -m millpond.notebooks.supervisor NAMESPACE NAME UID``: one Notebook's supervisor.

Started detached by ``notebooks.objects.start`` and recorded among the home's background processes
(kind ``notebook``); one per uid (a second one leaves at once: a lock on a file of its folder). Each
tick (``TICK_S``) it reads the object and reconciles, as the notebook controller and the kubelet do:

1. the object is gone or replaced (another uid), or its folder (the home) was removed: stop the server, end;
2. annotated ``kubeflow-resource-stopped``: stop the server and give back its grant (the controller
   scales the StatefulSet to 0); status with no conditions, ``readyReplicas`` 0;
3. a notebook labelled ``kueue.x-k8s.io/queue-name`` waits for its Kueue workload's admission first
   (``notebooks.queueing``: ``PodScheduled`` False, ``SchedulingGated``, with Kueue's reason; evicted: its
   server stopped and the workload requeued); then the server's requests are taken from the machine's
   ledger (the namespace's ResourceQuota applies, as to any pod; a GPU share's limits go in its
   environment, ``scheduling.share_env``); one that does not fit waits, ``PodScheduled`` False with the reason;
4. its volumes and its environment from Secrets/ConfigMaps are resolved (``notebooks.volumes``: a claim that
   does not exist keeps it unscheduled, a Secret that does not exist keeps it ``ContainerCreating``, retried
   every ``MOUNT_RETRY_S``); the server starts in the Notebook's image when the runtime policy says so
   (``notebooks.in_image``: decided, and the image pulled, in a thread before each start; its volumes bound
   at their paths), else JupyterLab on this host with its defaults written (``notebooks.defaults``:
   kubeconfig, ServiceAccount files) — inside a sandbox (``runners.sandbox.wrap``) when it has volumes to
   show at their paths, and always in multi-user mode, where the namespace's code never runs on the bare host;
   ready once its API answers; one that exits is started again after a back-off that doubles from
   ``BACKOFF_S`` to ``MAX_BACKOFF_S`` (the kubelet's CrashLoopBackOff: 10 s to 5 min; shorter here, a
   notebook is interactive), reset once it served ``BACKOFF_RESET_S``;
5. the status (``status.notebook_status``) and the server's endpoint and pod view (``endpoint.json``)
   are written when they change.

SIGTERM (a delete) stops the server and every process it started — kernels and terminals carry its
mark — and ends. A supervisor killed outright leaves its guardian to end them (and the kernel kills
the server itself: ``PR_SET_PDEATHSIG``); the next apply, or ``millpond server``'s reconcile, starts
another supervisor.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from millpond.errors import UserError
from millpond.notebooks import defaults, in_image, jupyter, paths, service_account
from millpond.notebooks.kinds import NOTEBOOK, STOP_ANNOTATION
from millpond.notebooks.manifests import NotebookSpec, notebook_spec
from millpond.notebooks.queueing import NotebookQueue
from millpond.notebooks.status import ServerState, notebook_status, now_iso
from millpond.notebooks.volumes import MountWaiting, Resolved, Resolver
from millpond.runners import isolation, object_supervisors
from millpond.runners.base import Bind
from millpond.runners.guardian import die_with_parent, guardian
from millpond.runners.ports import free_port
from millpond.runners.process_groups import marked, stop_groups
from millpond.runners.processes import ProcessIdentity, start_ticks
from millpond.runners.sandbox import SandboxUnavailable, wrap
from millpond.scheduling.ledger import Grant, Holder, Ledger
from millpond.scheduling.share_env import mps_running, share_env
from millpond.settings import Settings, load_settings
from millpond.store.resources import ProcessRecord, Resource, ResourceStore
from millpond.training.pod_template import GPU

TICK_S = 0.5
STARTING_TICK_S = 0.1  # while the server starts: readiness seen sooner (what a user waits for)
BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0
BACKOFF_RESET_S = 600.0
STOP_GRACE_S = 5.0
START_TIMEOUT_S = 180.0  # a server whose API never answered by then is restarted
MOUNT_RETRY_S = 2.0  # a missing Secret, ConfigMap or dataset mount is looked for again this often


class NotebookSupervisor:
    """The reconciler of one Notebook (see the module's docstring for its steps)."""

    def __init__(self, settings: Settings, namespace: str, name: str, uid: str) -> None:
        self.settings = settings
        self.namespace, self.name, self.uid = namespace, name, uid
        self.store = ResourceStore(settings)
        self.ledger = Ledger(settings)
        self.stopping = threading.Event()
        self.token = paths.ensure_token(settings, uid)
        self.guard = guardian()
        own = ProcessIdentity.own()
        self.holder = Holder("notebook", f"{namespace}/{name}", own.pid, own.start, namespace=namespace)
        self.identity = ProcessRecord(own.pid, own.start or "")
        self.process: subprocess.Popen[bytes] | None = None
        self.ticks: str | None = None
        self.resolver = Resolver(settings, namespace, name, paths.folder(settings, uid))
        self.mounted = Resolved()
        self.mounts_held = False  # resolved for a start still deciding where it runs (an image being pulled)
        self.mark = ""
        self.port = 0
        self.grant: Grant | None = None
        self.queue = NotebookQueue(settings, namespace, name)
        self.state = ServerState()
        self.since: dict[str, tuple[bool, str]] = {}
        self.restarts = 0
        self.failures = 0  # exits in a row (the back-off's exponent)
        self.next_start = 0.0
        self.started_mono = 0.0
        self.written: dict[str, Any] | None = None
        self.endpoint: dict[str, Any] | None = None
        self.annotations: dict[str, str] = {}
        self.placing = in_image.Placing()
        self.container: in_image.ImageServer | None = None  # the server's container, while it runs in its image
        self.ran_in = ""  # millpond.io/ran-in of its pod: the runtime, or "host: WHY"

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, lambda *_: self.stopping.set())
        self.store.record_process(NOTEBOOK.kind, self.name, self.namespace, self.identity)
        if in_image.sweep_owned(self.settings, self.uid, self.namespace, self.name):  # a supervisor killed with -9
            self._note("removed the container an earlier supervisor left")
        try:
            while not self.stopping.is_set() and paths.folder(self.settings, self.uid).is_dir():
                resource = self.store.get(NOTEBOOK.kind, self.name, self.namespace)
                if resource is None or resource.uid != self.uid:
                    break
                self.step(resource)
                self._write()
                self.stopping.wait(STARTING_TICK_S if self.process is not None and not self.state.ready else TICK_S)
        finally:
            self._stop_server()
            if paths.folder(self.settings, self.uid).is_dir():  # the home is still there (not removed under it)
                self.queue.finish("the notebook was deleted")
                self._release()
                service_account.revoke(self.settings, self.uid)  # its credential dies with its server
                paths.endpoint_file(self.settings, self.uid).unlink(missing_ok=True)

    def step(self, resource: Resource) -> None:
        annotations = resource.manifest.get("metadata", {}).get("annotations") or {}
        self.annotations = annotations
        if STOP_ANNOTATION in annotations:
            self._stop_server()
            self._release()
            service_account.revoke(self.settings, self.uid)
            self.queue.finish("the notebook was stopped")
            self.state = ServerState(stopped=True)
            self.failures, self.next_start = 0, 0.0
            return
        self.state.stopped = False
        try:
            spec = notebook_spec(resource.spec)
        except UserError as exc:  # stored before a check that refuses it now
            self.state.unschedulable = f"its spec cannot run here: {exc}"
            return
        if not self._admitted(resource, spec):
            return
        if self.grant is None:
            try:
                self.resolver.check_claims(spec.mounts)
            except MountWaiting as exc:  # the scheduler's: no node has the claim
                self.state.scheduled, self.state.unschedulable = False, f"0/1 nodes are available: {exc.message}"
                return
            if not self._acquire(spec):
                return
        if self.process is None:
            if time.monotonic() >= self.next_start:
                self._start(spec, in_image.container_of(resource.spec))
            return
        code = self.process.poll()
        if code is not None:
            self._exited(code)
            return
        if not self.state.ready:
            self.state.ready = jupyter.answers(self.port, self.namespace, self.name, self.token)
            if not self.state.ready and time.monotonic() - self.started_mono > START_TIMEOUT_S:
                self._note(f"the server did not answer within {START_TIMEOUT_S:.0f} s; starting it again")
                self._stop_server()
                self._exited(-signal.SIGKILL)
        elif time.monotonic() - self.started_mono > BACKOFF_RESET_S:
            self.failures = 0

    # ------------------------------------------------------------------ the server
    def _admitted(self, resource: Resource, spec: NotebookSpec) -> bool:
        """Kueue's admission of a queued notebook (True when it names no queue); evicted: its server stops."""
        standing = self.queue.poll(resource.manifest, spec)
        if standing is None or standing.admitted:
            return True
        if standing.evicted:
            self._note(f"evicted by Kueue: {standing.message}; its server is stopped and it is requeued")
            self._stop_server()
            self._release()
            self.queue.requeue()
        self.state.scheduled, self.state.gated = False, True
        self.state.unschedulable = f"Kueue: {standing.reason}: {standing.message}"
        return False

    def _acquire(self, spec: NotebookSpec) -> bool:
        grant = self.ledger.try_acquire(spec.request, self.holder)
        if grant is None:
            why = self.ledger.impossible(spec.request, GPU) or self.ledger.why_waiting(spec.request, self.namespace)
            self.state.scheduled, self.state.gated = False, False
            self.state.unschedulable = f"0/1 nodes are available: {why}"
            return False
        self.grant = grant
        self.state.scheduled, self.state.gated, self.state.unschedulable = True, False, ""
        return True

    def _release(self) -> None:
        if self.grant is not None:
            self.ledger.release(self.grant.id)
            self.grant = None

    def _start(self, spec: NotebookSpec, container: in_image.NotebookContainer) -> None:
        assert self.grant is not None
        if not self.mounts_held:  # the volumes first, as the kubelet mounts them before it pulls the image
            try:
                self.mounted = self.resolver.resolve(spec.mounts)
            except MountWaiting as exc:  # the kubelet's FailedMount / CreateContainerConfigError: tried again soon
                self._waiting(exc.reason, exc.message, MOUNT_RETRY_S)
                return
            self.mounts_held = True
        placed = self._placed(container)
        if placed is None:  # the image is being decided (pulled): the mounts stay held for the next tick
            return
        self.mounts_held = False  # this start owns them now: a failure below or the server's stop gives them back
        if placed.runtime is None and not jupyter.installed():
            self.mounted.cleanup()
            self._waiting("CreateContainerError", jupyter.MISSING)
            return
        workspace = self.mounted.workspace or paths.workspace(self.settings, self.namespace, self.name)
        workspace.mkdir(parents=True, exist_ok=True)
        own = paths.folder(self.settings, self.uid)
        for folder in ("runtime", "jupyter", "ipython"):
            (own / folder).mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.mark = next(iter(marked().values()))
        gpu_env = self._gpu_env(spec, self.grant)
        cwd = opened = workspace  # the server's working folder here, and the one it opens (in its sandbox)
        confined = isolation.required(self.settings)
        binds: list[Bind] = []
        if placed.runtime is not None:
            env = in_image.image_env(spec.env, self.token, self.mark, {**self.mounted.env, **gpu_env})
            home = Path(spec.mounts.home) if self.mounted.workspace is not None else None
            others = [bind for bind in self.mounted.binds if home is None or Path(bind.target) != home]
            self.container = in_image.container_run(placed.runtime, container, workspace, self.namespace, self.name,
                                                    self.port, env, self.guard.env(), binds=others)
            started = self.container.started
            argv, env, cwd = started.argv, {**started.env, **self.guard.env()}, started.folder
        else:
            credential = service_account.issue(self.settings, self.namespace, self.name, self.uid) if confined \
                else None
            found = defaults.prepare(self.settings, self.uid, self.namespace, credential, confined)
            env = jupyter.environment(self.settings, self.uid, self.namespace, self.name, spec, self.token,
                                      {**found.env, **self.mounted.env, **gpu_env}, self.mark, self.guard.env())
            binds = [*self.mounted.binds, *found.binds]
            if self.mounted.workspace is not None:  # the server opens the volume at its path, as the image's HOME
                env["HOME"] = spec.mounts.home
            opened = Path(spec.mounts.home) if self.mounted.workspace is not None else workspace  # the folder it opens
            argv = jupyter.argv(self.namespace, self.name, self.port, opened)
        if placed.runtime is None and (self.mounted.binds or confined):  # multi-user: never on the bare host
            try:
                shown = (own,) if self.mounted.workspace is not None else (own, workspace)  # a volume: at its path only
                argv = wrap(argv, binds, opened, env.get("PATH"), own=shown)
            except SandboxUnavailable as exc:
                self.mounted.cleanup()
                self._waiting("CreateContainerError", str(exc))
                return
        log = paths.server_log(self.settings, self.uid)
        try:
            with open(log, "ab") as out:
                self.process = subprocess.Popen(
                    argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True, close_fds=True,
                    preexec_fn=die_with_parent(),  # noqa: PLW1509 - prctl only, resolved before the fork
                )
        except OSError as exc:
            self._let_go_container()
            self.mounted.cleanup()
            self._waiting("CreateContainerError", f"cannot start JupyterLab: {exc}")
            return
        self.guard.add(self.process.pid)
        self.ticks = start_ticks(self.process.pid)
        self.started_mono = time.monotonic()
        self.state.running, self.state.ready, self.state.started_at = True, False, now_iso()
        self.state.waiting_reason = self.state.waiting_message = ""

    def _placed(self, container: in_image.NotebookContainer) -> in_image.Placement | None:
        """Where this start runs (``notebooks.in_image``), once decided; None while the decision (a pull) is made,
        or when it failed (the notebook then waits with the kubelet's reason and tries again after a back-off)."""
        outcome = self.placing.poll(self.settings, self.namespace, self.annotations, container,
                                    paths.server_log(self.settings, self.uid))
        if outcome is None:
            self.state.running = self.state.ready = False
            if self.state.waiting_reason not in in_image.PULL_REASONS:  # a pull's failure is shown until one works
                self.state.waiting_reason = "ContainerCreating"
                self.state.waiting_message = f'deciding where to run image "{container.image}" (pulling it if needed)'
            return None
        if not isinstance(outcome, in_image.Placement):
            reason, message = in_image.failure(outcome)
            if (reason, message) != (self.state.waiting_reason, self.state.waiting_message):  # said when it changes
                self._note(f"{reason}: {message}")
            self._waiting(reason, message)
            if reason in in_image.PULL_REASONS:  # asked again soon: ImagePullBackOff while the pull's back-off lasts
                self.next_start = time.monotonic() + in_image.PULL_RETRY_S
            return None
        for warning in outcome.warnings:
            self._note(f"FailedToRetrieveImagePullSecret: {warning}")
        if outcome.ran_in.split(":")[0] != self.ran_in.split(":")[0]:  # said once, not at each restart
            self._note(f"runs in image {container.image} ({outcome.runtime.name})" if outcome.runtime is not None
                       else f"image {container.image} is not used, JupyterLab runs on this host: {outcome.reason}")
        self.ran_in = outcome.ran_in
        if outcome.runtime is not None:
            in_image.remember_runtime(self.settings, self.uid, outcome.runtime)
        return outcome

    def _gpu_env(self, spec: NotebookSpec, grant: Grant) -> dict[str, str]:
        """``CUDA_VISIBLE_DEVICES`` of the granted GPUs; a share's limits too (as a model replica's and a job's)."""
        if grant.share_gpus and spec.request.shares:
            gpu = grant.share_gpus[0]
            return share_env((gpu,), spec.request.shares[0], (self.ledger.capacity.memory_of(gpu),), mps_running())
        return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, grant.gpus))}

    def _waiting(self, reason: str, message: str, retry_s: float = MAX_BACKOFF_S) -> None:
        self.state.running = self.state.ready = False
        self.state.waiting_reason, self.state.waiting_message = reason, message
        self.next_start = time.monotonic() + retry_s

    def _exited(self, code: int) -> None:
        """The server ended on its own: CrashLoopBackOff, then started again (its kernels ended with it)."""
        pid = self.process.pid if self.process is not None else 0
        killed = self._let_go_container(code)
        self._stop_server()
        exit_code = 128 - code if code < 0 else code
        self.state.last_exit = {"exitCode": exit_code, "reason": killed or ("Error" if exit_code else "Completed"),
                                "startedAt": self.state.started_at, "finishedAt": now_iso()}
        delay = min(BACKOFF_S * 2 ** self.failures, MAX_BACKOFF_S)
        self.failures += 1
        self.restarts += 1
        self.next_start = time.monotonic() + delay
        self.state.running = self.state.ready = False
        self.state.waiting_reason = "CrashLoopBackOff"
        self.state.waiting_message = (f"back-off {delay:g}s restarting failed container: JupyterLab (pid {pid}) "
                                      f"exited with code {exit_code}")
        self._note(self.state.waiting_message)

    def _stop_server(self) -> None:
        if self.mounts_held:  # stopped (or ended) while its image was being decided
            self.mounted.cleanup()
            self.mounts_held = False
        if self.process is None:
            return
        process, ticks = self.process, self.ticks
        self.process = None
        stop_groups([(process, ticks)], STOP_GRACE_S, marks=[self.mark])
        self.mounted.cleanup()  # the dataset mounts it held (each ends with its last user)
        self.guard.remove(process.pid)
        self._let_go_container()
        self.state.running = self.state.ready = False

    def _let_go_container(self, code: int = -signal.SIGTERM) -> str | None:
        """Remove the server's container, if it ran in one (its client ended with ``code``; a client stopped by a
        signal leaves its container); ``OOMKilled`` when the runtime killed it for its memory limit."""
        server, self.container = self.container, None
        return server.let_go(code, stopped=code < 0) if server is not None else None

    def _note(self, line: str) -> None:
        with open(paths.server_log(self.settings, self.uid), "ab") as out:
            out.write(f"{now_iso()} [millpond] {line}\n".encode())

    # ------------------------------------------------------------------ what is written
    def _write(self) -> None:
        status = notebook_status(self.state, self.since)
        if status != self.written:
            self.store.set_status(NOTEBOOK.kind, self.name, status, self.namespace)
            self.written = status
        endpoint = {
            "port": self.port if self.process is not None else None, "ready": self.state.ready,
            "pid": self.process.pid if self.process is not None else None, "ticks": self.ticks,
            "started_at": self.state.started_at, "restarts": self.restarts,
            "container_state": status.get("containerState") or {}, "stopped": self.state.stopped,
            "log": str(paths.server_log(self.settings, self.uid)), "ran_in": self.ran_in,
        }
        if endpoint != self.endpoint:
            target = paths.endpoint_file(self.settings, self.uid)
            partial = target.with_suffix(".tmp")
            partial.write_text(json.dumps(endpoint))
            os.replace(partial, target)
            self.endpoint = endpoint


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m millpond.notebooks.supervisor NAMESPACE NAME UID", file=sys.stderr)
        return 2
    namespace, name, uid = argv
    settings = load_settings()
    with object_supervisors.exclusive(paths.folder(settings, uid) / "supervisor.lock") as mine:
        if mine:  # else another supervisor of this uid runs
            NotebookSupervisor(settings, namespace, name, uid).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

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
4. the server starts (in multi-user mode inside the namespace's sandbox, ``runners.sandbox.wrap``);
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

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from millpond.errors import UserError
from millpond.notebooks import jupyter, paths
from millpond.notebooks.kinds import NOTEBOOK, STOP_ANNOTATION
from millpond.notebooks.manifests import NotebookSpec, notebook_spec
from millpond.notebooks.queueing import NotebookQueue
from millpond.notebooks.status import ServerState, notebook_status, now_iso
from millpond.runners import isolation
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

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, lambda *_: self.stopping.set())
        self.store.record_process(NOTEBOOK.kind, self.name, self.namespace, self.identity)
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
                paths.endpoint_file(self.settings, self.uid).unlink(missing_ok=True)

    def step(self, resource: Resource) -> None:
        annotations = resource.manifest.get("metadata", {}).get("annotations") or {}
        if STOP_ANNOTATION in annotations:
            self._stop_server()
            self._release()
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
        if self.grant is None and not self._acquire(spec):
            return
        if self.process is None:
            if time.monotonic() >= self.next_start:
                self._start(spec)
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

    def _start(self, spec: NotebookSpec) -> None:
        if not jupyter.installed():
            self._waiting("CreateContainerError", jupyter.MISSING)
            return
        assert self.grant is not None
        workspace = paths.workspace(self.settings, self.namespace, self.name)
        workspace.mkdir(parents=True, exist_ok=True)
        own = paths.folder(self.settings, self.uid)
        for folder in ("runtime", "jupyter", "ipython"):
            (own / folder).mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.mark = next(iter(marked().values()))
        env = jupyter.environment(self.settings, self.uid, self.namespace, self.name, spec, self.token,
                                  self._gpu_env(spec, self.grant), self.mark, self.guard.env())
        argv = jupyter.argv(self.namespace, self.name, self.port, workspace)
        if isolation.required(self.settings):  # multi-user: the namespace's code never runs on the bare host
            try:
                argv = wrap(argv, [], workspace, env.get("PATH"), own=(own, workspace))
            except SandboxUnavailable as exc:
                self._waiting("CreateContainerError", str(exc))
                return
        log = paths.server_log(self.settings, self.uid)
        try:
            with open(log, "ab") as out:
                self.process = subprocess.Popen(
                    argv, env=env, cwd=workspace, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True, close_fds=True,
                    preexec_fn=die_with_parent(),  # noqa: PLW1509 - prctl only, resolved before the fork
                )
        except OSError as exc:
            self._waiting("CreateContainerError", f"cannot start JupyterLab: {exc}")
            return
        self.guard.add(self.process.pid)
        self.ticks = start_ticks(self.process.pid)
        self.started_mono = time.monotonic()
        self.state.running, self.state.ready, self.state.started_at = True, False, now_iso()
        self.state.waiting_reason = self.state.waiting_message = ""

    def _gpu_env(self, spec: NotebookSpec, grant: Grant) -> dict[str, str]:
        """``CUDA_VISIBLE_DEVICES`` of the granted GPUs; a share's limits too (as a model replica's and a job's)."""
        if grant.share_gpus and spec.request.shares:
            gpu = grant.share_gpus[0]
            return share_env((gpu,), spec.request.shares[0], (self.ledger.capacity.memory_of(gpu),), mps_running())
        return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, grant.gpus))}

    def _waiting(self, reason: str, message: str) -> None:
        self.state.running = self.state.ready = False
        self.state.waiting_reason, self.state.waiting_message = reason, message
        self.next_start = time.monotonic() + MAX_BACKOFF_S

    def _exited(self, code: int) -> None:
        """The server ended on its own: CrashLoopBackOff, then started again (its kernels ended with it)."""
        pid = self.process.pid if self.process is not None else 0
        self._stop_server()
        exit_code = 128 - code if code < 0 else code
        self.state.last_exit = {"exitCode": exit_code, "reason": "Error" if exit_code else "Completed",
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
        if self.process is None:
            return
        process, ticks = self.process, self.ticks
        self.process = None
        stop_groups([(process, ticks)], STOP_GRACE_S, marks=[self.mark])
        self.guard.remove(process.pid)
        self.state.running = self.state.ready = False

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
            "log": str(paths.server_log(self.settings, self.uid)),
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
    folder = paths.folder(settings, uid)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "supervisor.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # another supervisor of this uid runs
        NotebookSupervisor(settings, namespace, name, uid).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

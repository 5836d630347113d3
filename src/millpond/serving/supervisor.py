"""``python -m millpond.serving.supervisor NAMESPACE NAME UID``: the processes behind one InferenceService.

Started by ``serving.lifecycle.start`` in a session of its own, recorded with the home's
background processes (kind ``inference-service``, object ``NS/NAME``, the uid), and holding a
lock of its own for that uid (``.supervisor-UID.lock``: two starts at once leave one supervisor).
It:

1. picks the InferenceService's own port (the one it had, where still free; else a free one):
   ``endpoints.port`` and ``status.url`` (``http://127.0.0.1:PORT``), and :func:`_start_front`;
2. per revision (KServe's ``NAME-predictor-0000N``: each change of ``spec.predictor`` is one),
   asks the ledger for each replica's resources (cpu, memory, GPUs or a GPU share, as a training
   job asks), fetches the model (``model_fetch``), decides where a custom container runs (its image
   under the runtime policy, pulled first, or its command on this host: ``placement``) and starts
   ``spec.replicas`` replicas (``replicas``): millpond's model server for sklearn/pytorch, or the
   custom container;
3. restarts a replica that dies (CrashLoopBackOff: 1 s doubling to 30 s), rewrites
   ``endpoints.json`` whenever the replicas that answer (or the traffic) change, and writes KServe's
   status (Loading; Ready True with the URL once every revision with traffic has a replica that
   answers; Ready False ``ModelLoadFailed`` with the model server's ``error:`` line);
4. reads the stored InferenceService every second: a changed predictor is a new revision. Without
   ``canaryTrafficPercent`` the new one starts beside the old, takes all the traffic once it
   answers, and the old one stops (no gap); with it, the previous rolled-out revision keeps
   ``100 - P`` percent and the latest gets ``P`` (KServe's canary rollout) until the field is
   removed (or 100), which promotes the latest. Deleted or re-created (another uid): everything
   stops, the endpoints are cleared, it exits.

SIGTERM/SIGINT stop the replicas (SIGTERM, SIGKILL after a grace period), clear the endpoints and
exit 0. A supervisor that itself fails writes Ready False ``SupervisorFailed`` with its reason
(the traceback only in its log, ``supervisor.log``). Revisions are kept in ``revisions.json``
beside the endpoints, so a restarted supervisor keeps numbering (and a canary's previous revision).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from millpond.errors import MillpondError, UserError
from millpond.runners.background import now_iso, register
from millpond.runners.base import Bind
from millpond.runners.environment import inherited_environment
from millpond.runners.ports import free_port, is_free
from millpond.runners.processes import ProcessIdentity
from millpond.scheduling.ledger import Holder, Ledger, Request
from millpond.scheduling.share_env import mps_running, share_env
from millpond.serving import container_env, endpoints, events, front, model_server, objects, placement, with_data
from millpond.serving.capacity import count_refusal
from millpond.serving.model_fetch import ModelLoadFailed, fetch
from millpond.serving.replicas import BACKOFF_MAX_S, BACKOFF_START_S, Launch, Replica, stop_all
from millpond.serving.revisions import (
    RevisionRun,
    RevisionState,
    predictor_key,
    read_state,
    revision_name,
    status_of,
    write_state,
)
from millpond.serving.spec import predictor_spec
from millpond.settings import load_settings
from millpond.store.resources import Resource, ResourceStore
from millpond.store.secrets import ConfigStore

KIND = "inference-service"  # its kind among the home's background processes (millpond ps)
POLL_S = 0.2
SPEC_POLL_S = 1.0
PORT_FILE = "port"
STATE_FILE = "revisions.json"
LOG_FILE = "supervisor.log"
STARTS_PER_LOOP = 2  # replica starts one loop makes at most: the rest wait for the next loop
STARTING_AT_ONCE = max(2, os.cpu_count() or 1)  # replicas started and not answering yet, at most


class Supervisor:
    """One InferenceService's revisions and replicas, in its supervisor process.

    ``kind`` is the stored kind it serves: a subclass serves another kind's objects with the same loop
    (``serving.seldon.supervisor``: a SeldonDeployment's predictors as revisions with fixed traffic), overriding
    how revisions are adopted, followed and routed, and how the status is written.
    """

    kind = endpoints.ISVC

    def __init__(self, store: ResourceStore, resource: Resource) -> None:
        self.store = store
        self.namespace, self.name, self.uid = resource.namespace, resource.name, resource.uid
        self.me = ProcessIdentity.own()
        self.folder = endpoints.folder(self.namespace, self.name, self.kind)
        self.ledger = Ledger()
        self.stopping = threading.Event()
        self.revisions: dict[str, RevisionRun] = {}
        self.latest = ""
        self.rolled_out = ""  # the revision the traffic was last wholly moved to
        self.ready_revision = ""  # the newest revision that ever answered (KServe's latestReadyRevision)
        self.counter = 0
        self.port = 0
        self.percents: dict[str, int] = {}
        self.published: Any = None
        self.written: dict[str, Any] | None = None
        self.written_key: Any = None
        self.resource = resource
        self.stop_signal = ""  # the signal that stopped it (its status says so when the object stays)
        self.retired: list[RevisionRun] = []  # out of the routing, their replicas to stop
        self.front: front.Handle | None = None  # the own port's server (status.url), once started
        self.starts_left = STARTS_PER_LOOP  # replica starts this loop may still make

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        left = placement.sweep_owned(self.namespace, self.name, self.kind)  # an earlier supervisor's, killed with -9
        if left:
            print(f"{now_iso()} removed {left} container(s) an earlier supervisor left", flush=True)
        self.front = _start_front(self, self._pick_port())
        self.port = self.front.port
        self._adopt(self.resource)
        next_read = 0.0
        try:
            while not self.stopping.is_set():
                now = time.monotonic()
                if now >= next_read:
                    next_read = now + SPEC_POLL_S
                    resource = self.store.get(self.kind, self.name, self.namespace)
                    if resource is None or resource.uid != self.uid:
                        print(f"{now_iso()} the {self.kind} was deleted or re-created: stopping", flush=True)
                        self.stopping.set()
                        break
                    self.resource = resource
                    self._follow(resource)
                self.starts_left = STARTS_PER_LOOP
                for revision in list(self.revisions.values()):
                    self._tend(revision, now)
                self._route()
                self._publish()
                self._end_retired()  # after the endpoints stopped naming them: no request meets a stopping replica
                self.stopping.wait(POLL_S)
        finally:
            self._stop_everything()

    def ask_stop(self, signum: int) -> None:
        self.stop_signal = signal.Signals(signum).name
        self.stopping.set()

    # ------------------------------------------------------------------ revisions

    def _adopt(self, resource: Resource) -> None:
        """The revisions to serve at start: the stored predictor's, numbered after those of an earlier supervisor,
        and with a canary split the previous rolled-out revision it kept."""
        state = read_state(self.folder / STATE_FILE, self.uid)
        predictor = dict(resource.spec.get("predictor") or {})
        known = state.revisions if state else {}
        self.counter = state.counter if state else 0
        self.ready_revision = state.ready if state else ""
        latest = state.latest if state and state.latest in known and predictor_key(known[state.latest]) == (
            predictor_key(predictor)) else ""
        if not latest:
            self.counter += 1
            latest = revision_name(self.name, self.counter)
        self._add(latest, predictor, resource)
        self.latest = self.rolled_out = latest
        previous = state.rolled_out if state else ""
        canary = predictor.get("canaryTrafficPercent")
        if previous and previous != latest and previous in known and canary is not None and canary < 100:
            self._add(previous, known[previous], resource)
            self.rolled_out = previous
        self._write_state()

    def _follow(self, resource: Resource) -> None:
        """A changed predictor is a new revision; the one it replaces stops unless it is the rolled-out one."""
        predictor = dict(resource.spec.get("predictor") or {})
        latest = self.revisions[self.latest]
        if predictor_key(predictor) == predictor_key(latest.predictor):
            if predictor != latest.predictor:  # only canaryTrafficPercent changed: the same revision
                latest.predictor = predictor
                latest.spec = replace(latest.spec, canary_traffic_percent=predictor.get("canaryTrafficPercent"))
            return
        self.counter += 1
        name = revision_name(self.name, self.counter)
        print(f"{now_iso()} the predictor changed: revision {name}", flush=True)
        if self.latest != self.rolled_out:  # an unpromoted canary is replaced, as KServe replaces it
            self._retire(self.latest)
        self._add(name, predictor, resource)
        self.latest = name
        self._write_state()

    def _add(self, name: str, predictor: dict[str, Any], resource: Resource) -> None:
        body = {**resource.manifest, "spec": {**resource.spec, "predictor": predictor}}
        spec = predictor_spec(body)
        too_many = count_refusal(spec)  # stored before apply checked it: never start what cannot fit
        replicas = [Replica(name, index, endpoints.replica_log(self.namespace, self.name, name, index, self.kind))
                    for index in range(spec.replicas if too_many is None else 0)]
        revision = RevisionRun(name, predictor, spec, replicas)
        if spec.unservable is not None or too_many is not None:
            revision.failure = (spec.failure_reason or "InvalidPredictorSpec", spec.unservable or str(too_many))
            revision.next_try = float("inf")
        self.revisions[name] = revision

    def _retire(self, name: str) -> None:
        """Take the revision out of the routing now; its replicas stop once the endpoints no longer name it."""
        revision = self.revisions.pop(name, None)
        if revision is not None:
            self.retired.append(revision)

    def _end_retired(self) -> None:
        while self.retired:
            revision = self.retired.pop()
            print(f"{now_iso()} stopping revision {revision.name}", flush=True)
            stop_all(revision.replicas)
            for replica in revision.replicas:
                if replica.grant:
                    self.ledger.release(replica.grant)
            revision.held.close()

    # ------------------------------------------------------------------ replicas

    def _tend(self, revision: RevisionRun, now: float) -> None:
        """Fetch its model (in a thread, retried with backoff), then start, watch and restart each replica: a few
        starts a loop, and no more starting at once than the machine has CPUs (a model server's start is
        CPU-bound: many at once only slow them all)."""
        if revision.spec.unservable is not None or revision.next_try == float("inf"):
            return
        if revision.model_dir is None and revision.spec.storage is not None:
            if not self._fetched(revision, now):
                return
        if revision.placement is None and not self._placed(revision, now):
            return
        for replica in revision.replicas:
            replica.check(now)
        starting = sum(1 for run in self.revisions.values() for r in run.replicas if r.running and not r.ready)
        for replica in revision.replicas:
            if self.starts_left <= 0 or starting >= STARTING_AT_ONCE:
                break
            if replica.process is None and now >= replica.next_start:
                self.starts_left -= 1
                self._start(revision, replica, now)
                starting += replica.process is not None

    def _fetched(self, revision: RevisionRun, now: float) -> bool:
        """Whether the revision's model is here; a fetch runs in a thread of its own (a large model downloads
        while the supervisor still follows its object and its signals), started again after a failure."""
        fetching = revision.fetching
        if fetching is not None:
            if fetching.is_alive():
                return False
            revision.fetching = None
            if isinstance(revision.fetched, Path):
                revision.model_dir, revision.failure = revision.fetched, None
                return True
            self._retry_later(revision, "ModelLoadFailed", str(revision.fetched), now)
            return False
        if now < revision.next_try:
            return False
        storage = revision.spec.storage
        assert storage is not None

        def run() -> None:
            try:
                fmt = revision.spec.model_format if revision.spec.server != "command" else None
                revision.fetched = fetch(storage, self.namespace, self.name, revision.name, revision.held, fmt,
                                         self.kind)
            except ModelLoadFailed as exc:
                revision.fetched = str(exc)
            except Exception as exc:  # noqa: BLE001 - any failure of a fetch is the model not loading, retried
                revision.fetched = f"storageUri {storage.uri}: cannot fetch the model: {type(exc).__name__}: {exc}"

        revision.fetching = threading.Thread(target=run, daemon=True, name=f"fetch-{revision.name}")
        revision.fetching.start()
        return False

    def _placed(self, revision: RevisionRun, now: float) -> bool:
        """Whether it is decided where the revision's replicas run: in a thread (an image pull takes its
        time), once per revision; a failure to have an image the policy insists on is retried with back-off."""
        placing = revision.placing
        if placing is not None:
            if placing.is_alive():
                return False
            revision.placing = None
            return self._settle(revision, revision.placed, now)
        if now < revision.next_try:
            return False
        spec = revision.spec
        if spec.server != "command" or not spec.container.image:
            revision.placement = placement.Placement(None)
            return True

        def run() -> None:
            try:
                revision.placed = placement.place(spec, ConfigStore(load_settings().home).in_namespace(spec.namespace),
                                                 sys.stdout.buffer, self.kind)
            except Exception as exc:  # noqa: BLE001 - any failure to decide is the revision's, said and retried
                revision.placed = exc

        revision.placing = threading.Thread(target=run, daemon=True, name=f"image-{revision.name}")
        revision.placing.start()
        return False

    def _settle(self, revision: RevisionRun, placed: placement.Placement | BaseException | None, now: float) -> bool:
        """Take the decision's outcome (``placement.settle``): run, or wait (retried with back-off, or for good)."""
        settled = placement.settle(revision.spec, placed)
        for kind, reason, message in settled.events:
            self._event(kind, reason, message)
        if settled.said:
            print(f"{now_iso()} revision {revision.name}: {settled.said}", flush=True)
        if settled.failure is not None:
            if settled.retry:
                self._retry_later(revision, *settled.failure, now)
            else:
                revision.failure, revision.next_try = settled.failure, float("inf")
            if settled.failure[0] in ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull"):
                for replica in revision.replicas:  # its pods wait for the image, as the kubelet shows them
                    replica.blocked, replica.failure = settled.failure
            return False
        assert settled.placement is not None
        revision.placement, revision.failure, revision.backoff_s = settled.placement, None, BACKOFF_START_S
        for replica in revision.replicas:
            replica.blocked = replica.failure = None
            if settled.placement.image is None and settled.said:
                replica.note(settled.said)
        if settled.placement.image is not None:
            placement.remember_runtime(self.namespace, self.name, settled.placement.image.runtime, self.kind)
        return True

    def _event(self, kind: str, reason: str, message: str) -> None:
        try:
            events.record(self.namespace, self.name, self.uid, kind, reason, message, self.kind)
        except OSError as exc:  # an event is a courtesy: never the supervisor's end
            print(f"{now_iso()} cannot record an event: {exc}", flush=True)

    def _retry_later(self, revision: RevisionRun, reason: str, message: str, now: float) -> None:
        if revision.failure != (reason, message):
            print(f"{now_iso()} revision {revision.name}: {message}", flush=True)
        revision.failure = (reason, message)
        revision.next_try = now + revision.backoff_s
        revision.backoff_s = min(BACKOFF_MAX_S, revision.backoff_s * 2)

    def _start(self, revision: RevisionRun, replica: Replica, now: float) -> None:
        spec = revision.spec
        if replica.grant is None and not self._grant(revision, replica, now):
            return
        try:
            launch = self._launch(revision, replica)
        except MillpondError as exc:  # a secret the env names is missing: retried, it may be created
            if replica.failure != str(exc):
                replica.note(f"cannot start replica {replica.index}: {exc}")
            replica.failure, replica.blocked = str(exc), "CreateContainerConfigError"
            replica.next_start = now + replica.backoff_s
            replica.backoff_s = min(BACKOFF_MAX_S, replica.backoff_s * 2)
            return
        replica.blocked = None
        try:
            replica.start(launch)
        except OSError as exc:  # Kubernetes' RunContainerError: the command cannot be run at all
            replica.failure = f"cannot run {launch.argv[0]}: {exc.strerror or exc}"
            replica.blocked = "RunContainerError"
            replica.next_start = now + replica.backoff_s
            replica.backoff_s = min(BACKOFF_MAX_S, replica.backoff_s * 2)
            replica.note(replica.failure)
            return
        where = f" in container {replica.container.name}" if replica.container is not None else ""
        print(f"{now_iso()} started {spec.server} replica {replica.index} of {revision.name}{where} "
              f"(pid {replica.process.pid if replica.process else '?'})", flush=True)

    def _grant(self, revision: RevisionRun, replica: Replica, now: float) -> bool:
        """The ledger's grant of one replica's resources (kept across its restarts); False while it waits."""
        wanted: Request = revision.spec.resources
        if wanted == Request():
            replica.grant = ""
            return True
        holder = Holder(KIND, f"{self.namespace}/{self.name}/{revision.name}-{replica.index}", self.me.pid,
                        self.me.start, namespace=self.namespace)
        grant = self.ledger.try_acquire(wanted, holder)
        if grant is None:
            why = self.ledger.impossible(wanted) or self.ledger.why_waiting(wanted, self.namespace)
            replica.failure = f"waiting for resources: {why}"
            replica.next_start = now + 1.0
            return False
        fallback = self.ledger.fallback_warning(wanted)
        if fallback:
            replica.note(fallback)
        replica.grant = grant.id
        env = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, grant.gpus))}
        if grant.share_gpus and wanted.shares:
            gpu = grant.share_gpus[0]
            env = share_env((gpu,), wanted.shares[0], (self.ledger.capacity.memory_of(gpu),), mps_running())
        replica.gpus = tuple(grant.gpus) or tuple(grant.share_gpus)
        replica.gpu_env = env
        return True

    def _launch(self, revision: RevisionRun, replica: Replica) -> Launch:
        spec = revision.spec
        base = {**inherited_environment(), "PYTHONUNBUFFERED": "1", **replica.gpu_env}
        cwd = self.folder / "work"
        cwd.mkdir(parents=True, exist_ok=True)
        if spec.server == "command":
            image = revision.placement.image if revision.placement is not None else None
            # Knative sets PORT to the declared containerPort; on this host each replica gets one of its own
            # unless a port is declared for a server in its image (which may listen on that port only)
            port = spec.container.port if image is not None and spec.container.port_declared else free_port()
            knative = {"K_SERVICE": f"{self.name}-predictor", "K_CONFIGURATION": f"{self.name}-predictor",
                       "K_REVISION": revision.name}
            known = {**base, "PORT": str(port), **knative}
            if revision.model_dir is not None:
                known["MILLPOND_MODEL_DIR"] = placement.MODEL_MOUNT if image is not None else str(revision.model_dir)
            own = container_env.resolve(spec.container.env, known,
                                        ConfigStore(load_settings().home).in_namespace(spec.namespace))
            variables = {**known, **own}
            argv = [container_env.expand(part, variables) for part in (*spec.container.command, *spec.container.args)]
            if image is not None:
                binds = placement.model_bind(revision.model_dir)
                launcher = with_data.parse_command(argv)  # arena serve --data: the datasets bound into the image
                if launcher is not None:
                    argv = launcher[3]
                    binds += self._data_binds(revision, launcher[2])
                return Launch(argv, variables, cwd, int(variables.get("PORT") or port), image=image,
                              binds=binds, working_dir=spec.container.working_dir)
            folder = Path(spec.container.working_dir) if spec.container.working_dir else cwd
            # multi-user: a workingDir of the spec is not bound back (one inside the home stays covered)
            folders = (cwd, *((revision.model_dir,) if revision.model_dir is not None else ()))
            return Launch(argv, variables, folder, int(variables.get("PORT") or port), own=folders)
        assert revision.model_dir is not None
        argv = model_server.command(self.name, revision.model_dir, str(spec.model_format), port=0)
        return Launch(argv, base, cwd, own=(cwd, revision.model_dir))

    def _data_binds(self, revision: RevisionRun, mounts: list[tuple[str, str]]) -> list[Bind]:
        """The ``--data`` datasets of a revision in its image: leased once, for as long as the revision runs."""
        if revision.data_binds is None:
            revision.data_binds = with_data.sources(self.namespace, self.name, mounts, revision.held)
        return list(revision.data_binds)

    # ------------------------------------------------------------------ traffic and status

    def _route(self) -> None:
        """Each revision's share now: a canary split, or the latest promoted (the previous stopped) once it answers."""
        latest = self.revisions[self.latest]
        previous = self.revisions.get(self.rolled_out) if self.rolled_out != self.latest else None
        canary = latest.predictor.get("canaryTrafficPercent")
        if previous is None:
            self.percents = {latest.name: 100}
        elif canary is not None and canary < 100:
            share = int(canary) if latest.ready_urls else 0
            self.percents = {previous.name: 100 - share, latest.name: share}
        elif latest.ready_urls:
            print(f"{now_iso()} revision {latest.name} answers: promoted, {previous.name} stops", flush=True)
            self.rolled_out = latest.name
            self._retire(previous.name)
            self._write_state()
            self.percents = {latest.name: 100}
        else:
            self.percents = {previous.name: 100, latest.name: 0}

    def _publish(self) -> None:
        """Rewrite the endpoints when the replicas that answer (or the traffic) changed; the status likewise."""
        order = self._served_order()
        shown = tuple(endpoints.Revision(name, self.percents.get(name, 0), self.revisions[name].ready_urls)
                      for name in order)
        replicas = [{"revision": r.revision, "index": r.index, "url": r.url, "restarts": r.restarts,
                     "pid": r.process.pid if r.process else None, "failure": r.failure, "log": str(r.log),
                     "ticks": r.ticks if r.process else None, "started": r.started_iso or None,
                     "blocked": r.blocked, "container": r.container.name if r.container else None}
                    for name in order for r in self.revisions[name].replicas]
        key = (shown, json.dumps(replicas, sort_keys=True))
        latest = self.revisions[self.latest]
        if key != self.published:
            self.published = key
            endpoints.write(endpoints.Endpoints(
                name=self.name, namespace=self.namespace, uid=self.uid, model_name=self.name,
                protocol=latest.spec.protocol, port=self.port, revisions=shown, supervisor_pid=self.me.pid,
                supervisor_ticks=self.me.start, updated=now_iso(), server=latest.spec.server,
                extra={"replicas": replicas, "url": self.url}, kind=self.kind))
        self._write_status()

    def _served_order(self) -> list[str]:
        """The revisions the endpoints name, in order: the rolled-out one, then the latest."""
        order = [name for name in (self.rolled_out, self.latest) if name in self.revisions]
        return list(dict.fromkeys(order))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _note_ready(self) -> None:
        """Remember the newest revision that answered (kept in ``revisions.json``: a restart keeps it)."""
        answered = [name for name, revision in self.revisions.items() if revision.ready_urls]
        newest = max(answered, default="")
        if newest > self.ready_revision:  # NAME-predictor-0000N: the number orders them
            self.ready_revision = newest
            self._write_state()

    def _write_status(self) -> None:
        self._note_ready()
        seen = status_of(self.revisions, self.percents, self.latest)
        previous = self.rolled_out if self.rolled_out != self.latest else None
        key = (seen, previous, tuple(sorted(self.percents.items())), self.ready_revision)
        if key == self.written_key and self.resource.status == self.written:
            return
        value = objects.status(
            seen.ready, seen.reason, seen.message, url=self.url if seen.ready == "True" else None, active=seen.active,
            transition=seen.transition, revision=self.latest, previous=previous,
            canary_percent=self.percents.get(self.latest) if previous else None,
            ready_revision=self.ready_revision or None)
        if seen.blocked is not None:  # the latest cannot load while the previous serves: KServe says so too
            value["modelStatus"]["lastFailureInfo"] = {"reason": seen.blocked[0], "message": seen.blocked[1]}
        current = self.store.get("InferenceService", self.name, self.namespace)
        if current is None or current.uid != self.uid:
            return
        objects.set_status(self.store, self.name, self.namespace, value)
        self.written_key, self.written = key, json.loads(json.dumps(value))
        self.resource = self.store.get("InferenceService", self.name, self.namespace) or self.resource

    # ------------------------------------------------------------------ files

    def _pick_port(self) -> int:
        """The port it had (a restarted supervisor keeps it) where still free, else a free one."""
        try:
            kept = int((self.folder / PORT_FILE).read_text().strip())
        except (OSError, ValueError):
            kept = 0
        return kept if is_free(kept) else free_port()

    def _write_state(self) -> None:
        write_state(self.folder / STATE_FILE, RevisionState(
            self.uid, self.counter, self.latest, self.rolled_out,
            {name: revision.predictor for name, revision in self.revisions.items()}, self.ready_revision))

    def _write_stopped(self) -> None:
        """The status of an object whose supervisor was stopped while it stays: nothing serves it now."""
        objects.set_status(self.store, self.name, self.namespace, objects.status(
            "Unknown", "Stopped", f"its supervisor was stopped ({self.stop_signal}); nothing serves it now",
            active="Pending"))

    def write_failed(self, why: str) -> None:
        """The status of an object whose supervisor itself failed (the traceback is in its log)."""
        objects.set_status(self.store, self.name, self.namespace, objects.status(
            "False", "SupervisorFailed", why, active="FailedToLoad", transition="BlockedByFailedLoad"))

    def _stop_everything(self) -> None:
        for name in list(self.revisions):
            self._retire(name)
        self._end_retired()
        current = self.store.get(self.kind, self.name, self.namespace) if self.stop_signal else None
        if current is not None and current.uid == self.uid:  # stopped, not deleted: no longer served
            self._write_stopped()
        found = endpoints.read_file(self.namespace, self.name, self.kind)
        if found is None or (found.supervisor_pid, found.supervisor_ticks) == (self.me.pid, self.me.start):
            endpoints.clear(self.namespace, self.name, self.kind)  # never another supervisor's (a re-created one's)
        if self.front is not None:
            self.front.stop()


def _start_front(supervisor: Supervisor, port: int) -> front.Handle:
    """Serve the InferenceService's own port (``serving.front``: round-robin and the canary split over
    ``endpoints.json``), the one its ``status.url`` names, and remember it for the next supervisor.

    The port it had may have been taken meanwhile (it was free when picked, another process may bind
    it before us): then a free one, and the status names the new URL.
    """
    try:
        handle = front.start(port, supervisor.namespace, supervisor.name, kind=supervisor.kind)
    except UserError:
        raise
    except MillpondError:
        handle = front.start(0, supervisor.namespace, supervisor.name, kind=supervisor.kind)
    supervisor.folder.mkdir(parents=True, exist_ok=True)
    (supervisor.folder / PORT_FILE).write_text(f"{handle.port}\n")
    return handle


def lock_path(namespace: str, name: str, uid: str, kind: str = endpoints.ISVC) -> Path:
    """The lock one supervisor of this uid holds while it runs (released by the kernel however it ends)."""
    return endpoints.folder(namespace, name, kind) / f".supervisor-{uid}.lock"


def main(argv: list[str] | None = None) -> int:
    return serve(Supervisor, KIND, argv if argv is not None else sys.argv[1:])


def serve(factory: type[Supervisor], process_kind: str, args: list[str]) -> int:
    """The supervisor process of ``factory.kind``'s object NAMESPACE NAME UID (``args``): one per uid."""
    if len(args) != 3:
        sys.stderr.write(f"error: usage: python -m {factory.__module__} NAMESPACE NAME UID\n")
        return 2
    namespace, name, uid = args
    store = ResourceStore()
    resource = store.get(factory.kind, name, namespace)
    if resource is None or resource.uid != uid:
        return 0
    path = lock_path(namespace, name, uid, factory.kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return 0  # another supervisor serves this object: one per uid
    register(process_kind, f"{namespace}/{name}", uid)
    supervisor = factory(store, resource)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda num, _frame: supervisor.ask_stop(num))
    try:
        supervisor.run()
    except Exception as exc:  # noqa: BLE001 - any failure is the InferenceService's status, not a silent death
        traceback.print_exc()  # into supervisor.log
        why = f"its supervisor failed: {type(exc).__name__}: {exc}"
        current = store.get(factory.kind, name, namespace)
        if current is not None and current.uid == uid:
            supervisor.write_failed(why)
        return 1
    finally:
        lock.release()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

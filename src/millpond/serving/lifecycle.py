"""Starting, stopping and watching the supervisor of an InferenceService: what every front end calls.

``millpond apply -f`` and the server's apply route call :func:`start` for a created or
configured InferenceService (and for an unchanged one that has no live supervisor); ``delete``
calls :func:`stop`; ``get`` and the resource routes show :func:`observed_status`; ``millpond
server`` calls :func:`reconcile` at start-up and every ``RECONCILE_S`` (a supervisor killed, or
the machine restarted, is started again). ``arena serve`` and ``millpond serve`` use the same calls.

One supervisor per InferenceService uid (``serving.supervisor``): it is found among the home's
background processes (``runners.background``, kind ``inference-service``), and a second one
started at the same moment leaves at once (it holds a lock for the uid while it runs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from millpond.errors import UnavailableError, UserError
from millpond.runners import background
from millpond.runners.background import BackgroundProcess, running
from millpond.runners.detached import spawn_detached
from millpond.runners.environment import detached_environment
from millpond.runners.reconcile import Applied, applied
from millpond.runners.reconcile import reconcile as reconcile_pass
from millpond.serving import endpoints, placement
from millpond.serving.manifests import ServingManifest
from millpond.serving.objects import predictor_of, set_status, status
from millpond.serving.observed import NOT_SERVED, observed_status, ready_condition
from millpond.serving.seldon.lifecycle import SeldonReconciler
from millpond.serving.spec import predictor_spec
from millpond.serving.supervisor import KIND, LOG_FILE
from millpond.store.resources import Resource, ResourceStore

STOP_WAIT_S = 15.0  # the supervisor's replicas get 5 s of grace each: it ends well within this
RECONCILE_S = 10.0


def supervisor_log(name: str, namespace: str = "default") -> Path:
    """The supervisor's own log (its traceback, if it failed)."""
    return endpoints.folder(namespace, name) / LOG_FILE


def supervisors(name: str, namespace: str = "default") -> list[BackgroundProcess]:
    """The live supervisors recorded for the InferenceService (whatever uid: an older one may still be ending)."""
    served = f"{namespace}/{name}"
    return [record for record in running() if record.kind == KIND and record.object == served]


def _live(name: str, namespace: str, uid: str) -> bool:
    return any(record.uid == uid for record in supervisors(name, namespace))


def start(store: ResourceStore, name: str, namespace: str = "default") -> bool:
    """Start the InferenceService's supervisor unless a live one runs for its uid; nothing for one it cannot serve.

    Returns at once (the status says Loading, then Ready), True if it started one. NotFoundError-free:
    a name that is not stored starts nothing.
    """
    resource = store.get("InferenceService", name, namespace)
    if resource is None or not servable(resource) or _live(name, namespace, resource.uid):
        return False
    try:
        spawn_detached("millpond.serving.supervisor", [namespace, name, resource.uid],
                       log=supervisor_log(name, namespace),
                       env=detached_environment(),  # it outlives a deploy task's run: not the engine's to kill
                       kind=KIND, served=f"{namespace}/{name}", uid=resource.uid)
    except OSError as exc:  # no process could be made (too many, no memory): said in its status, not raised
        set_status(store, name, namespace, status("False", "SupervisorFailed", f"cannot start its supervisor: {exc}",
                                                  active="FailedToLoad", transition="BlockedByFailedLoad"))
        return False
    return True


def start_applied(manifests: list[ServingManifest], store: ResourceStore) -> None:
    """``start`` for each InferenceService just applied (created, configured, or unchanged with no supervisor)."""
    for manifest in manifests:
        if manifest.info.kind == "InferenceService":
            start(store, manifest.name, manifest.namespace)


def servable(resource: Resource) -> bool:
    """Whether millpond can run this InferenceService's predictor here (else its status already says why)."""
    try:
        return predictor_spec(resource.manifest).unservable is None
    except UserError:
        return False


def stop(name: str, namespace: str = "default") -> bool:
    """SIGTERM the InferenceService's supervisors and wait (briefly) until they are gone; True if one ran.

    A supervisor that does not end in ``STOP_WAIT_S`` is SIGKILLed with its group (its replicas die
    with it: they are bound to it); the endpoints are cleared either way, and any container of its
    replicas still there (a supervisor killed with -9 leaves them) is removed.
    """
    found = supervisors(name, namespace)
    background.end_all(found, STOP_WAIT_S)
    if endpoints.read(namespace, name) is None:
        endpoints.clear(namespace, name)
    placement.sweep_owned(namespace, name)
    return bool(found)


def wait_ready(store: ResourceStore, name: str, namespace: str = "default", timeout_s: float = 60.0) -> Resource:
    """The InferenceService once Ready True; UnavailableError with its status's reason when it failed or timed out.

    UserError (NotFoundError) when it is not stored, or was deleted while waiting.
    """
    predictor_of(store, name, namespace)  # NotFoundError when there is none
    deadline = time.monotonic() + timeout_s
    while True:
        resource = store.get("InferenceService", name, namespace)
        if resource is None:
            raise UnavailableError(f"InferenceService {name} (namespace {namespace}) was deleted while waiting")
        status = observed_status(resource)
        ready, reason, message = ready_condition(status)
        if ready == "True":
            return resource
        if ready == "False" and reason != NOT_SERVED:
            raise UnavailableError(f"InferenceService {name} is not ready: {reason}: {message}")
        if time.monotonic() >= deadline:
            raise UnavailableError(f"InferenceService {name} is not ready after {timeout_s:g}s"
                                   + (f": {reason}: {message}" if reason else ""))
        time.sleep(0.1)


class ServingTransition(Enum):
    """What the serving reconciler does (its only transition)."""

    START_SUPERVISOR = "a servable InferenceService has no live supervisor for its uid: start one"


@dataclass(frozen=True)
class ServiceSeen:
    """One stored InferenceService as observed: whether millpond can serve it, and whether a supervisor does."""

    namespace: str
    name: str
    uid: str
    servable: bool
    supervised: bool


@dataclass(frozen=True)
class ServingSnapshot:
    """Every stored InferenceService, observed."""

    services: tuple[ServiceSeen, ...]


class ServingReconciler:
    """Every servable InferenceService has a supervisor: one killed, failed, or lost with the machine is started again.

    1. START_SUPERVISOR: servable, and no live supervisor recorded for its uid → ``start`` (which looks
       again: a supervisor started meanwhile by an ``apply`` is not doubled).
    """

    name = "serving"

    def __init__(self, store: ResourceStore) -> None:
        self.store = store

    def observe(self) -> ServingSnapshot:
        supervised = {(record.object, record.uid) for record in running() if record.kind == KIND}
        return ServingSnapshot(tuple(
            ServiceSeen(resource.namespace, resource.name, resource.uid, servable(resource),
                        (f"{resource.namespace}/{resource.name}", resource.uid) in supervised)
            for resource in self.store.list("InferenceService", None)
        ))

    def step(self, snapshot: ServingSnapshot) -> list[Applied]:
        done = []
        for service in snapshot.services:
            if service.servable and not service.supervised and start(self.store, service.name, service.namespace):
                done.append(applied(self.name, ServingTransition.START_SUPERVISOR,
                                    f"{service.namespace}/{service.name}"))
        return done


def reconcile(store: ResourceStore | None = None) -> list[str]:
    """Start a supervisor for every servable InferenceService (and SeldonDeployment) that has none; ``NS/NAME`` of
    those started."""
    store = store or ResourceStore()
    passes = (*reconcile_pass(ServingReconciler(store)), *reconcile_pass(SeldonReconciler(store)))
    return [done.subject for done in passes]


def replica_logs(name: str, namespace: str = "default") -> list[Path]:
    """Every replica log of the InferenceService, by revision then replica (``arena serve logs`` reads them)."""
    folder = endpoints.folder(namespace, name) / "logs"
    if not folder.is_dir():
        return []
    return sorted(folder.glob("*/replica-*.log"), key=lambda p: (p.parent.name, _index(p)))


def _index(path: Path) -> int:
    try:
        return int(path.stem.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return 0

"""Starting and stopping the supervisor of a SeldonDeployment, and the reconciler that keeps one running.

The InferenceService's lifecycle (``serving.lifecycle``) for the other kind: ``apply`` starts a supervisor
(``serving.seldon.supervisor``) for a created, configured, or unsupervised SeldonDeployment that has a
predictor millpond can run; ``delete`` stops it; ``millpond server``'s serving reconciler starts one again
after a ``kill -9`` or a reboot (1. START_SUPERVISOR, as for an InferenceService).
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
from millpond.serving import endpoints, placement
from millpond.serving.seldon import status as seldon_status
from millpond.serving.seldon.graph import read_predictors
from millpond.serving.seldon.kinds import KIND
from millpond.serving.seldon.supervisor import PROCESS_KIND
from millpond.serving.supervisor import LOG_FILE
from millpond.store.resources import Resource, ResourceStore

STOP_WAIT_S = 15.0
MODULE = "millpond.serving.seldon.supervisor"


def supervisor_log(name: str, namespace: str = "default") -> Path:
    return endpoints.folder(namespace, name, KIND) / LOG_FILE


def supervisors(name: str, namespace: str = "default") -> list[BackgroundProcess]:
    served = f"{namespace}/{name}"
    return [record for record in running() if record.kind == PROCESS_KIND and record.object == served]


def servable(resource: Resource) -> bool:
    """Whether one of its predictors can run here (else its status already says why not)."""
    try:
        return any(predictor.unservable is None for predictor in read_predictors(resource.manifest))
    except UserError:
        return False


def start(store: ResourceStore, name: str, namespace: str = "default") -> bool:
    """Start its supervisor unless a live one runs for its uid; True if one was started."""
    resource = store.get(KIND, name, namespace)
    if resource is None or not servable(resource):
        return False
    if any(record.uid == resource.uid for record in supervisors(name, namespace)):
        return False
    try:
        spawn_detached(MODULE, [namespace, name, resource.uid], log=supervisor_log(name, namespace),
                       env=detached_environment(), kind=PROCESS_KIND, served=f"{namespace}/{name}", uid=resource.uid)
    except OSError as exc:
        store.set_status(KIND, name, seldon_status.status(name, seldon_status.FAILED,
                                                          f"cannot start its supervisor: {exc}",
                                                          read_predictors(resource.manifest)), namespace)
        return False
    return True


def stop(name: str, namespace: str = "default") -> bool:
    """SIGTERM its supervisors and wait until they are gone (SIGKILL after ``STOP_WAIT_S``); True if one ran."""
    found = supervisors(name, namespace)
    background.end_all(found, STOP_WAIT_S)
    if endpoints.read(namespace, name, KIND) is None:
        endpoints.clear(namespace, name, KIND)
    placement.sweep_owned(namespace, name, KIND)
    return bool(found)


class SeldonTransition(Enum):
    START_SUPERVISOR = "a SeldonDeployment with a predictor that runs here has no live supervisor for its uid"


@dataclass(frozen=True)
class SeldonSnapshot:
    unsupervised: tuple[tuple[str, str], ...]  # (namespace, name) of servable ones without a live supervisor


class SeldonReconciler:
    """Every servable SeldonDeployment has a supervisor (1. START_SUPERVISOR, through ``start``)."""

    name = "seldon"

    def __init__(self, store: ResourceStore) -> None:
        self.store = store

    def observe(self) -> SeldonSnapshot:
        supervised = {(record.object, record.uid) for record in running() if record.kind == PROCESS_KIND}
        return SeldonSnapshot(tuple(
            (resource.namespace, resource.name) for resource in self.store.list(KIND, None)
            if (f"{resource.namespace}/{resource.name}", resource.uid) not in supervised and servable(resource)))

    def step(self, snapshot: SeldonSnapshot) -> list[Applied]:
        return [applied(self.name, SeldonTransition.START_SUPERVISOR, f"{namespace}/{name}")
                for namespace, name in snapshot.unsupervised if start(self.store, name, namespace)]


def wait_available(store: ResourceStore, name: str, namespace: str = "default", timeout_s: float = 60.0) -> str:
    """The SeldonDeployment's ``status.address.url`` once ``state: Available``; UnavailableError with its
    description when it failed (a predictor with traffic cannot run here, or its model cannot load) or timed out."""
    deadline = time.monotonic() + timeout_s
    while True:
        resource = store.get(KIND, name, namespace)
        if resource is None:
            raise UnavailableError(f"SeldonDeployment {name} (namespace {namespace}) does not exist")
        shown = seldon_status.observed(resource)
        if shown.get("state") == seldon_status.AVAILABLE:
            return str((shown.get("address") or {}).get("url") or "")
        if shown.get("state") == seldon_status.FAILED and shown.get("description") != seldon_status.NOT_SERVED:
            raise UnavailableError(f"SeldonDeployment {name} failed: {shown.get('description', '')}")
        if time.monotonic() >= deadline:
            raise UnavailableError(f"SeldonDeployment {name} is not Available after {timeout_s:g}s: "
                                   f"{shown.get('state')}: {shown.get('description', '')}")
        time.sleep(0.1)

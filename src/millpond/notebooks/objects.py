"""Notebooks in the resource store and their supervisors: start, observe, delete, and where one is reached.

Every Notebook has one supervisor per uid (``notebooks.supervisor``), detached and recorded among the
home's background processes (kind ``notebook``: ``millpond ps`` lists it, a home's end ends it).
``apply`` starts one for a Notebook that has none (a changed annotation is read by the running one).
``delete`` removes the object, SIGTERMs the supervisor and waits until it ended the server and its
kernels (and removes a container left of it), then removes its folder (the token with it; the workspace stays).
``endpoint`` is what the proxy of ``millpond server`` reads: the port and Jupyter's token.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from typing import Any

from millpond.manifest_envelope import not_found
from millpond.notebooks import in_image, paths, service_account
from millpond.notebooks.kinds import NOTEBOOK
from millpond.runners import background, object_supervisors
from millpond.runners.background import BackgroundProcess
from millpond.runners.processes import is_running
from millpond.settings import Settings
from millpond.store.resources import Resource, ResourceStore

PROCESS_KIND = "notebook"
STOP_WAIT_S = 30.0  # the server gets 5 s of grace, then its kernels are swept


@dataclass(frozen=True)
class Endpoint:
    """Where a running notebook's server listens, and the token it expects (never shown to a browser)."""

    port: int
    token: str


def supervisors(namespace: str, name: str, uid: str | None = None) -> list[BackgroundProcess]:
    return object_supervisors.supervisors(PROCESS_KIND, namespace, name, uid)


def start(settings: Settings, resource: Resource) -> bool:
    """Start the notebook's supervisor unless one runs for its uid; True if one was started."""
    try:
        return object_supervisors.start("millpond.notebooks.supervisor", PROCESS_KIND, resource.namespace,
                                        resource.name, resource.uid, paths.supervisor_log(settings, resource.uid))
    except OSError as exc:  # said in its status, not raised
        ResourceStore(settings).set_status(NOTEBOOK.kind, resource.name, {
            "conditions": [], "readyReplicas": 0,
            "containerState": {"waiting": {"reason": "CreateContainerError",
                                           "message": f"cannot start its supervisor: {exc}"}}}, resource.namespace)
        return False


def observed(resource: Resource, settings: Settings | None = None) -> dict[str, Any]:
    """The status to show: as written, unless its supervisor is gone (then nothing runs for it), or the server it
    last called ready is gone (killed: until the supervisor's next tick notices, it is not shown ready)."""
    status = dict(resource.status)
    if supervisors(resource.namespace, resource.name, resource.uid):
        return status if settings is None or not status.get("readyReplicas") else _server_alive(settings, resource,
                                                                                                  status)
    if resource.process is None and time.time() - resource.created_at.timestamp() < 10:
        return status  # its supervisor is starting
    return {**status, "readyReplicas": 0, "containerState": {"waiting": {
        "reason": "SupervisorGone",
        "message": "its supervisor is gone (killed, or the machine restarted); millpond server or an apply "
                   "starts it again"}}}


def _server_alive(settings: Settings, resource: Resource, status: dict[str, Any]) -> dict[str, Any]:
    """``status`` when the server it calls ready still runs; else not ready (what reports running is alive)."""
    shown = view(settings, resource.uid) or {}
    pid = shown.get("pid")
    if isinstance(pid, int) and same_process(pid, shown.get("ticks")):
        return status
    conditions = [{**condition, "status": "False", "reason": "ContainersNotReady"}
                  if condition.get("type") in ("Ready", "ContainersReady") else condition
                  for condition in status.get("conditions") or []]
    return {**status, "conditions": conditions, "readyReplicas": 0, "containerState": {"terminated": {
        "exitCode": 137, "reason": "ContainerStatusUnknown",
        "message": f"the server (pid {pid}) is gone; its supervisor starts it again"}}}


def as_object(resource: Resource, settings: Settings | None = None) -> dict[str, Any]:
    return resource.as_object(observed(resource, settings))


def view(settings: Settings, uid: str) -> dict[str, Any] | None:
    """What the supervisor last wrote of its server (``endpoint.json``), or None."""
    try:
        found = json.loads(paths.endpoint_file(settings, uid).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def endpoint(settings: Settings, namespace: str, name: str) -> Endpoint | None:
    """The running server of Notebook ``namespace/name`` (None: no such notebook, or nothing listens yet)."""
    resource = ResourceStore(settings).get(NOTEBOOK.kind, name, namespace)
    if resource is None:
        return None
    shown = view(settings, resource.uid)
    token = paths.read_token(settings, resource.uid)
    if not shown or not isinstance(shown.get("port"), int) or not token or not shown.get("ready"):
        return None
    pid = shown.get("pid")
    if not isinstance(pid, int) or not same_process(pid, shown.get("ticks")):
        return None  # what its supervisor last wrote, but the server is gone (the supervisor was killed)
    return Endpoint(shown["port"], token)


def same_process(pid: int, ticks: object) -> bool:
    """Whether ``pid`` is still the process that started at ``ticks`` and runs (not gone, not a reused pid, not a
    zombie its supervisor has not reaped yet)."""
    return isinstance(ticks, str) and is_running(pid, ticks)


def stop(namespace: str, name: str) -> None:
    """SIGTERM the notebook's supervisors and wait until they ended (the server and its kernels with them)."""
    background.end_all(supervisors(namespace, name), STOP_WAIT_S)


def delete(settings: Settings, namespace: str, name: str) -> None:
    """Forget the notebook and end every process it started; NotFoundError if there is none."""
    store = ResourceStore(settings)
    resource = store.get(NOTEBOOK.kind, name, namespace)
    if resource is None or not store.delete(NOTEBOOK.kind, name, namespace):
        raise not_found(NOTEBOOK, name, namespace)
    stop(namespace, name)
    in_image.sweep_owned(settings, resource.uid, namespace, name)  # a supervisor killed with -9 left its container
    service_account.revoke(settings, resource.uid)  # its ServiceAccount token (multi-user), as a pod's dies with it
    shutil.rmtree(paths.folder(settings, resource.uid), ignore_errors=True)  # its token and logs, as a pod's go


def reconcile(settings: Settings) -> list[str]:
    """Start a supervisor for every Notebook that has none (one killed, or all after the machine restarted),
    as the notebook controller's StatefulSet brings its pod back; the names started."""
    started = []
    for resource in ResourceStore(settings).list(NOTEBOOK.kind, None):
        if start(settings, resource):
            started.append(f"{resource.namespace}/{resource.name}")
    return started

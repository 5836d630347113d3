"""RayClusters and RayJobs in the resource store, and their supervisors: start, stop, observe, delete.

Every object has one supervisor process per uid (``kuberay.supervisor``), started detached and
recorded among the home's background processes (kind ``raycluster``/``rayjob``, so ``millpond ps``
lists it and a corpus run ends it with its home). ``apply`` starts one for a created object, and for
a configured or unchanged one that has none (a suspended RayCluster resumed, a failed one applied
again). Reads go through :func:`observed`: a status that is not final whose supervisor is gone
(killed, the machine restarted) is shown failed, saying so. ``delete`` removes the object, then
SIGTERMs its supervisor and waits until it ended its nodes; a RayJob's own RayCluster (KubeRay's
``ray.io/originated-from-cr-name`` label) is deleted with it, as KubeRay's owner reference does.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from millpond.kuberay import paths
from millpond.kuberay.kinds import RAY_CLUSTER, RAY_JOB
from millpond.manifest_envelope import not_found
from millpond.runners import background
from millpond.runners.background import BackgroundProcess, running
from millpond.runners.detached import spawn_detached
from millpond.runners.environment import detached_environment
from millpond.settings import Settings
from millpond.store.resources import Resource, ResourceStore

PROCESS_KINDS = {RAY_CLUSTER.kind: "raycluster", RAY_JOB.kind: "rayjob"}
STOP_WAIT_S = 40.0  # a supervisor stops its nodes with 5 s of grace each; a job's waits for its cluster
ORIGIN_KIND_LABEL = "ray.io/originated-from-crd"
ORIGIN_NAME_LABEL = "ray.io/originated-from-cr-name"
FINAL_JOB = ("Complete", "Failed", "ValidationFailed")
FINAL_CLUSTER = ("failed",)


def supervisors(kind: str, namespace: str, name: str, uid: str | None = None) -> list[BackgroundProcess]:
    """The live supervisors of the object (of ``uid`` only, when given)."""
    served = f"{namespace}/{name}"
    return [record for record in running() if record.kind == PROCESS_KINDS[kind] and record.object == served
            and (uid is None or record.uid == uid)]


def start(settings: Settings, resource: Resource, user: str = "") -> bool:
    """Start the object's supervisor unless one runs for its uid; True if one was started. ``user``: who applied
    it (the API caller), recorded as its Kueue workload's user ("" when not known: ``anonymous``)."""
    if supervisors(resource.kind, resource.namespace, resource.name, resource.uid):
        return False
    try:
        spawn_detached("millpond.kuberay.supervisor",
                       [resource.kind, resource.namespace, resource.name, resource.uid, *([user] if user else [])],
                       log=paths.supervisor_log(settings, resource.uid), env=detached_environment(),
                       kind=PROCESS_KINDS[resource.kind], served=f"{resource.namespace}/{resource.name}",
                       uid=resource.uid)
    except OSError as exc:  # no process could be made: said in its status, not raised
        reason = f"cannot start its supervisor: {exc}"
        status = ({"state": "failed", "reason": reason} if resource.kind == RAY_CLUSTER.kind
                  else {"jobDeploymentStatus": "Failed", "reason": "SubmissionFailed", "message": reason})
        ResourceStore(settings).set_status(resource.kind, resource.name, status, resource.namespace)
        return False
    return True


def stop(kind: str, namespace: str, name: str) -> None:
    """SIGTERM the object's supervisors and wait until they ended (their nodes with them); SIGKILL
    (their group; their guardian ends the nodes) one that does not end in ``STOP_WAIT_S``."""
    background.end_all(supervisors(kind, namespace, name), STOP_WAIT_S)


def final(resource: Resource) -> bool:
    if resource.kind == RAY_JOB.kind:
        return resource.status.get("jobDeploymentStatus") in FINAL_JOB
    return resource.status.get("state") in FINAL_CLUSTER


def observed(resource: Resource) -> dict[str, Any]:
    """The status to show: as written, unless it is not final and its supervisor is gone."""
    status = dict(resource.status)
    if final(resource) or supervisors(resource.kind, resource.namespace, resource.name, resource.uid):
        return status
    if resource.process is None and time.time() - resource.created_at.timestamp() < 10:
        return status  # its supervisor is starting: it records itself on the object first
    why = "its supervisor is gone (killed, or the machine restarted); apply it again to start it"
    if resource.kind == RAY_JOB.kind:
        return {**status, "jobDeploymentStatus": "Failed", "reason": "SupervisorGone", "message": why}
    return {**status, "state": "failed", "reason": why}


def as_object(resource: Resource) -> dict[str, Any]:
    return resource.as_object(observed(resource))


def owned_clusters(store: ResourceStore, namespace: str, job: str) -> list[Resource]:
    """The RayClusters RayJob ``job`` made (KubeRay's origin labels), never one it selected."""
    def made_by_job(cluster: Resource) -> bool:
        labels = cluster.manifest.get("metadata", {}).get("labels") or {}
        return labels.get(ORIGIN_KIND_LABEL) == RAY_JOB.kind and labels.get(ORIGIN_NAME_LABEL) == job
    return [cluster for cluster in store.list(RAY_CLUSTER.kind, namespace) if made_by_job(cluster)]


def delete(settings: Settings, kind: str, namespace: str, name: str) -> None:
    """Forget the object, end its supervisor (and so its nodes), and a RayJob's own cluster; NotFoundError if none."""
    store = ResourceStore(settings)
    if not store.delete(kind, name, namespace):
        raise not_found(RAY_CLUSTER.names if kind == RAY_CLUSTER.kind else RAY_JOB.names, name, namespace)
    stop(kind, namespace, name)
    if kind == RAY_JOB.kind:  # after its supervisor ended: it makes no cluster any more
        for cluster in owned_clusters(store, namespace, name):
            delete_cluster(settings, cluster)


def delete_cluster(settings: Settings, cluster: Resource) -> None:
    """Delete a RayCluster (a RayJob's own) and wait until its nodes ended."""
    store = ResourceStore(settings)
    found = store.get(RAY_CLUSTER.kind, cluster.name, cluster.namespace)
    if found is not None and found.uid == cluster.uid:
        store.delete(RAY_CLUSTER.kind, cluster.name, cluster.namespace)
    stop(RAY_CLUSTER.kind, cluster.namespace, cluster.name)


def driver_log(settings: Settings, namespace: str, name: str) -> Path | None:
    """The RayJob's driver log (what Ray's job API returned for it, copied as it ran); None before it ran."""
    found = ResourceStore(settings).get(RAY_JOB.kind, name, namespace)
    path = paths.driver_log(settings, found.uid) if found is not None else None
    return path if path is not None and path.is_file() else None

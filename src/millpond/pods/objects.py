"""A :class:`~millpond.pods.records.PodView` as the ``v1`` Pod the API server returns, and kubectl's cells for it.

The object carries what clients read of a pod: metadata (name, namespace, uid, creationTimestamp,
labels, annotations, ownerReferences), ``spec.containers`` (name, image, command/args as recorded,
env, resource limits), ``spec.nodeName`` (this host), ``restartPolicy``, and ``status``: phase,
conditions (PodScheduled, Initialized, ContainersReady, Ready), ``hostIP``/``podIP`` (the loopback,
once started), ``startTime`` and ``containerStatuses`` (name, image, imageID, ready, started,
restartCount, state running/terminated/waiting) with the fields the ``kubernetes`` client's models
require. The table's STATUS cell is computed as kubectl's pod printer computes it.
"""

from __future__ import annotations

import datetime as dt
import socket
from typing import Any

from millpond.pods.records import LOCAL_IP, ContainerView, PodView, Running, Terminated, Waiting
from millpond.tables import age_since

COLUMNS = ("NAME", "READY", "STATUS", "RESTARTS", "AGE")


def stamp(moment: dt.datetime | None) -> str | None:
    """RFC 3339 in UTC, as Kubernetes writes times (``2026-01-01T00:00:00Z``)."""
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if moment is not None else None


def as_object(pod: PodView) -> dict[str, Any]:
    """The Pod as ``kubectl get pod -o json`` shows it."""
    metadata: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid,
                                "creationTimestamp": stamp(pod.created_at), "labels": dict(pod.labels)}
    if pod.annotations:
        metadata["annotations"] = dict(pod.annotations)
    if pod.owner is not None:
        metadata["ownerReferences"] = [{"apiVersion": pod.owner.api_version, "kind": pod.owner.kind,
                                        "name": pod.owner.name, "uid": pod.owner.uid, "controller": True,
                                        "blockOwnerDeletion": True}]
    spec = {"containers": [_container_spec(container) for container in pod.containers],
            "nodeName": socket.gethostname(), "restartPolicy": pod.restart_policy,
            "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
            "serviceAccountName": "default"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": _status(pod)}


def _container_spec(container: ContainerView) -> dict[str, Any]:
    shown: dict[str, Any] = {"name": container.name, "image": container.image}
    if container.command:
        shown["command"] = list(container.command)
    if container.args:
        shown["args"] = list(container.args)
    if container.env:
        shown["env"] = [{"name": name, "value": value} for name, value in container.env]
    shown["resources"] = {"limits": dict(container.limits)} if container.limits else {}
    return shown


def _status(pod: PodView) -> dict[str, Any]:
    phase = pod.phase
    started = pod.phase != "Pending" or pod.started_at is not None
    ready = bool(pod.containers) and all(container.ready for container in pod.containers)
    since = stamp(pod.started_at or pod.created_at)
    conditions = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp(pod.created_at)},
        {"type": "Initialized", "status": "True", "lastTransitionTime": stamp(pod.created_at)},
        {"type": "ContainersReady", "status": str(ready), "lastTransitionTime": since},
        {"type": "Ready", "status": str(ready), "lastTransitionTime": since},
    ]
    if phase in ("Succeeded", "Failed"):  # the kubelet's reason once every container ended
        for condition in conditions[2:]:
            condition["reason"] = "PodCompleted"
    status: dict[str, Any] = {"phase": phase, "conditions": conditions, "qosClass": "BestEffort",
                              "containerStatuses": [_container_status(container) for container in pod.containers]}
    if started:
        status.update({"hostIP": LOCAL_IP, "hostIPs": [{"ip": LOCAL_IP}], "podIP": LOCAL_IP,
                       "podIPs": [{"ip": LOCAL_IP}]})
    if pod.started_at is not None:
        status["startTime"] = stamp(pod.started_at)
    return status


def _container_status(container: ContainerView) -> dict[str, Any]:
    state = container.state
    shown: dict[str, Any] = {"name": container.name, "image": container.image, "imageID": "",
                             "ready": container.ready, "restartCount": container.restart_count,
                             "started": isinstance(state, Running)}
    if isinstance(state, Running):
        shown["state"] = {"running": {"startedAt": stamp(state.started_at)}}
    elif isinstance(state, Terminated):
        ended: dict[str, Any] = {"exitCode": state.exit_code, "reason": state.reason}
        if state.message:
            ended["message"] = state.message
        if state.started_at is not None:
            ended["startedAt"] = stamp(state.started_at)
        if state.finished_at is not None:
            ended["finishedAt"] = stamp(state.finished_at)
        shown["state"] = {"terminated": ended}
    else:
        waiting: dict[str, Any] = {"reason": state.reason}
        if state.message:
            waiting["message"] = state.message
        shown["state"] = {"waiting": waiting}
    return shown


def status_cell(pod: PodView) -> str:
    """kubectl's STATUS: the phase, unless a container waits (its reason) or ended (its reason); Completed
    with a container still running reads Running (``printPod``)."""
    reason = pod.phase
    has_running = False
    for container in reversed(pod.containers):
        state = container.state
        if isinstance(state, Waiting) and state.reason:
            reason = state.reason
        elif isinstance(state, Terminated):
            reason = state.reason or f"ExitCode:{state.exit_code}"
        elif container.ready and isinstance(state, Running):
            has_running = True
    if reason == "Completed" and has_running:
        reason = "Running"
    return reason


def cells(pod: PodView, now: dt.datetime) -> list[str]:
    """The row of ``kubectl get pods``: NAME READY STATUS RESTARTS AGE."""
    ready = sum(1 for container in pod.containers if container.ready)
    restarts = sum(container.restart_count for container in pod.containers)
    return [pod.name, f"{ready}/{len(pod.containers)}", status_cell(pod), str(restarts),
            age_since(pod.created_at, now)]

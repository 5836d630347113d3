"""A Notebook's status as Kubeflow's notebook controller writes it, from what its supervisor observes.

The controller copies its pod's conditions (``PodScheduled``, ``Initialized``, ``ContainersReady``,
``Ready``: type, status, reason, message, lastProbeTime, lastTransitionTime), the notebook
container's ``state`` (``containerState``: ``running``/``waiting``/``terminated``) and the
StatefulSet's ``readyReplicas``. Here the "pod" is the supervised Jupyter server (``ServerState``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ServerState:
    """The notebook's server as its supervisor last saw it (the pod's phase, in the controller's words)."""

    scheduled: bool = False  # the ledger granted its requests
    unschedulable: str = ""  # why it waits for the machine (or the namespace's quota, or Kueue)
    gated: bool = False  # it waits for Kueue's admission (reason SchedulingGated, not Unschedulable)
    running: bool = False
    ready: bool = False
    started_at: str = ""
    waiting_reason: str = ""  # ContainerCreating, CrashLoopBackOff
    waiting_message: str = ""
    last_exit: dict[str, Any] = field(default_factory=dict)  # the last termination (containerState.terminated)
    stopped: bool = False  # kubeflow-resource-stopped: no pod at all


def container_state(state: ServerState) -> dict[str, Any]:
    if state.stopped or not state.scheduled:
        return {} if state.stopped else {"waiting": {"reason": "Pending", "message": state.unschedulable}}
    if state.running:
        return {"running": {"startedAt": state.started_at}}
    if state.waiting_reason:
        return {"waiting": {"reason": state.waiting_reason, "message": state.waiting_message}}
    return {"terminated": dict(state.last_exit)} if state.last_exit else {}


def _condition(kind: str, true: bool, since: dict[str, tuple[bool, str]], reason: str = "",
               message: str = "") -> dict[str, Any]:
    known = since.get(kind)
    if known is None or known[0] != true:
        since[kind] = (true, now_iso())
    shown: dict[str, Any] = {"type": kind, "status": "True" if true else "False",
                             "lastTransitionTime": since[kind][1]}
    if reason:
        shown["reason"] = reason
    if message:
        shown["message"] = message
    return shown


def notebook_status(state: ServerState, since: dict[str, tuple[bool, str]]) -> dict[str, Any]:
    """The status to write; ``since`` keeps each condition's last transition across calls."""
    if state.stopped:
        return {"conditions": [], "readyReplicas": 0, "containerState": {}}
    waiting = "SchedulingGated" if state.gated else "Unschedulable"
    conditions = [_condition("PodScheduled", state.scheduled, since, "" if state.scheduled else waiting,
                             state.unschedulable)]
    if state.scheduled:
        not_ready = "" if state.ready else "ContainersNotReady"
        conditions += [_condition("Initialized", True, since),
                       _condition("ContainersReady", state.ready, since, not_ready),
                       _condition("Ready", state.ready, since, not_ready)]
    return {"conditions": conditions, "readyReplicas": 1 if state.ready else 0,
            "containerState": container_state(state)}

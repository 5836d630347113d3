"""A RayCluster's status as KubeRay writes it, from what its supervisor observed (pure: no I/O).

KubeRay's fields (``ray-operator/apis/ray/v1/raycluster_types.go``): ``state`` (``ready`` once the
head and every desired worker run and are ready; ``suspended``; ``failed`` here when the head died,
since millpond runs no GCS fault tolerance), ``reason``, ``desiredWorkerReplicas``,
``readyWorkerReplicas``, ``availableWorkerReplicas`` (workers running), ``min``/``maxWorkerReplicas``,
``desiredCPU``/``Memory``/``GPU``/``TPU`` (what the desired pods request), ``head`` (its pod's and
service's address: the loopback here), ``endpoints`` (the head's ports by KubeRay's port names),
``conditions`` (``HeadPodReady``, ``RayClusterProvisioned``, ``RayClusterSuspended``,
``ReplicaFailure``), ``stateTransitionTimes`` and ``lastUpdateTime``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from millpond.kuberay.nodes import HeadPorts, RayNode
from millpond.kuberay.specs import ClusterSpec
from millpond.quantities import Format, Quantity
from millpond.runners.ports import LOCAL_ADDR

READY, SUSPENDED, FAILED = "ready", "suspended", "failed"


@dataclass
class Phase:
    """What the supervisor decided beyond its nodes: the state it holds, why, and since when."""

    state: str = ""  # "", ready, suspended, failed
    reason: str = ""
    transitions: dict[str, str] = field(default_factory=dict)  # state -> when it was first entered
    provisioned_at: str = ""  # when every desired node was first ready
    failure: str = ""  # a worker's last failure (ReplicaFailure)
    conditions: dict[str, tuple[str, str]] = field(default_factory=dict)  # type -> (status, since when)


def _quantity(amount: Fraction, form: Format) -> str:
    return str(Quantity(amount, form))


def _condition(phase: Phase, kind: str, true: bool, reason: str, message: str, now: str) -> dict[str, Any]:
    """One condition; its lastTransitionTime is when its status last changed (kept in ``phase``)."""
    status = "True" if true else "False"
    known = phase.conditions.get(kind)
    if known is None or known[0] != status:
        phase.conditions[kind] = known = (status, now)
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": known[1]}


def cluster_status(cluster: ClusterSpec, name: str, nodes: list[RayNode], ports: HeadPorts | None,
                   phase: Phase, now: str) -> dict[str, Any]:
    """The status of RayCluster ``name`` with ``nodes`` running as observed and the head on ``ports``."""
    head = next((node for node in nodes if node.head), None)
    workers = [node for node in nodes if not node.head]
    cpu, memory, gpus, memory_format = cluster.desired()
    status: dict[str, Any] = {
        "desiredWorkerReplicas": cluster.desired_workers(),
        "readyWorkerReplicas": sum(1 for node in workers if node.ready and node.running()),
        "availableWorkerReplicas": sum(1 for node in workers if node.running()),
        "minWorkerReplicas": cluster.min_workers(), "maxWorkerReplicas": cluster.max_workers(),
        "desiredCPU": _quantity(cpu, Format.DECIMAL_SI), "desiredMemory": _quantity(Fraction(memory), memory_format),
        "desiredGPU": str(gpus), "desiredTPU": "0", "lastUpdateTime": now, "observedGeneration": 1,
    }
    if phase.state:
        status["state"] = phase.state
    if phase.reason:
        status["reason"] = phase.reason
    if phase.transitions:
        status["stateTransitionTimes"] = dict(phase.transitions)
    head_ready = head is not None and head.ready and head.running()
    if head is not None and head.running() and ports is not None:
        status["head"] = {"podIP": LOCAL_ADDR, "serviceIP": LOCAL_ADDR, "podName": head.name,
                          "serviceName": f"{name}-head-svc"}
        status["endpoints"] = {"client": str(ports.client), "dashboard": str(ports.dashboard),
                               "gcs-server": str(ports.gcs), "metrics": str(ports.metrics)}
    conditions = [
        _condition(phase, "HeadPodReady", head_ready, "HeadPodRunningAndReady" if head_ready else "HeadPodNotFound"
                   if head is None else "HeadPodNotReady", "" if head_ready else phase.reason, now),
        _condition(phase, "RayClusterProvisioned", bool(phase.provisioned_at),
                   "AllPodRunningAndReadyFirstTime" if phase.provisioned_at else "RayClusterPodsProvisioning",
                   "" if phase.provisioned_at else "RayCluster Pods are being provisioned for first time", now),
    ]
    if phase.state == SUSPENDED:
        conditions.append(_condition(phase, "RayClusterSuspended", True, "RayClusterSuspended", phase.reason, now))
    if phase.failure:
        conditions.append(_condition(phase, "ReplicaFailure", True, "FailedCreateWorkerPod", phase.failure, now))
    status["conditions"] = conditions
    return status


def same(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether two statuses differ only in their times (no write is needed)."""
    def strip(status: dict[str, Any]) -> dict[str, Any]:
        kept = {k: v for k, v in status.items() if k != "lastUpdateTime"}
        kept["conditions"] = [{k: v for k, v in c.items() if k != "lastTransitionTime"}
                              for c in status.get("conditions") or ()]
        return kept
    return strip(old) == strip(new)

"""``GET /ui-api/nodes``: what the UI's Nodes page charts — each node's CPU, memory and GPUs: capacity,
allocated and used.

Locally the one node is this machine: capacity and allocation from the machine-wide ledger (what
it may hand out, what its live grants hold), use from psutil (every process of the machine, not
only millpond's) and the GPUs' metrics (NVML, else nvidia-smi). With ``millpond server --ray``
the nodes are the Ray cluster's (``ray.nodes()``: each node's totals, and its totals less what
Ray says is available as allocated); Ray reports no per-node use without its dashboard's
metrics agent, so ``used`` is null there and the page draws allocation only.

CPU use is a rate: the busy CPU seconds since the previous poll (any client's) over the time
between, so polling every few seconds is what makes it cheap; the first poll samples for
``FIRST_SAMPLE_S``. The page polls; nothing is pushed.

Multi-user mode: the figures are the cluster's nodes', so the route asks ``list`` on ``nodes`` (cluster
scope: administrators, or whoever a ClusterRole grants it), and each node's holders (what runs there, as
``kubectl describe node`` lists its pods) are those of the namespaces where the caller may ``list`` pods.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import psutil
from fastapi import APIRouter, Request

from millpond.access.attributes import Attributes
from millpond.scheduling import gpu_metrics
from millpond.scheduling.ledger import Ledger
from millpond.scheduling.usage import busy_cpu_seconds
from millpond.server.callers import require
from millpond.server.route_access import list_scope, shows
from millpond.server.state import state_of
from millpond.training import top
from millpond.training.ray_top import ray_nodes

router = APIRouter()
FIRST_SAMPLE_S = 0.2


class CpuSampler:
    """The machine's busy cores between two polls (psutil's CPU times), shared by every poller."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: tuple[float, float] | None = None

    @staticmethod
    def _busy() -> float:
        return busy_cpu_seconds()

    def cores_used(self) -> float:
        with self._lock:
            if self._last is None:
                self._last = (time.monotonic(), self._busy())
                time.sleep(FIRST_SAMPLE_S)
            now, busy = time.monotonic(), self._busy()
            then, before = self._last
            self._last = (now, busy)
        return max(0.0, (busy - before) / (now - then)) if now > then else 0.0


def _sampler(request: Request) -> CpuSampler:
    app_state = request.app.state
    sampler = getattr(app_state, "cpu_sampler", None)
    if sampler is None:
        sampler = app_state.cpu_sampler = CpuSampler()
    return sampler


@router.get("/ui-api/nodes", tags=["UI"])
def nodes(request: Request) -> dict[str, Any]:
    """Every node with ``cpu``, ``memory`` (bytes) and ``gpu`` figures: capacity, allocated, used (null: unknown)."""
    require(request, Attributes("list", resource="nodes"))
    settings = state_of(request).settings
    at = dt.datetime.now(dt.timezone.utc).isoformat()
    if settings.ray_address:
        return {"mode": "ray", "at": at, "nodes": _ray(settings.ray_address)}
    node = _local(_sampler(request))
    scope = list_scope(request, (("", "pods"),), lambda: {holder["namespace"] for holder in node["holders"]})
    node["holders"] = [holder for holder in node["holders"] if shows(scope, holder["namespace"])]
    return {"mode": "local", "at": at, "nodes": [node]}


def _local(sampler: CpuSampler) -> dict[str, Any]:
    ledger = Ledger()
    view = top.node_view(ledger)
    grants = ledger.grants()
    cap = ledger.capacity
    memory = psutil.virtual_memory()
    metrics = gpu_metrics.read()
    return {
        "name": view.name, "ip": view.ip, "role": "local",
        "cpu": {"capacity": cap.cpu_millis / 1000, "allocated": sum(g.request.cpu_millis for g in grants) / 1000,
                # clamped: the two clocks (CPU times, monotonic) are read a moment apart, so a busy
                # machine can measure a hair above its cores (CI saw 2.048 of 2)
                "used": round(min(sampler.cores_used(), float(psutil.cpu_count() or 1)), 3),
                "total": psutil.cpu_count() or 1},
        "memory": {"capacity": cap.memory_bytes, "allocated": sum(g.request.memory_bytes for g in grants),
                   "used": int(memory.total - memory.available), "total": int(memory.total)},
        # GPUs "used": the devices' duty cycles summed (two GPUs at 50% = 1.0), where metrics exist
        "gpu": {"capacity": view.gpu_total, "allocated": view.gpu_allocated,
                "used": round(sum(m.duty_cycle for m in metrics.values()) / 100, 3) if metrics else None,
                "memoryUsed": int(sum(m.memory_used for m in metrics.values())) if metrics else None,
                "memoryTotal": int(sum(m.memory_total for m in metrics.values())) if metrics else None},
        "holders": [{"kind": h.kind, "namespace": h.namespace, "name": h.name, "holds": h.holds}
                    for h in view.holders],
    }


def _ray(address: str) -> list[dict[str, Any]]:
    return [{
        "name": node.name, "ip": node.ip, "role": node.role,
        "cpu": {"capacity": node.cpus, "allocated": node.cpus_allocated, "used": None, "total": node.cpus},
        "memory": {"capacity": node.memory, "allocated": node.memory_allocated, "used": None, "total": node.memory},
        "gpu": {"capacity": node.gpus, "allocated": node.gpus_allocated, "used": None, "memoryUsed": None,
                "memoryTotal": None},
        "holders": [],
    } for node in ray_nodes(address)]

"""Nodes: this machine, or each node of the Ray cluster in cluster mode, as a read-only ``v1`` Node.

The local node is named after the host (lower case, as the kubelet names it). ``status.capacity`` is
what the machine has (its CPUs, memory, GPUs and the home's file system as ``ephemeral-storage``);
``status.allocatable`` what millpond's machine-wide ledger may hand out (``scheduling.ledger``: the
CPU affinity and cgroup quota, the memory, the GPUs it sees) and the space free in the home. The
conditions are the kubelet's: ``Ready``, and ``MemoryPressure``/``DiskPressure`` measured against the
kubelet's default eviction thresholds (100Mi of memory, 10% of the file system). ``describe node``
adds what is allocated and to whom: the ledger's live grants (a job's instances, pipeline tasks).

With ``millpond server --ray`` (``MILLPOND_RAY_ADDRESS``) the nodes are the Ray cluster's, named by
the first 12 hex digits of their id as ``ray status`` names them, with Ray's totals as capacity and
allocatable (Ray does not say who holds what, so a Ray node lists no holders).
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
import shutil
from pathlib import Path
from typing import Any

import psutil

from millpond import __version__
from millpond.core.view import READ_ONLY, Planned, derived_uid, metadata_of, parse_timestamp, timestamp
from millpond.errors import UserError
from millpond.kind_handler import KindContext, KindName
from millpond.manifest_envelope import not_found
from millpond.scheduling.ledger import Ledger
from millpond.settings import Settings
from millpond.tables import age_since
from millpond.training import top, views
from millpond.training.ray_top import RayNodeRow, ray_nodes

KUBELET_VERSION = f"v{__version__}-millpond"
GPU_RESOURCE = "nvidia.com/gpu"
MEMORY_PRESSURE_BYTES = 100 * 2**20  # the kubelet's default memory.available<100Mi
DISK_PRESSURE_SHARE = 0.10  # the kubelet's default nodefs.available<10%
_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64le", "s390x": "s390x"}


def node_name() -> str:
    """The host's name as the kubelet registers it: lower case, and a DNS-1123 subdomain (``_`` becomes ``-``)."""
    name = re.sub(r"[^a-z0-9.-]", "-", views.node_name().lower()).strip("-.")
    return name[:253] or "localhost"


def _cpu(millis: float) -> str:
    """CPUs as a quantity: ``2``, ``1500m``."""
    whole = int(round(millis))
    return str(whole // 1000) if whole % 1000 == 0 else f"{whole}m"


def _kibibytes(amount: float) -> str:
    return f"{int(amount) // 1024}Ki"


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _os_image() -> str:
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"')
    return platform.platform()


def _node_info() -> dict[str, str]:
    machine_id = _read("/etc/machine-id")
    return {"machineID": machine_id, "systemUUID": machine_id, "bootID": _read("/proc/sys/kernel/random/boot_id"),
            "kernelVersion": platform.release(), "osImage": _os_image(),
            "containerRuntimeVersion": "millpond://host", "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": KUBELET_VERSION, "operatingSystem": "linux",
            "architecture": _ARCH.get(platform.machine(), platform.machine())}


def _condition(kind: str, true: bool, reason: str, message: str, since: str, now: str) -> dict[str, str]:
    return {"type": kind, "status": "True" if true else "False", "reason": reason, "message": message,
            "lastHeartbeatTime": now, "lastTransitionTime": since}


def _labels(name: str, role: str | None) -> dict[str, str]:
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "kubernetes.io/arch": _ARCH.get(platform.machine(), platform.machine())}
    if role:
        labels[f"node-role.kubernetes.io/{role}"] = ""
    return labels


def local_node(entry: KindName, settings: Settings) -> dict[str, Any]:
    """This machine as its Node."""
    ledger = Ledger(settings)
    capacity = ledger.capacity
    name = node_name()
    booted = dt.datetime.fromtimestamp(psutil.boot_time(), dt.timezone.utc)
    memory = psutil.virtual_memory()
    disk = shutil.disk_usage(settings.home if settings.home.exists() else settings.home.parent)
    gpus = len(capacity.gpus)
    total = {"cpu": str(os.cpu_count() or 1), "memory": _kibibytes(memory.total),
             "ephemeral-storage": _kibibytes(disk.total)}
    allocatable = {"cpu": _cpu(capacity.cpu_millis), "memory": _kibibytes(capacity.memory_bytes),
                   "ephemeral-storage": _kibibytes(disk.free)}
    if gpus:
        total[GPU_RESOURCE] = allocatable[GPU_RESOURCE] = str(gpus)
    now, since = timestamp(dt.datetime.now(dt.timezone.utc)), timestamp(booted)
    low_memory = memory.available < MEMORY_PRESSURE_BYTES
    low_disk = disk.free < DISK_PRESSURE_SHARE * disk.total
    conditions = [
        _condition("MemoryPressure", low_memory, "KubeletHasInsufficientMemory" if low_memory
                   else "KubeletHasSufficientMemory", f"{memory.available // 2**20}Mi of memory available", since,
                   now),
        _condition("DiskPressure", low_disk, "KubeletHasDiskPressure" if low_disk else "KubeletHasNoDiskPressure",
                   f"{disk.free // 2**30}Gi free in {settings.home}", since, now),
        _condition("PIDPressure", False, "KubeletHasSufficientPID", "kubelet has sufficient PID available", since,
                   now),
        _condition("Ready", True, "KubeletReady", "millpond runs workloads on this machine", since, now),
    ]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": metadata_of(entry, name, "", derived_uid("Node", name, _read("/etc/machine-id")), booted,
                                    {"labels": _labels(name, None)}),
            "spec": {},
            "status": {"capacity": total, "allocatable": allocatable, "conditions": conditions,
                       "addresses": [{"type": "InternalIP", "address": views.LOCAL_IP},
                                     {"type": "Hostname", "address": name}],
                       "nodeInfo": _node_info(), "phase": "Running"}}


def ray_node(entry: KindName, row: RayNodeRow) -> dict[str, Any]:
    """One Ray node as its Node (Ray's totals; its allocation is in ``allocated`` for ``describe``)."""
    now = dt.datetime.now(dt.timezone.utc)
    total = {"cpu": _cpu(row.cpus * 1000), "memory": _kibibytes(row.memory)}
    if row.gpus:
        total[GPU_RESOURCE] = f"{row.gpus:g}"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": metadata_of(entry, row.name, "", derived_uid("Node", row.node_id), now,
                                    {"labels": _labels(row.name, "head" if row.role == "head" else None)}),
            "spec": {},
            "status": {"capacity": total, "allocatable": dict(total),
                       "conditions": [_condition("Ready", True, "RayNodeAlive", "the Ray node is alive",
                                                 timestamp(now), timestamp(now))],
                       "addresses": [{"type": "InternalIP", "address": row.ip}],
                       "nodeInfo": {**_node_info(), "machineID": row.node_id, "systemUUID": row.node_id},
                       "phase": "Running"}}


class NodeView:
    """``NAME STATUS ROLES AGE VERSION``."""

    columns: tuple[str, ...] = ("STATUS", "ROLES", "AGE", "VERSION")

    def objects(self, entry: KindName, namespace: str | None, context: KindContext) -> list[dict[str, Any]]:
        address = context.settings.ray_address
        if address:
            return [ray_node(entry, row) for row in ray_nodes(address)]
        return [local_node(entry, context.settings)]

    def cells(self, shown: dict[str, Any], now: dt.datetime) -> list[str]:
        ready: dict[str, Any] = next((c for c in shown["status"]["conditions"] if c["type"] == "Ready"), {})
        roles = sorted(key.split("/", 1)[1] for key in shown["metadata"].get("labels", {})
                       if key.startswith("node-role.kubernetes.io/"))
        created = parse_timestamp(shown["metadata"]["creationTimestamp"]) or now
        return ["Ready" if ready.get("status") == "True" else "NotReady", ",".join(roles) or "<none>",
                age_since(created, now), shown["status"]["nodeInfo"]["kubeletVersion"]]

    def check(self, entry: KindName, doc: dict[str, Any], where: str, context: KindContext) -> Planned:
        raise UserError(f"{where}: {READ_ONLY}: nodes are the machines millpond runs on (this one, or the Ray "
                        "cluster's); they are not created from manifests")

    def delete(self, entry: KindName, name: str, namespace: str, context: KindContext) -> None:
        if not any(shown["metadata"]["name"] == name for shown in self.objects(entry, None, context)):
            raise not_found(entry, name, namespace)
        raise UserError(f'nodes "{name}" is {READ_ONLY}: millpond does not remove the machines it runs on')


def allocated(shown: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """What ``describe node`` adds: the requests allocated, and each holder of a grant (the local node's)."""
    if settings.ray_address or shown["metadata"]["name"] != node_name():
        return {}
    ledger = Ledger(settings)
    view = top.node_view(ledger)
    grants = ledger.grants()
    allocatable = shown["status"]["allocatable"]
    requests = {"cpu": _cpu(sum(g.request.cpu_millis for g in grants)),
                "memory": _kibibytes(sum(g.request.memory_bytes for g in grants))}
    if GPU_RESOURCE in allocatable:
        requests[GPU_RESOURCE] = str(view.gpu_allocated)
    return {"allocatedResources": {key: f"{value} of {allocatable.get(key, '0')}" for key, value in requests.items()},
            "allocatedTo": [{"namespace": holder.namespace or "<none>", "name": holder.name, "kind": holder.kind,
                             "holds": holder.holds} for holder in view.holders] or "<none>"}

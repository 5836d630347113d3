"""Kubernetes' ResourceQuota as admission reads it: a namespace's hard limits, what a workload would add, and
kube-apiserver's ``exceeded quota`` line when it does not fit.

Kubernetes' quota admission plug-in (``plugin/pkg/admission/resourcequota``) charges every pod a namespace
creates against each ResourceQuota of the namespace and refuses the pod when one limit would be passed:
``exceeded quota: kf-resource-quota, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2,
limited: requests.nvidia.com/gpu=2``. millpond charges the same at the machine's ledger, where every
workload (a run's task, a training job, a batch Job's pod, a RayCluster's node, a model replica) takes its
CPU, memory and GPUs: one grant is one charge, made in the same atomic step (``scheduling.ledger``), so two
processes never both take the last of a quota. A workload that would pass it waits with that line as its
reason, and is admitted when a charge is released, as a Job controller retries a pod the quota refused.

What is counted (amounts in milli-units, as ``queues.model`` counts them): ``cpu``/``requests.cpu``/
``limits.cpu``, ``memory``/``requests.memory``/``limits.memory``, ``requests.nvidia.com/gpu`` (and
``nvidia.com/gpu``/``limits.nvidia.com/gpu``), ``requests.aliyun.com/gpu-mem`` (gpushare's GiB of a GPU's
memory: ``--gpumemory``), and ``pods``/``count/pods`` (a grant's pods). Simplifications, said here: millpond
keeps one figure per workload, so a limit is counted as its request; a workload that asks for nothing takes
no grant and is charged nothing (Kubernetes would still count it under ``pods``); object counts
(``count/<resource>``, ``persistentvolumeclaims``, ``requests.storage``) are shown in ``status.used``
(``core.resource_quotas``) but not enforced; ``scopes``/``scopeSelector`` are kept, not applied.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from millpond.quantities import Format, Quantity, QuantityError, parse_quantity
from millpond.settings import Settings
from millpond.store.resources import ResourceStore

KIND = "ResourceQuota"
GIB = 2**30
GPU_RESOURCE = "nvidia.com/gpu"
GPU_SHARE_RESOURCE = "aliyun.com/gpu-mem"  # Arena's gpushare resource, GiB of one GPU's memory

# What each quota key counts of a grant (the resource a ledger Request holds).
_CPU_KEYS = ("cpu", "requests.cpu", "limits.cpu")
_MEMORY_KEYS = ("memory", "requests.memory", "limits.memory")
_GPU_KEYS = (f"requests.{GPU_RESOURCE}", GPU_RESOURCE, f"limits.{GPU_RESOURCE}")
_SHARE_KEYS = (f"requests.{GPU_SHARE_RESOURCE}", GPU_SHARE_RESOURCE, f"limits.{GPU_SHARE_RESOURCE}")
_POD_KEYS = ("pods", "count/pods")
ENFORCED = frozenset((*_CPU_KEYS, *_MEMORY_KEYS, *_GPU_KEYS, *_SHARE_KEYS, *_POD_KEYS))


@dataclass(frozen=True)
class QuotaLimits:
    """One ResourceQuota's hard limits (resource -> milli-units), as its ``spec.hard`` says."""

    name: str
    hard: Mapping[str, int]


@dataclass(frozen=True)
class Charge:
    """What one grant counts against its namespace's quotas: CPU millicores, memory bytes, whole GPUs, bytes of
    GPU shares' memory, and pods."""

    cpu_millis: int = 0
    memory_bytes: int = 0
    gpus: int = 0
    share_bytes: int = 0
    pods: int = 1

    def amounts(self) -> dict[str, int]:
        """The charge under every quota key, in milli-units (shares' memory in GiB, rounded up to a thousandth)."""
        per_key: dict[str, int] = {}
        for keys, milli in ((_CPU_KEYS, self.cpu_millis), (_MEMORY_KEYS, self.memory_bytes * 1000),
                            (_GPU_KEYS, self.gpus * 1000), (_SHARE_KEYS, math.ceil(self.share_bytes * 1000 / GIB)),
                            (_POD_KEYS, self.pods * 1000)):
            per_key.update(dict.fromkeys(keys, milli))
        return per_key


def total(charges: Iterable[Charge]) -> dict[str, int]:
    """The sum of ``charges`` under every quota key (what ``status.used`` shows of them)."""
    used: dict[str, int] = dict.fromkeys(ENFORCED, 0)
    for charge in charges:
        for key, milli in charge.amounts().items():
            used[key] += milli
    return used


def limits_of(name: str, hard: Mapping[str, Any]) -> QuotaLimits:
    """A ResourceQuota's ``spec.hard`` in milli-units; a value that is no quantity is skipped (its check refused
    it at apply)."""
    parsed: dict[str, int] = {}
    for key, value in hard.items():
        try:
            parsed[str(key)] = parse_quantity(value, key).milli_value()
        except QuantityError:
            continue
    return QuotaLimits(name, parsed)


def amount(resource: str, milli: int) -> str:
    """Milli-units as kube-apiserver prints a quantity: ``500m``, ``2``, ``1Gi`` (memory and storage binary)."""
    binary = resource.endswith(("memory", "storage")) and not resource.endswith("gpu-mem")
    return str(Quantity(Fraction(milli, 1000), Format.BINARY_SI if binary else Format.DECIMAL_SI))


def exceeded(quotas: Iterable[QuotaLimits], used: Mapping[str, int], charge: Charge) -> str | None:
    """kube-apiserver's line for the first quota ``charge`` would pass, given what is ``used``; None when it fits.

    Only the resources the charge asks for and the quota limits are named, as the admission plug-in names them.
    """
    asked = {key: milli for key, milli in charge.amounts().items() if milli > 0}
    for quota in sorted(quotas, key=lambda one: one.name):
        over = sorted(key for key, limit in quota.hard.items()
                      if key in asked and used.get(key, 0) + asked[key] > limit)
        if over:
            def listed(values: Mapping[str, int], keys: list[str] = over) -> str:
                return ",".join(f"{key}={amount(key, values.get(key, 0))}" for key in keys)
            return (f"exceeded quota: {quota.name}, requested: {listed(asked)}, used: {listed(used)}, "
                    f"limited: {listed(quota.hard)}")
    return None


def never_fits(quotas: Iterable[QuotaLimits], charge: Charge) -> str | None:
    """The ``exceeded quota`` line when ``charge`` alone passes a hard limit (nothing used could ever make room)."""
    return exceeded(quotas, {}, charge)


def namespace_quotas(settings: Settings, namespace: str) -> list[QuotaLimits]:
    """The ResourceQuotas applied in ``namespace`` (a Profile's ``kf-resource-quota`` among them)."""
    if not namespace:
        return []
    return [limits_of(row.name, (row.manifest.get("spec") or {}).get("hard") or {})
            for row in ResourceStore(settings).list(KIND, namespace)]

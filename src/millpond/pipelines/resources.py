"""The machine's budget of CPUs, memory and accelerators, and what each task asks of it.

A task starts only when its request fits what the running tasks leave free, as the
Kubernetes scheduler would place a pod; a request larger than the whole machine, or for an
accelerator the machine lacks, fails the task (or, when known before the run, the run).
GPUs are handed out by index, and a task sees only its own through CUDA_VISIBLE_DEVICES.
CPU, memory and accelerator counts are Kubernetes quantities (``millpond.quantities``): CPU is
counted in whole millicores (``500m``, ``0.5``, ``1e3m``), memory in bytes rounded up (``4Gi``,
``1e9``), as the scheduler counts them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from millpond.quantities import QuantityError, parse_bytes, parse_quantity

GPU_TYPES = ("nvidia.com/gpu", "amd.com/gpu")


@dataclass(frozen=True)
class ResourceRequest:
    cpu: float = 0.0
    memory: float = 0.0  # bytes
    accelerator: str | None = None
    accelerators: int = 0

    @property
    def empty(self) -> bool:
        return not (self.cpu or self.memory or self.accelerators)


def _first_field(resources: dict[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` that ``resources`` sets (to something other than empty or 0)."""
    return next((k for k in keys if resources.get(k) not in (None, "", 0)), None)


def _first(resources: dict[str, Any], *keys: str) -> Any:
    field = _first_field(resources, *keys)
    return None if field is None else resources[field]


def _cores(text: Any, what: str) -> float:
    cores = parse_quantity(text, what).cores
    if cores < 0:
        raise QuantityError(f"{what} {text!r} is negative: a request is at least 0")
    return cores


def _count(text: Any, what: str) -> int:
    amount = parse_quantity(text, what).amount
    if amount.denominator != 1 or amount < 0:
        raise QuantityError(f"{what} {text!r} is not a whole number of at least 0 (Kubernetes counts GPUs whole)")
    return amount.numerator


def task_request(container: dict[str, Any]) -> ResourceRequest:
    """What a container asks for: the request, or the limit when only a limit is set (as Kubernetes does).

    QuantityError (a ValueError) names the field and the value that is not a quantity, or is negative.
    """
    resources = container.get("resources") or {}
    cpu_field = _first_field(resources, "resourceCpuRequest", "resourceCpuLimit")
    if cpu_field is not None:
        cpu = _cores(resources[cpu_field], cpu_field)
    else:
        cpu = float(_first(resources, "cpuRequest", "cpuLimit") or 0)
    memory_field = _first_field(resources, "resourceMemoryRequest", "resourceMemoryLimit")
    if memory_field is not None:
        memory = float(parse_bytes(resources[memory_field], memory_field))
    else:
        memory = float(_first(resources, "memoryRequest", "memoryLimit") or 0) * 1e9  # the IR's doubles are GB
    accelerator = resources.get("accelerator") or {}
    kind = accelerator.get("resourceType") or accelerator.get("type")
    count_text = accelerator.get("resourceCount") or accelerator.get("count") or 0
    count = _count(count_text, "accelerator resourceCount") if kind else 0
    return ResourceRequest(cpu=cpu, memory=memory, accelerator=kind if count else None, accelerators=count)


def count_gpus() -> int:
    """GPUs on this machine (MILLPOND_GPUS overrides, for tests and for sharing a machine)."""
    override = os.environ.get("MILLPOND_GPUS")
    if override is not None:
        return int(override)
    proc = Path("/proc/driver/nvidia/gpus")
    if proc.is_dir():
        return len(list(proc.iterdir()))
    if shutil.which("nvidia-smi"):
        try:
            listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return 0
        return sum(1 for line in listing.stdout.splitlines() if line.startswith("GPU "))
    return 0


def total_memory() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError):
        return float("inf")


@dataclass
class Budget:
    """What is free right now; the engine's thread asks and returns."""

    cpus: float = field(default_factory=lambda: float(os.cpu_count() or 1))
    memory: float = field(default_factory=total_memory)
    gpus: int = field(default_factory=count_gpus)

    def __post_init__(self) -> None:
        self._free_cpu = self.cpus
        self._free_memory = self.memory
        self._free_gpus = list(range(self.gpus))
        self._lock = threading.Lock()

    def impossible(self, request: ResourceRequest) -> str | None:
        """Why ``request`` can never be met on this machine, or None."""
        if request.accelerators:
            if request.accelerator not in GPU_TYPES:
                return f"accelerator {request.accelerator!r} is not available on this machine"
            if request.accelerators > self.gpus:
                have = f"only {self.gpus}" if self.gpus else "none"
                return f"requests {request.accelerators} {request.accelerator} but this machine has {have}"
        if request.cpu > self.cpus:
            return f"requests {request.cpu:g} CPUs but this machine has {self.cpus:g}"
        if request.memory > self.memory:
            return (
                f"requests {request.memory / 2**30:.1f} GiB of memory "
                f"but this machine has {self.memory / 2**30:.1f} GiB"
            )
        return None

    def acquire(self, request: ResourceRequest) -> list[int] | None:
        """Reserve ``request`` and return the GPU indices it got, or None when it does not fit now."""
        with self._lock:
            cpu = min(request.cpu, self.cpus)
            if (
                cpu > self._free_cpu + 1e-9
                or request.memory > self._free_memory
                or request.accelerators > len(self._free_gpus)
            ):
                return None
            self._free_cpu -= cpu
            self._free_memory -= request.memory
            gpus, self._free_gpus = self._free_gpus[: request.accelerators], self._free_gpus[request.accelerators :]
            return gpus

    def release(self, request: ResourceRequest, gpus: list[int]) -> None:
        with self._lock:
            self._free_cpu += min(request.cpu, self.cpus)
            self._free_memory += request.memory
            self._free_gpus = sorted(self._free_gpus + gpus)


def static_accelerator_problems(spec: dict[str, Any], budget: Budget) -> list[str]:
    """Accelerator requests in the IR that this machine can never meet: the run fails before any task runs."""
    problems = []
    for label, executor in spec.get("deploymentSpec", {}).get("executors", {}).items():
        container = executor.get("container")
        if not container:
            continue
        try:
            request = task_request(container)
        except ValueError:
            continue
        if request.accelerators:
            reason = budget.impossible(
                ResourceRequest(accelerator=request.accelerator, accelerators=request.accelerators)
            )
            if reason:
                problems.append(f"{label.removeprefix('exec-')} {reason}")
    return problems

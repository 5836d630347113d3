"""The machine's budget of CPUs, memory and accelerators, and what each task asks of it.

A task starts only when its request fits what the running tasks — of every run, and every
training job, of this home (``millpond.scheduling``'s ledger) — leave free, as the Kubernetes
scheduler would place a pod; a request larger than the whole machine, or for an
accelerator the machine lacks, fails the task (or, when known before the run, the run).
GPUs are handed out by index, and a task sees only its own through CUDA_VISIBLE_DEVICES.
CPU, memory and accelerator counts are Kubernetes quantities (``millpond.quantities``): CPU is
counted in whole millicores (``500m``, ``0.5``, ``1e3m``), memory in bytes rounded up (``4Gi``,
``1e9``), as the scheduler counts them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Protocol

from millpond.pipelines.views import PipelineSpec
from millpond.quantities import QuantityError, parse_bytes, parse_quantity
from millpond.scheduling import Grant, Holder, Ledger, Request
from millpond.settings import Settings

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


_INPUT_PLACEHOLDER = re.compile(r"\{\{\$\.inputs\.parameters\['([^']+)'\]\}\}")


def with_inputs(container: dict[str, Any], parameters: dict[str, Any]) -> dict[str, Any]:
    """``container`` with its quantity fields' input placeholders filled from the task's ``parameters``.

    A quantity may be set at run time (kfp 1.x's podSpecPatch from a task output, kfp 2's
    ``set_cpu_limit`` with a pipeline parameter): only the task knows it, just before it runs.
    A placeholder naming no input is a ValueError naming it.
    """
    resources = container.get("resources")
    if not isinstance(resources, dict) or not any(isinstance(v, str) and "{{$." in v for v in resources.values()):
        return container

    def fill(match: re.Match[str]) -> str:
        if match.group(1) not in parameters:
            raise QuantityError(f"resource placeholder {match.group(0)} names no input of the task")
        return str(parameters[match.group(1)])

    filled = {k: _INPUT_PLACEHOLDER.sub(fill, v) if isinstance(v, str) else v for k, v in resources.items()}
    return {**container, "resources": filled}


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


def ledger_request(request: ResourceRequest) -> Request:
    """``request`` in the ledger's units: whole millicores and bytes, rounded up, and a GPU count."""
    return Request(
        cpu_millis=math.ceil(request.cpu * 1000 - 1e-6),
        memory_bytes=math.ceil(request.memory),
        gpus=request.accelerators,
    )


class Budget:
    """The engine's view of the machine-wide ledger (``millpond.scheduling``).

    Every run's engine, and every training job, draws from the same ledger in the home, so two
    runs at once never hand out the same GPU index; this class only translates a task's
    request and names the accelerator in the messages. A task that asks for nothing never
    touches the ledger.
    """

    def __init__(self, settings: Settings, namespace: str = "") -> None:
        self.ledger = Ledger(settings)
        self.namespace = namespace  # the run's: its tasks are charged against its ResourceQuotas

    @property
    def gpus(self) -> int:
        return len(self.ledger.capacity.gpus)

    def impossible(self, request: ResourceRequest) -> str | None:
        """Why ``request`` can never be met on this machine, or None."""
        if request.accelerators and request.accelerator not in GPU_TYPES:
            return f"accelerator {request.accelerator!r} is not available on this machine"
        return self.ledger.impossible(ledger_request(request), gpu_name=request.accelerator)

    def acquire(self, request: ResourceRequest, holder: Holder) -> Grant | None:
        """Reserve ``request`` for ``holder``, or None when it does not fit now (an empty request always fits)."""
        if request.empty:
            return _NOTHING
        return self.ledger.try_acquire(ledger_request(request), holder)

    def release(self, grant: Grant) -> None:
        if grant.id:
            self.ledger.release(grant.id)

    def why_waiting(self, request: ResourceRequest) -> str:
        return self.ledger.why_waiting(ledger_request(request), self.namespace)

    def fallback_warning(self, request: ResourceRequest) -> str | None:
        return self.ledger.fallback_warning(ledger_request(request)) if request.accelerators else None


_NOTHING = Grant(id="", gpus=())  # what an empty request gets: nothing to record, nothing to release


class Capacity(Protocol):
    """What can never be granted: the machine's ledger (``Budget``) or a Ray cluster's (``cluster.ClusterBudget``)."""

    def impossible(self, request: ResourceRequest) -> str | None: ...


def static_accelerator_problems(pipeline: PipelineSpec, budget: Capacity) -> list[str]:
    """Accelerator requests in the IR that this machine can never meet: the run fails before any task runs."""
    problems = []
    for label in pipeline.executor_labels:
        container = pipeline.executor(label).container
        if not container or not container.raw:
            continue
        try:
            request = task_request(container.raw)
        except ValueError:
            continue
        if request.accelerators:
            reason = budget.impossible(
                ResourceRequest(accelerator=request.accelerator, accelerators=request.accelerators)
            )
            if reason:
                problems.append(f"{label.removeprefix('exec-')} {reason}")
    return problems

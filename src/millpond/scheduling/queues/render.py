"""How admission names amounts and workloads in the reasons users read."""

from __future__ import annotations

import functools
from fractions import Fraction

from millpond.quantities import Format, Quantity
from millpond.scheduling.queues.model import GPU_MEMORY, MEMORY, Workload


@functools.lru_cache(maxsize=4096)
def amount(resource: str, milli: int) -> str:
    """Milli-units as a Kubernetes quantity a user writes: ``1500m`` CPU, ``16Gi`` memory, ``2`` GPUs."""
    unit = Format.BINARY_SI if resource in (MEMORY, "ephemeral-storage") else Format.DECIMAL_SI
    text = str(Quantity(Fraction(milli, 1000), unit))
    return f"{text} GiB" if resource == GPU_MEMORY else text


def who(workload: Workload) -> str:
    """``job team-a/train (alice)``: the kind, the project and name, the user."""
    user = f" ({workload.user})" if workload.user else ""
    return f"{workload.kind.value} {workload.namespace}/{workload.name}{user}"

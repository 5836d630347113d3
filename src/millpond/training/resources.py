"""The one door from training jobs to the machine-wide ledger of CPU, memory and GPUs.

The ledger (``millpond.scheduling.ledger``) is shared by every millpond process of a home, so
that a job and pipeline tasks never hand out the same GPU. While it has not landed in this
tree, ``LocalFallback`` stands in for it: it GRANTS EVERYTHING (no GPU indices, no waiting,
nothing refused). It is a documented stopgap, not a ledger: with it, two jobs may run at once
whatever they ask for. Nothing else in ``training`` knows which of the two it talks to.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol

from millpond.training.spec import Resources


@dataclass(frozen=True)
class Granted:
    """What the job holds: the ledger's grant id ("" with the fallback) and the GPU indices it got."""

    id: str
    gpus: tuple[int, ...]


class Allocator(Protocol):
    def impossible(self, wanted: Resources) -> str | None: ...
    def try_acquire(self, wanted: Resources, name: str, pid: int, start: str | None) -> Granted | None: ...
    def release(self, grant_id: str) -> None: ...
    def why_waiting(self, wanted: Resources) -> str: ...
    def fallback_warning(self, wanted: Resources) -> str | None: ...


class LocalFallback:
    """Grants every request at once, with no GPU indices: used only while no ledger exists here."""

    def impossible(self, wanted: Resources) -> str | None:
        return None

    def try_acquire(self, wanted: Resources, name: str, pid: int, start: str | None) -> Granted | None:
        return Granted("", ())

    def release(self, grant_id: str) -> None:
        return None

    def why_waiting(self, wanted: Resources) -> str:
        return ""

    def fallback_warning(self, wanted: Resources) -> str | None:
        return None


class LedgerAllocator:
    """The machine-wide ledger, asked with the job as its holder (kind ``job``)."""

    def __init__(self, module: Any) -> None:
        self._module = module
        self._ledger = module.Ledger()

    def _request(self, wanted: Resources) -> Any:
        return self._module.Request(cpu_millis=wanted.cpu_millis, memory_bytes=wanted.memory_bytes, gpus=wanted.gpus)

    def impossible(self, wanted: Resources) -> str | None:
        return self._ledger.impossible(self._request(wanted))

    def try_acquire(self, wanted: Resources, name: str, pid: int, start: str | None) -> Granted | None:
        grant = self._ledger.try_acquire(self._request(wanted), self._module.Holder("job", name, pid, start))
        return None if grant is None else Granted(grant.id, tuple(grant.gpus))

    def release(self, grant_id: str) -> None:
        self._ledger.release(grant_id)

    def why_waiting(self, wanted: Resources) -> str:
        return self._ledger.why_waiting(self._request(wanted))

    def fallback_warning(self, wanted: Resources) -> str | None:
        """``gpu-fallback cpu``: why GPUs asked for run on CPU (a ledger without the setting: None)."""
        warning = getattr(self._ledger, "fallback_warning", None)
        return warning(self._request(wanted)) if warning else None


def allocator() -> Allocator:
    """The ledger when this tree has it, else ``LocalFallback`` (see the module's docstring)."""
    try:
        module = importlib.import_module("millpond.scheduling.ledger")
    except ModuleNotFoundError:
        return LocalFallback()
    return LedgerAllocator(module)

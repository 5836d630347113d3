"""Helpers Fluid's SDK keeps in ``fluid.utils``: kind names from the ways people write them."""

from __future__ import annotations

from millpond.datasets.kinds import KINDS

# Fluid's SDK accepts these besides kubectl's spellings (``juicefs``, ``alluxioruntimes``…).
_EXTRA_RUNTIME_NAMES = {"juice": "JuiceFSRuntime", "jindofs": "JindoRuntime", "jindofsx": "JindoRuntime",
                        "jindocache": "JindoRuntime"}


def _names(category: str) -> dict[str, str]:
    names: dict[str, str] = {}
    for info in KINDS.values():
        if info.category == category:
            for name in (info.kind, info.plural, *info.short_names):
                names[name.lower()] = info.kind
    return names


def infer_runtime_kind(runtime_type: str | None) -> str | None:
    """``AlluxioRuntime`` for ``alluxio``, ``AlluxioRuntime``, ``alluxioruntimes``…; None when unknown."""
    if not runtime_type:
        return None
    key = runtime_type.strip().lower()
    return _names("runtime").get(key) or _EXTRA_RUNTIME_NAMES.get(key)


def infer_data_operation_kind(data_op_type: str | None) -> str | None:
    """``DataLoad`` for ``dataload``, ``dataloads`` or ``load``; None when unknown."""
    return _names("operation").get(data_op_type.strip().lower()) if data_op_type else None

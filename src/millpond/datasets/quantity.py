"""How Fluid prints sizes and percentages in a dataset's status (``2.00GiB``, ``12.5%``).

Printing only: a size millpond *reads* (a quota) is a Kubernetes quantity, parsed by
:mod:`millpond.quantities`, which refuses Fluid's printed ``2GiB`` form as Fluid itself does.
"""

from __future__ import annotations


def format_bytes(size: float) -> str:
    """A size the way Fluid prints ``ufsTotal``/``cached``: ``0.00B``, ``52.18MiB``, ``2.00GiB``."""
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    value = float(size)
    for unit in units:
        if abs(value) < 1024 or unit == units[-1]:
            return f"{value:.2f}{unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_percentage(part: float, whole: float) -> str:
    """``12.5%`` (one decimal, as Fluid prints ``cachedPercentage``); ``0.0%`` when the whole is 0."""
    if whole <= 0:
        return "0.0%"
    return f"{100.0 * part / whole:.1f}%"

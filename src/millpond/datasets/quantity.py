"""Kubernetes quantities (what Fluid's ``quota`` fields hold) and Fluid's way of printing sizes."""

from __future__ import annotations

import re

_SUFFIXES: dict[str, float] = {
    "": 1,
    "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    # Fluid's own printing ("2GiB") and byte counts written with a B are accepted back.
    "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50,
}
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?\s*([A-Za-z]*)\s*$")


def parse_quantity(value: object) -> int:
    """Bytes in a quantity such as ``150Gi``, ``1.5G``, ``40960`` or ``2GiB``; ValueError names the value."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{value!r} is negative")
        return value
    if isinstance(value, float):
        if value < 0:
            raise ValueError(f"{value!r} is negative")
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a size")
    match = _QUANTITY.match(value)
    if not match or match.group(3) not in _SUFFIXES:
        raise ValueError(
            f"{value!r} is not a size (expected a number with an optional suffix such as Ki, Mi, Gi, M, G)"
        )
    number = float(match.group(1))
    if match.group(2):
        number *= 10 ** int(match.group(2))
    return int(number * _SUFFIXES[match.group(3)])


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

"""kubectl's table layout, for every kind's ``millpond get``: ages as kubectl writes them, columns three
spaces apart. On the floor: every family's handler lays out its own rows (``millpond.kind_handler.Table``).
"""

from __future__ import annotations

import datetime as dt


def human_age(seconds: float) -> str:
    """kubectl's age: ``45s``, ``3m2s``, ``15m``, ``5h10m``, ``2d``, ``3y``: precise when recent, coarse when old."""
    s = int(seconds)
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    if hours < 24 * 365 * 8:
        return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"
    return f"{days // 365}y"


def age_since(moment: dt.datetime, now: dt.datetime) -> str:
    """kubectl's AGE of an object created at ``moment``."""
    return human_age((now - moment).total_seconds())


def format_table(headers: tuple[str, ...], rows: list[list[str]]) -> str:
    """Left-aligned columns three spaces apart, as kubectl prints them."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = [
        "   ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [list(headers), *rows]
    ]
    return "\n".join(lines) + "\n"

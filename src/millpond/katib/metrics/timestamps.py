"""RFC 3339 timestamps as Katib's collectors read and write them (Go's ``time.RFC3339Nano``).

Python's ``datetime`` keeps microseconds; Katib compares nanoseconds, so a parsed time is an
``(epoch seconds, nanoseconds)`` pair, which orders as Go's ``time.Time.After`` does.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})", re.ASCII)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse(text: str) -> tuple[int, int] | None:
    """``(seconds since the epoch, nanoseconds)`` of an RFC 3339 time, None when ``text`` is not one."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:  # month 13, February 30, hour 24...
        return None
    zone = match.group(8)
    offset = 0
    if zone != "Z":
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 23 or minutes > 59:
            return None
        offset = (hours * 3600 + minutes * 60) * (1 if zone[0] == "+" else -1)
    delta = moment - _EPOCH
    seconds = delta.days * 86400 + delta.seconds - offset
    return seconds, int((match.group(7) or "0").ljust(9, "0"))


def from_unix(value: float) -> str | None:
    """A Unix time in seconds as RFC 3339 in UTC with its fraction (Go's ``Format(time.RFC3339Nano)``).

    None for a time no calendar holds (NaN, infinity, past year 9999).
    """
    try:
        seconds = int(value // 1)
        nanos = round((value - seconds) * 1e9)
        if nanos >= 1_000_000_000:
            seconds, nanos = seconds + 1, nanos - 1_000_000_000
        moment = _EPOCH + timedelta(seconds=seconds)
    except (OverflowError, ValueError):
        return None
    fraction = f".{nanos:09d}".rstrip("0") if nanos else ""
    return (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
            f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}{fraction}Z")

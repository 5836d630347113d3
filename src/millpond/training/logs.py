"""Reading an instance's log as ``arena logs`` does: ``--tail``, ``--since``, ``--timestamps``, ``-f``.

The supervisor writes each line as ``TIME LINE`` (see ``paths``); without ``--timestamps`` the
time is cut off again.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator
from pathlib import Path

FOLLOW_POLL_S = 0.3


def _split(raw: str) -> tuple[dt.datetime | None, str]:
    stamp, _, text = raw.partition(" ")
    try:
        return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc), text
    except ValueError:
        return None, raw


def _render(raw: str, timestamps: bool) -> str:
    return raw if timestamps else _split(raw)[1]


def read(log: Path, tail: int | None = None, since: dt.datetime | None = None, timestamps: bool = False) -> list[str]:
    """The log's lines (without their newline), filtered as asked."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []
    if since is not None:
        lines = [line for line in lines if (_split(line)[0] or since) >= since]
    if tail is not None and tail >= 0:
        lines = lines[-tail:] if tail else []
    return [_render(line, timestamps) for line in lines]


def tail_bounded(log: Path, lines: int, max_bytes: int, timestamps: bool = False) -> list[str]:
    """The last ``lines`` lines of the log, reading at most its last ``max_bytes`` bytes (the REST API and
    the UI ask for it again and again while a job runs: a log of gigabytes must cost no more than this).
    A line cut by the byte bound is dropped rather than shown in part."""
    try:
        with open(log, "rb") as source:
            size = source.seek(0, 2)
            start = max(0, size - max_bytes)
            source.seek(start)
            data = source.read(max_bytes)
    except FileNotFoundError:
        return []
    raw = data.decode(errors="replace").splitlines()
    if start > 0 and raw:
        raw = raw[1:]
    kept = raw[-lines:] if lines > 0 else []
    return [_render(line, timestamps) for line in kept]


def follow(log: Path, start: int, finished: Callable[[], bool], timestamps: bool = False) -> Iterator[str]:
    """The lines after the first ``start`` ones, as they are written, until the job ended and nothing is new."""
    offset = 0
    seen = 0
    pending = b""
    done = False
    while True:
        chunk = b""
        try:
            with open(log, "rb") as source:
                source.seek(offset)
                chunk = source.read()
        except FileNotFoundError:
            pass
        offset += len(chunk)
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            seen += 1
            if seen > start:
                yield _render(raw.decode(errors="replace"), timestamps)
        if not chunk:
            if done:
                return
            done = finished()  # one more read after the end: what was written meanwhile
            if not done:
                time.sleep(FOLLOW_POLL_S)

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

"""Retrying a transient storage failure a bounded number of times, within a bounded time.

A data operation copies many files; one 503 or dropped connection should not fail the whole
operation, and a store that keeps failing must fail it soon. So each step (a listing, a file
read or written) is tried at most ``ATTEMPTS`` times, and a retry starts only if it could end
within ``WINDOW_S`` of the first try, judging by how long the last try took: a store that
answers 500 at once is tried three times in about a second, one that times out after 10 s is
tried once. Only failures the store may get over are retried (``UfsError.transient``: a 5xx,
a refused or timed-out connection); a 403 or a missing bucket fails at once. The backends'
own retries of one request are bounded too (``datasets.ufs``), so the worst case is known.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from millpond.datasets.ufs import UfsError

ATTEMPTS = 3
WINDOW_S = 15.0
FIRST_PAUSE_S = 0.25

T = TypeVar("T")


class GaveUp(UfsError):
    """A transient failure that lasted through every attempt; the message says how many and how long."""


def attempt(action: Callable[[], T], attempts: int = ATTEMPTS, window_s: float = WINDOW_S) -> T:
    """``action()``, retried on transient UfsError; the last error (with the attempts made) when all fail."""
    started = time.monotonic()
    pause = FIRST_PAUSE_S
    number = 0
    while True:
        number += 1
        began = time.monotonic()
        try:
            return action()
        except UfsError as exc:
            now = time.monotonic()
            if not exc.transient or number >= attempts or (now - started) + pause + (now - began) > window_s:
                if number == 1:
                    raise
                raise GaveUp(f"{exc} (tried {number} times in {now - started:.1f}s)") from None
        time.sleep(pause)
        pause *= 2

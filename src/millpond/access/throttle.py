"""Login attempts, throttled: five failures in a row for a name, or from an address, lock it a while.

The lock grows with further failures (30 s, doubling, at most 15 min) and ends at the next good
login. Kept in memory: a restart forgets it, which costs an attacker a restart of the server they
cannot make. The answer for a locked name is the same whether the name exists or not.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

FREE_FAILURES = 5
FIRST_LOCK = 30.0
LONGEST_LOCK = 900.0


@dataclass
class _Failures:
    count: int = 0
    locked_until: float = 0.0


class LoginThrottle:
    def __init__(self, clock: object = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._by_key: dict[str, _Failures] = {}

    def _now(self) -> float:
        return float(self._clock())  # type: ignore[operator]

    def wait(self, *keys: str) -> float:
        """Seconds until a login under ``keys`` (a name, an address) may be tried; 0 when it may now."""
        with self._lock:
            now = self._now()
            return max([0.0, *(found.locked_until - now for key in keys if (found := self._by_key.get(key)))])

    def failed(self, *keys: str) -> None:
        with self._lock:
            now = self._now()
            for key in keys:
                found = self._by_key.setdefault(key, _Failures())
                found.count += 1
                if found.count >= FREE_FAILURES:
                    found.locked_until = now + min(FIRST_LOCK * 2 ** (found.count - FREE_FAILURES), LONGEST_LOCK)
            if len(self._by_key) > 100_000:  # bounded: forget the unlocked ones
                self._by_key = {key: found for key, found in self._by_key.items() if found.locked_until > now}

    def succeeded(self, *keys: str) -> None:
        with self._lock:
            for key in keys:
                self._by_key.pop(key, None)

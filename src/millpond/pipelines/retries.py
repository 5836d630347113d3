"""A task's retryPolicy: how many more attempts, and how long to wait before each.

KFP compiles ``set_retry(num_retries, backoff_duration, backoff_factor,
backoff_max_duration)`` to Argo's retryStrategy: the n-th retry waits duration × factor^n,
and no retry starts once backoff_max_duration has passed since the first attempt.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from millpond.pipelines.launcher import TaskOutcome

_DURATION = re.compile(r"^(?P<value>\d+(?:\.\d+)?)(?P<unit>ms|s|m|h)?$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(text: str | int | float | None, default: float) -> float:
    """'1s', '0.5s', '2m', '3600s' (protobuf Duration JSON) → seconds."""
    if text is None or text == "":
        return default
    if isinstance(text, (int, float)):
        return float(text)
    match = _DURATION.match(str(text).strip())
    if not match:
        return default
    return float(match["value"]) * _UNIT_S[match["unit"]]


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 0
    backoff_s: float = 0.0
    factor: float = 2.0
    max_duration_s: float = 3600.0

    @classmethod
    def from_spec(cls, spec: dict[str, Any] | None) -> "RetryPolicy":
        if not spec:
            return cls()
        return cls(
            max_retries=int(spec.get("maxRetryCount", 0) or 0),
            backoff_s=parse_duration(spec.get("backoffDuration"), 0.0),
            factor=float(spec.get("backoffFactor", 2.0) or 2.0),
            max_duration_s=parse_duration(spec.get("backoffMaxDuration"), 3600.0),
        )

    def delay_before(self, retry: int, elapsed_s: float) -> float | None:
        """Seconds to wait before retry number ``retry`` (1-based), or None when no retry is left."""
        if retry > self.max_retries:
            return None
        delay = self.backoff_s * (self.factor ** (retry - 1))
        if elapsed_s + delay > self.max_duration_s:
            return None
        return delay


def with_retries(
    attempt_once: Callable[[], "TaskOutcome"],
    policy: RetryPolicy,
    cancel: threading.Event,
    log_path: Path,
    on_retry: Callable[[int], None],
) -> "TaskOutcome":
    """Run a task until it succeeds, its policy gives up, or the run is cancelled (in a worker thread)."""
    first = time.monotonic()
    attempt = 1
    while True:
        outcome = attempt_once()
        outcome.attempts = attempt
        if outcome.succeeded or cancel.is_set():
            return outcome
        delay = policy.delay_before(attempt, time.monotonic() - first)
        if delay is None:
            return outcome
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"[millpond] attempt {attempt} failed ({outcome.error}); retrying in {delay:g}s\n")
        if cancel.wait(delay):
            return outcome
        attempt += 1
        on_retry(attempt)

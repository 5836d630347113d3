"""A task's retryPolicy: how many more attempts, and how long to wait before each.

KFP compiles ``set_retry(num_retries, backoff_duration, backoff_factor,
backoff_max_duration)`` to Argo's retryStrategy: the n-th retry waits duration × factor^n,
and no retry starts once backoff_max_duration has passed since the first attempt. In the IR
both durations are protobuf Durations in their JSON form (``"90s"``, ``"3.5s"``), read by
:func:`millpond.durations.parse_protobuf_duration`; anything else (``"1m30s"``) is refused.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from millpond.durations import parse_protobuf_duration
from millpond.pipelines.outcomes import TaskOutcome

DURATION_FIELDS = ("backoffDuration", "backoffMaxDuration")


def _seconds(spec: dict[str, Any], field: str, default: float) -> float:
    """A retryPolicy duration in seconds (``default`` when absent); DurationError names the field and value."""
    value = spec.get(field)
    if value is None or value == "":
        return default
    return parse_protobuf_duration(value, f"retryPolicy.{field}").seconds


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 0
    backoff_s: float = 0.0
    factor: float = 2.0
    max_duration_s: float = 3600.0

    @classmethod
    def from_spec(cls, spec: dict[str, Any] | None) -> "RetryPolicy":
        """The IR's retryPolicy; DurationError (a UserError) for a duration that is not protobuf's JSON form."""
        if not spec:
            return cls()
        return cls(
            max_retries=int(spec.get("maxRetryCount", 0) or 0),
            backoff_s=_seconds(spec, "backoffDuration", 0.0),
            factor=float(spec.get("backoffFactor", 2.0) or 2.0),
            max_duration_s=_seconds(spec, "backoffMaxDuration", 3600.0),
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
    attempt_once: Callable[[], TaskOutcome],
    policy: RetryPolicy,
    cancel: threading.Event,
    log_path: Path,
    on_retry: Callable[[int], None],
) -> TaskOutcome:
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

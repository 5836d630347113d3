"""What one task attempt ended with: the record shared by the launcher, the retry loop and the engine.

It lives below all three so that ``retries`` (imported by ``ir`` for its duration fields) need
not import the launcher, which imports ``ir``: the record is the only thing they share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class TaskOutcome:
    """A task's end: success with its output parameters and artifacts, or failure with its error."""

    succeeded: bool
    parameters: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    exit_code: int | None = None
    error: str | None = None
    attempts: int = 1

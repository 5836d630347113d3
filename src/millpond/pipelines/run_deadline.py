"""An Argo workflow's ``activeDeadlineSeconds`` as a clock the engine and its deadline policy share.

The deadline counts from when this engine starts or resumes the run (``WorkflowLimits``). A task
whose own time limit is cut to what is left of it is remembered, so that when it then fails at
the deadline its error says why.
"""

from __future__ import annotations

import time


class RunDeadline:
    """The run's deadline, if any: what is left of it, and which tasks it cut."""

    def __init__(self, deadline_s: int | None = None) -> None:
        self.deadline_s = deadline_s
        self.ends = time.monotonic() + deadline_s if deadline_s else None  # monotonic
        self.cut: set[str] = set()  # paths of the tasks whose time limit is what was left of the run's

    def text(self) -> str:
        return f"the workflow's activeDeadlineSeconds ({self.deadline_s}s) passed"

    def left_s(self) -> float | None:
        """Seconds left (0 or less: passed); None when the run has no deadline."""
        return None if self.ends is None else self.ends - time.monotonic()

    def explain(self, path: str, error: str) -> str:
        """A failed task's error, prefixed with the deadline when the deadline is what stopped it."""
        if path in self.cut and self.ends is not None and time.monotonic() >= self.ends:
            return f"{self.text()}: {error}"
        return error

"""What a task policy answers: go on, done without a process, failed, or submit this work now."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

from millpond.pipelines.graph import Outputs
from millpond.pipelines.outcomes import TaskOutcome
from millpond.scheduling import Grant


@dataclass(frozen=True)
class Proceed:
    """The policy added what it owns to the launch: the next policy goes on."""


@dataclass(frozen=True)
class Done:
    """The task ends here with ``outputs`` and no process of its own.

    ``how`` says what the engine records: ``reused`` (a resumed run's task that already
    succeeded: its row, ``reused_id``, stays as it was), ``ran`` (a built-in task: started and
    succeeded now), ``cached`` (a cache hit: marked cached; its artifacts belong to the task that
    made them, ``cached_from``, which its lineage names as ``cached_execution_id``; not compared: two hits on
    the same outputs are the same verdict).
    """

    outputs: Outputs
    how: Literal["reused", "ran", "cached"]
    reused_id: str | None = None
    cached_from: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Fail:
    """The task fails before its process starts, with ``error`` on its row."""

    error: str


@dataclass(frozen=True)
class Submit:
    """Hand ``work`` to a worker as it stands (no later policy applies): an importer's copy."""

    work: Callable[[Grant], TaskOutcome]


PROCEED = Proceed()

Verdict = Proceed | Done | Fail | Submit

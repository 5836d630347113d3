"""What both run journals write the same way: the final states, a task's start row, a cache entry's age.

The stdlib SQLite journal (``journal``) and the SQLAlchemy store (``runs``) are two writers of
one schema; the rules they share live here, below both, so neither imports the other for them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from millpond.store.keys import utcnow

FINAL_STATES = ("SUCCEEDED", "FAILED", "SKIPPED", "CANCELED")


def task_start_fields(
    name: str, kind: str, component: str, parent_id: str | None, image: str | None,
    inputs: Mapping[str, Any] | None, log_path: str | None, state: str, now: dt.datetime,
) -> dict[str, Any]:
    """The columns a task's start sets (both journals write the same row).

    A PENDING task waits (for the resource budget, a process slot): it has no ``started_at``
    until the engine records it RUNNING, so a duration never counts the wait.
    """
    return {
        "name": name, "kind": kind, "component": component, "parent_id": parent_id, "image": image,
        "inputs": inputs or {}, "log_path": log_path, "state": state,
        "started_at": None if state == "PENDING" else now,
        "finished_at": now if state in FINAL_STATES else None, "error": None,
    }


def fresh_enough(created_at: dt.datetime | None, max_age_s: float | None) -> bool:
    """Whether a cache entry made at ``created_at`` may be reused by a task accepting ``max_age_s``."""
    if max_age_s is None:
        return True
    if created_at is None:
        return False
    if created_at.tzinfo is None:
        created_at = created_at.replace(tzinfo=dt.timezone.utc)
    return (utcnow() - created_at).total_seconds() <= max_age_s

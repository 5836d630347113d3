"""Following the data operations an apply started, with live progress (``apply --wait``).

Each operation's end is one line on stderr: ``KIND NAME: Complete in 3s``, or for a failure
``error: KIND NAME: CAUSE`` (exit 1). A step that failed only because the step its ``runAfter``
names failed is a plain line: the ``error:`` line is the cause's.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from millpond.kind_handler import Applied
    from millpond.store.resources import Resource, ResourceStore

Key = tuple[str, str, str]  # kind, name, namespace

POLL_S = 0.25


def follow(applied: list[Applied]) -> None:
    """Show the bytes, files, rate and ETA of the data operations among ``applied`` (started by their apply)
    until all end (exit 1 if one failed)."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    from millpond.datasets.kinds import GROUP, KINDS
    from millpond.datasets.operations.liveness import observed
    from millpond.store.resources import ResourceStore

    keys = [(one.kind.kind, one.name, one.namespace) for one in applied
            if one.kind.group == GROUP and KINDS[one.kind.kind].category == "operation"]
    if not keys:
        return
    store = ResourceStore()
    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), TextColumn("{task.fields[phase]}"), BarColumn(), DownloadColumn(),
               TransferSpeedColumn(), TextColumn("{task.fields[files]} files"), TimeRemainingColumn())
    failed: list[Key] = []
    with Progress(*columns, console=console, disable=not console.is_terminal) as progress:
        tasks = {
            key: progress.add_task(f"{key[0]} {key[1]}", total=None, phase="Pending", files=0) for key in keys
        }
        pending = set(tasks)
        while pending:
            for key in sorted(pending):
                found = store.get(*key)
                if found is None:  # deleted: its ttlSecondsAfterFinished ran out
                    pending.discard(key)
                    print(f"{key[0]} {key[1]}: finished and deleted (ttlSecondsAfterFinished)", file=sys.stderr)
                    continue
                status = observed(store, found)  # a dead process is seen: Failed, or resumed
                done = status.get("progress") or {}
                progress.update(tasks[key], phase=status.get("phase", "Pending"), completed=done.get("bytes", 0),
                                total=done.get("totalBytes"), files=done.get("files", 0))
                if status.get("phase") in ("Complete", "Failed"):
                    pending.discard(key)
                    line = _end_line(found, status, store, set(tasks))
                    progress.console.print(line, markup=False, highlight=False) if console.is_terminal else print(
                        line, file=sys.stderr
                    )
                    if status["phase"] == "Failed":
                        failed.append(key)
            if pending:
                time.sleep(POLL_S)
    if failed:
        sys.exit(1)


def _end_line(resource: Resource, status: dict[str, Any], store: ResourceStore, batch: set[Key]) -> str:
    """``KIND NAME: Complete in 3s``, or ``error: KIND NAME: CAUSE``.

    Plain, not ``error:``, when the step it runs after is of this batch and failed: that one's line is the error.
    """
    from millpond.datasets.operations.runner import failure_reason

    kind, name = resource.kind, resource.name
    if status["phase"] == "Complete":
        return f"{kind} {name}: Complete in {status.get('duration', '?')}"
    line = f"{kind} {name}: {failure_reason(status, kind, name)}"
    after = resource.spec.get("runAfter") or {}
    key = (str(after.get("kind") or kind), str(after.get("name")), str(after.get("namespace") or resource.namespace))
    before = store.get(*key) if key in batch else None
    return line if before is not None and (before.status or {}).get("phase") == "Failed" else f"error: {line}"

"""Starting applied data operations, and following them with live progress (``apply --wait``)."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from millpond.store.resources import Resource

POLL_S = 0.25


def start_and_follow(resources: list[Resource], wait_for: bool) -> None:
    """Start each operation; with ``wait_for``, show bytes, files, rate and ETA until all end (exit 1 if one failed)."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    from millpond.datasets import operations
    from millpond.datasets.operations.liveness import observed
    from millpond.store.resources import ResourceStore

    for resource in resources:
        operations.start(resource.kind, resource.name, resource.namespace)
    if not wait_for:
        return
    store = ResourceStore()
    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), TextColumn("{task.fields[phase]}"), BarColumn(), DownloadColumn(),
               TransferSpeedColumn(), TextColumn("{task.fields[files]} files"), TimeRemainingColumn())
    failed = []
    with Progress(*columns, console=console, disable=not console.is_terminal) as progress:
        tasks = {
            (r.kind, r.name, r.namespace): progress.add_task(f"{r.kind} {r.name}", total=None, phase="Pending", files=0)
            for r in resources
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
                    message = (status.get("conditions") or [{}])[0].get("message", "")
                    line = f"{key[0]} {key[1]}: {status['phase']} in {status.get('duration', '?')}" + (
                        f": {message}" if status["phase"] == "Failed" else ""
                    )
                    progress.console.print(line) if console.is_terminal else print(line, file=sys.stderr)
                    if status["phase"] == "Failed":
                        failed.append(key)
            time.sleep(POLL_S)
    if failed:
        sys.exit(1)

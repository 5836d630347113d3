"""``millpond runs logs``: print (and follow) the logs of a run's tasks."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from millpond.cli.commands import open_store
from millpond.errors import UserError
from millpond.store.journal import FINAL_STATES

if TYPE_CHECKING:
    from millpond.store.models import Task
    from millpond.store.runs import RunStore

_POLL_S = 0.25


def _select(tasks: list[Task], wanted: str | None) -> list[Task]:
    with_logs = [t for t in tasks if t.log_path]
    if wanted is None:
        return with_logs
    chosen = [t for t in with_logs if wanted in (t.name, t.path, t.id)]
    if not chosen:
        names = ", ".join(sorted({t.path for t in with_logs})) or "none yet"
        raise UserError(f"no task {wanted!r} with a log in this run (tasks: {names})")
    return chosen


def logs_command(run_id: str, task: str | None, follow: bool) -> None:
    store = open_store()
    run = store.get_run(run_id)
    offsets: dict[str, int] = {}
    while True:
        tasks = _select(store.list_tasks(run.id), task) if (task is None or not follow) else _maybe(store, run.id, task)
        several = task is None or len(tasks) > 1
        for item in tasks:
            _print_new(item, offsets, several)
        if not follow or store.get_run(run.id).state in FINAL_STATES:
            if follow:  # print what was written between the last poll and the end
                for item in _select(store.list_tasks(run.id), task) if task is None else tasks:
                    _print_new(item, offsets, several)
            return
        time.sleep(_POLL_S)


def _maybe(store: RunStore, run_id: str, task: str) -> list[Task]:
    """While following, a task that has not started yet is not an error."""
    try:
        return _select(store.list_tasks(run_id), task)
    except UserError:
        return []


def _print_new(task: Task, offsets: dict[str, int], header: bool) -> None:
    path = Path(task.log_path or "")
    if not path.is_file():
        return
    start = offsets.get(task.id)
    with open(path, "rb") as log:
        log.seek(start or 0)
        data = log.read()
    if not data and start is not None:
        return
    offsets[task.id] = (start or 0) + len(data)
    out = sys.stdout
    if header and start is None:
        out.write(f"==> {task.path} <==\n")
    out.write(data.decode("utf-8", errors="replace"))
    out.flush()

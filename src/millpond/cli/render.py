"""How runs, tasks and experiments look on a terminal and as JSON (``-o json``)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from millpond.runners.containers.policy import RAN_IN
from millpond.store.timestamps import iso

if TYPE_CHECKING:  # records from the journal or the ORM: the same attribute names
    from millpond.store.models import Experiment, Run, Task

STATE_STYLE = {
    "SUCCEEDED": "green", "FAILED": "red", "RUNNING": "cyan", "PENDING": "dim",
    "SKIPPED": "yellow", "CANCELED": "magenta",
}


def flat_outputs(outputs: dict[str, Any]) -> dict[str, Any]:
    """Parameters by value, artifacts by URI (a list when an output holds several)."""
    flat: dict[str, Any] = dict(outputs.get("parameters", {}))
    for name, items in outputs.get("artifacts", {}).items():
        uris = [item.get("uri") for item in items]
        flat[name] = uris[0] if len(uris) == 1 else uris
    return flat


def task_json(task: Task) -> dict[str, Any]:
    return {
        "id": task.id,
        "name": task.name,
        "path": task.path,
        "kind": task.kind,
        "state": task.state,
        "cached": task.cached,
        "exit_code": task.exit_code,
        "error": task.error,
        "image": task.image,
        "ran_in": ((task.pod_metadata or {}).get("annotations") or {}).get(RAN_IN),
        "started_at": iso(task.started_at),
        "finished_at": iso(task.finished_at),
        "log": task.log_path,
        "outputs": flat_outputs(task.outputs or {}),
    }


def run_json(run: Run, tasks: list[Task], experiment: str | None = None, brief: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "run_id": run.id,
        "name": run.name,
        "experiment": experiment,
        "pipeline": run.pipeline_name,
        "state": run.state,
        "error": run.error,
        "created_at": iso(run.created_at),
        "started_at": iso(run.started_at),
        "finished_at": iso(run.finished_at),
        "pipeline_root": run.pipeline_root,
    }
    if not brief:
        data["parameters"] = run.parameters
        data["tasks"] = [task_json(t) for t in tasks]
    data["outputs"] = flat_outputs(run.outputs or {})
    return data


def experiment_json(experiment: Experiment) -> dict[str, Any]:
    return {
        "id": experiment.id,
        "name": experiment.name,
        "description": experiment.description,
        "created_at": iso(experiment.created_at),
    }


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


def styled(state: str) -> str:
    style = STATE_STYLE.get(state, "")
    return f"[{style}]{state}[/]" if style else state


def runs_table(rows: list[tuple[Run, str]]) -> Table:
    table = Table(box=None, header_style="bold")
    table.add_column("RUN ID", no_wrap=True)
    for column in ("NAME", "EXPERIMENT", "STATE", "CREATED", "DURATION"):
        table.add_column(column)
    for run, experiment in rows:
        table.add_row(run.id, run.name, experiment, styled(run.state), _when(run.created_at), _duration(run))
    return table


def tasks_table(tasks: list[Task]) -> Table:
    table = Table(box=None, header_style="bold")
    for column in ("TASK", "STATE", "CACHED", "DURATION", "OUTPUTS / ERROR"):
        table.add_column(column, overflow="fold")
    for task in tasks:
        detail = task.error or ", ".join(f"{k}={_short(v)}" for k, v in flat_outputs(task.outputs or {}).items())
        table.add_row(task.path, styled(task.state), "yes" if task.cached else "", _duration(task), detail)
    return table


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _when(moment: Any) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else ""


def _duration(item: Run | Task) -> str:
    if item.started_at and item.finished_at:
        return f"{(item.finished_at - item.started_at).total_seconds():.1f}s"
    return ""


def stderr_console() -> Console:
    return _console(stderr=True)


def stdout_console() -> Console:
    return _console(stderr=False)


def _console(stderr: bool) -> Console:
    """A terminal keeps its width; a pipe or file gets whole lines instead of 80 columns."""
    console = Console(stderr=stderr)
    if not console.is_terminal:
        console = Console(stderr=stderr, width=240)
    return console

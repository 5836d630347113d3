"""What the ``millpond`` commands do, kept apart from their argument declarations."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from millpond.cli.progress import RunProgress, step_status
from millpond.cli.render import (
    experiment_json,
    flat_outputs,
    print_json,
    run_json,
    runs_table,
    stderr_console,
    stdout_console,
    styled,
    tasks_table,
)
from millpond.pipelines.cancellation import record_cancelled
from millpond.runners import stopping
from millpond.settings import load_settings
from millpond.store.journal import RunJournal, open_journal

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from millpond.store.runs import RunStore


def open_store() -> RunStore:
    """The SQLAlchemy store, for reading the history (the run path uses the lighter journal)."""
    from millpond.store.runs import RunStore

    return RunStore(load_settings().database_url)


def run_pipeline_command(
    pipeline: Path,
    params: list[str],
    params_file: Path | None,
    pipeline_name: str | None,
    pipeline_root: str | None,
    experiment: str | None,
    run_name: str | None,
    output: str,
    use_cache: bool = True,
    ignore_resources: bool = False,
    ray_address: str | None = None,
    queue: str = "",
    priority: str = "",
) -> int:
    from millpond.pipelines.arguments import parse_assignments, read_params_file
    from millpond.pipelines.loader import load_pipeline
    from millpond.pipelines.submit import RunRequest, execute_run, prepare_run

    settings = load_settings()
    if ray_address:
        settings = dataclasses.replace(settings, ray_address=ray_address)
    texts = parse_assignments(params)
    values = read_params_file(params_file) if params_file else {}
    loaded = load_pipeline(pipeline, pipeline_name, functools.partial(step_status, stderr_console()))
    request = RunRequest(
        pipeline=loaded, texts=texts, values=values, params_file=str(params_file) if params_file else None,
        pipeline_root=pipeline_root, experiment=experiment, run_name=run_name, queue=queue, priority=priority,
    )
    with stopping.deferred():  # from the run's record on, a stop signal cancels the run (see _stopped)
        store = open_journal(settings.database_url)
        run = prepare_run(store, settings, request)
        console = stderr_console()
        with _stopped(store, run.id, output), RunProgress(console, f"{run.name} ({run.id})") as progress:
            result = execute_run(
                store, settings, run, listener=progress, use_cache=use_cache, ignore_resources=ignore_resources
            )
        return _report(store, store.get_run(run.id), result.state, result.error, output)


def resume_command(run_id: str, output: str, only_finished: bool) -> int:
    from millpond.pipelines.submit import resume_run

    settings = load_settings()
    with stopping.deferred():
        store = open_journal(settings.database_url)
        run = store.get_run(run_id)
        verb = "retried" if only_finished else "resumed"
        title = f"{run.name} ({run.id}), {verb}"
        with _stopped(store, run.id, output), RunProgress(stderr_console(), title) as progress:
            run, result = resume_run(store, settings, run.id, listener=progress, only_finished=only_finished)
        return _report(store, run, result.state, result.error, output)


@contextmanager
def _stopped(store: RunJournal, run_id: str, output: str) -> Iterator[None]:
    """A stop signal cancels the run: the engine records that itself; should the run still look
    in flight here (the engine never began), it is recorded CANCELED now.

    With ``-o json`` the run, as recorded (CANCELED), is printed then: the README promises one
    JSON object on stdout whatever the end. Either way ``Stopped`` goes on up, and ``main`` prints
    why and exits 130. (A signal after the engine ended changes nothing: the run's own end is reported.)
    """
    try:
        yield
    except KeyboardInterrupt as exc:
        run = store.get_run(run_id)
        if run.state in ("PENDING", "RUNNING"):
            record_cancelled(store, run_id, str(exc) or "interrupted")
            run = store.get_run(run_id)
        if output == "json":
            _report(store, run, run.state, run.error, output)
        raise


def _report(store: RunJournal, run: Any, state: str, error: str | None, output: str) -> int:
    """Print a finished run (a table on stderr, or one JSON object on stdout) and give its exit status."""
    console = stderr_console()
    tasks = store.list_tasks(run.id)
    if output == "json":
        data = run_json(run, tasks)
        keys = ("run_id", "name", "state", "error", "pipeline_root", "tasks", "outputs")
        print_json({key: data[key] for key in keys})
    else:
        console.print(f"run {run.id} {styled(state)}" + (f": {error}" if error else ""), soft_wrap=True)
        _print_outputs(console, run, tasks)
    return 0 if state == "SUCCEEDED" else 1


def _print_outputs(console: Console, run: Any, tasks: list[Any]) -> None:
    for task in tasks:
        for name, items in (task.outputs or {}).get("artifacts", {}).items():
            for item in items:
                line = f"  {task.path}.{name} ({item['type']['schemaTitle']}): {item['uri']}"
                if item["type"]["schemaTitle"] == "system.Metrics" and item.get("metadata"):
                    line += "  " + json.dumps(item["metadata"])
                console.print(line, highlight=False, markup=False, soft_wrap=True)
    outputs = flat_outputs(run.outputs or {})
    if outputs:
        console.print("pipeline outputs: " + json.dumps(outputs), highlight=False, markup=False, soft_wrap=True)


def list_runs_command(experiment: str | None, limit: int | None, output: str) -> None:
    store = open_store()
    rows = store.list_runs(experiment=experiment, limit=limit)
    if output == "json":
        print_json([run_json(run, [], exp, brief=True) for run, exp in rows])
    else:
        _stdout_print(runs_table(rows))


def get_run_command(run_id: str, output: str) -> None:
    store = open_store()
    run = store.get_run(run_id)
    tasks = store.list_tasks(run.id)
    experiment = store.experiment_name(run.experiment_id)
    if output == "json":
        print_json(run_json(run, tasks, experiment))
        return
    console = stdout_console()
    console.print(f"[bold]{run.name}[/]  {run.id}")
    console.print(f"state: {styled(run.state)}  experiment: {experiment}  pipeline: {run.pipeline_name}")
    if run.error:
        console.print(f"error: {run.error}", markup=False, highlight=False)
    console.print(f"parameters: {json.dumps(run.parameters)}", markup=False, highlight=False)
    console.print(tasks_table(tasks))
    if run.outputs:
        console.print(f"outputs: {json.dumps(flat_outputs(run.outputs))}", markup=False, highlight=False)


def list_experiments_command(output: str) -> None:
    store = open_store()
    experiments = store.list_experiments()
    if output == "json":
        print_json([experiment_json(e) for e in experiments])
        return
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for column in ("ID", "NAME", "CREATED"):
        table.add_column(column)
    for e in experiments:
        table.add_row(e.id, e.name, e.created_at.strftime("%Y-%m-%d %H:%M:%S"))
    _stdout_print(table)


def _stdout_print(renderable: RenderableType) -> None:
    stdout_console().print(renderable)


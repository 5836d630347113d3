"""Entry point of the ``millpond`` command.

User errors (bad files, parameters, flags) print one ``error:`` line and exit 2; a run
exits 0 when it SUCCEEDED and 1 when it FAILED.
"""

from __future__ import annotations

import signal
import sys
import threading
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import click
import typer

from millpond.cli.config_maps import configmap_app, secret_app
from millpond.errors import UserError

app = typer.Typer(
    name="millpond",
    help="Run Kubeflow Pipelines locally, with a persistent run history.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
runs_app = typer.Typer(help="Inspect runs: list, get, logs.", no_args_is_help=True)
experiments_app = typer.Typer(help="Inspect experiments.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")
app.add_typer(experiments_app, name="experiments")
app.add_typer(secret_app, name="secret")
app.add_typer(configmap_app, name="configmap")


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


OutputOption = Annotated[OutputFormat, typer.Option("--output", "-o", help="table (default) or json.")]


@app.command("run")
def run_command(
    pipeline: Annotated[Path, typer.Argument(help="A .py file with a @dsl.pipeline, or compiled IR .yaml.")],
    param: Annotated[Optional[list[str]], typer.Option("--param", "-p", help="NAME=VALUE, typed by the pipeline (repeatable).")] = None,
    params_file: Annotated[Optional[Path], typer.Option("--params-file", help="A JSON object of parameter values.")] = None,
    pipeline_name: Annotated[Optional[str], typer.Option("--pipeline", help="Which @dsl.pipeline of a .py file to run.")] = None,
    pipeline_root: Annotated[Optional[str], typer.Option("--pipeline-root", help="Where artifacts go: a folder or s3://BUCKET/PREFIX.")] = None,
    experiment: Annotated[Optional[str], typer.Option("--experiment", help="Experiment to file the run under.")] = None,
    run_name: Annotated[Optional[str], typer.Option("--run-name", help="A name for the run.")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Run every task, reusing no cached result.")] = False,
    ignore_resources: Annotated[
        bool, typer.Option("--ignore-resources", help="Run tasks whatever CPU, memory or GPU they request (as kfp.local does).")
    ] = False,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Run a pipeline to its end, showing each task's progress."""
    from millpond.cli.commands import run_pipeline_command

    code = run_pipeline_command(
        pipeline, param or [], params_file, pipeline_name, pipeline_root, experiment, run_name, output.value,
        use_cache=not no_cache, ignore_resources=ignore_resources,
    )
    raise typer.Exit(code)


@runs_app.command("list")
def runs_list(
    experiment: Annotated[Optional[str], typer.Option("--experiment", help="Only runs of this experiment.")] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", help="At most this many, newest first.")] = None,
    output: OutputOption = OutputFormat.table,
) -> None:
    """List runs, newest first."""
    from millpond.cli.commands import list_runs_command

    list_runs_command(experiment, limit, output.value)


@runs_app.command("get")
def runs_get(run_id: str, output: OutputOption = OutputFormat.table) -> None:
    """Show one run: state, parameters, tasks and outputs."""
    from millpond.cli.commands import get_run_command

    get_run_command(run_id, output.value)


@runs_app.command("resume")
def runs_resume(run_id: str, output: OutputOption = OutputFormat.table) -> None:
    """Continue a run whose engine was killed (or that failed) without re-running succeeded tasks."""
    from millpond.cli.commands import resume_command

    raise typer.Exit(resume_command(run_id, output.value, only_finished=False))


@runs_app.command("retry")
def runs_retry(run_id: str, output: OutputOption = OutputFormat.table) -> None:
    """Re-run the failed tasks of a finished run (and what depends on them)."""
    from millpond.cli.commands import resume_command

    raise typer.Exit(resume_command(run_id, output.value, only_finished=True))


@runs_app.command("logs")
def runs_logs(
    run_id: str,
    task: Annotated[Optional[str], typer.Argument(help="A task's name or path; all tasks when left out.")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing until the run ends.")] = False,
) -> None:
    """Print the logs of a run's tasks."""
    from millpond.cli.logs import logs_command

    logs_command(run_id, task, follow)


@experiments_app.command("list")
def experiments_list(output: OutputOption = OutputFormat.table) -> None:
    """List experiments."""
    from millpond.cli.commands import list_experiments_command

    list_experiments_command(output.value)


@app.command("conformance")
def conformance_command(
    folder: Annotated[Path, typer.Argument(help="A folder of compiled KFP pipelines (searched recursively).")],
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds one pipeline may run.")] = 600.0,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Seed for the protocol's random parameter values.")] = None,
) -> None:
    """Run every pipeline of FOLDER under the KFP conformance protocol; exit 1 when any fails."""
    from millpond.cli.conformance import conformance

    raise typer.Exit(conformance(folder, timeout, seed))


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # let a run record itself CANCELED and stop its tasks


def main(argv: list[str] | None = None) -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="millpond", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        sys.exit(130)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()

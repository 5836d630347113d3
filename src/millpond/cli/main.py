"""Entry point of the ``millpond`` command (click: it starts in ~30 ms, a budget the run path needs).

User errors (bad files, parameters, flags) print one ``error:`` line and exit 2; a run
exits 0 when it SUCCEEDED and 1 when it FAILED.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from millpond.cli.failures import exit_on
from millpond.cli.lazy_group import LazyGroup
from millpond.cli.run_actions import COMMANDS as RUN_ACTIONS
from millpond.cli.runtime_option import runtime_option
from millpond.runners import stopping

# The commands defined in their own modules, imported when used (cli/lazy_group.py).
LAZY_COMMANDS = {
    "secret": "millpond.cli.config_maps:secret_group",
    "configmap": "millpond.cli.config_maps:configmap_group",
    "apply": "millpond.cli.resources:apply_command",
    "get": "millpond.cli.resources:get_command",
    "delete": "millpond.cli.resources:delete_command",
    "describe": "millpond.cli.describe:describe_command",
    "dataset": "millpond.cli.datasets:dataset_group",
    "server": "millpond.cli.server:server_command",
    "kubeconfig": "millpond.cli.kubeconfig:kubeconfig_command",
    "ps": "millpond.cli.processes:ps_command",
    "images": "millpond.cli.images:images_group",
    "user": "millpond.cli.users:user_group",
    "config": "millpond.cli.config:config_group",
    "train": "millpond.cli.arena:arena_group",  # Arena's commands, as `millpond train`
    "queue": "millpond.cli.queues:queue_group",
    "profile": "millpond.cli.profiles:profile_group",
    "serve": "millpond.cli.serve:serve_command",
}

OUTPUT = click.option(
    "--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True, help="table or json."
)


@click.group(name="millpond", cls=LazyGroup, lazy_subcommands=LAZY_COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"]})
def app() -> None:
    """Run Kubeflow Pipelines locally, with a persistent run history."""


@app.command("run")
@click.argument("pipeline", type=click.Path(path_type=Path))
@click.option(
    "--param",
    "-p",
    "params",
    multiple=True,
    metavar="NAME=VALUE",
    help="A parameter, typed by the pipeline (repeatable).",
)
@click.option("--params-file", type=click.Path(path_type=Path), help="A JSON object of parameter values.")
@click.option("--pipeline", "pipeline_name", help="Which @dsl.pipeline of a .py file to run.")
@click.option("--pipeline-root", help="Where artifacts go: a folder or s3://BUCKET/PREFIX.")
@click.option("--experiment", help="Experiment to file the run under.")
@click.option("--run-name", help="A name for the run.")
@click.option("--no-cache", is_flag=True, help="Run every task, reusing no cached result.")
@click.option(
    "--ignore-resources", is_flag=True, help="Run tasks whatever CPU, memory or GPU they request (as kfp.local does)."
)
@click.option(
    "--ray", "ray_address", metavar="HOST:PORT",
    help="Run the tasks on this Ray cluster (default: $MILLPOND_RAY_ADDRESS); the root must be s3:// or shared.",
)
@click.option("--queue", default="", metavar="NAME",
              help="Kueue's LocalQueue for every task (a task's kueue.x-k8s.io/queue-name label wins).")
@click.option("--priority", default="", metavar="NAME", help="A WorkloadPriorityClass for the queued tasks.")
@OUTPUT
@runtime_option
def run_command(
    pipeline: Path, params: tuple[str, ...], params_file: Path | None, pipeline_name: str | None,
    pipeline_root: str | None, experiment: str | None, run_name: str | None, no_cache: bool,
    ignore_resources: bool, ray_address: str | None, queue: str, priority: str, output: str,
) -> int:
    """Run PIPELINE (a .py file with a @dsl.pipeline, or compiled IR .yaml) to its end."""
    from millpond.cli.commands import run_pipeline_command

    return run_pipeline_command(
        pipeline, list(params), params_file, pipeline_name, pipeline_root, experiment, run_name, output,
        use_cache=not no_cache, ignore_resources=ignore_resources, ray_address=ray_address, queue=queue,
        priority=priority,
    )


@app.group("runs")
def runs_group() -> None:
    """Inspect, continue and act on runs: list, get, logs, resume, retry, terminate, archive, unarchive, delete."""


@runs_group.command("list")
@click.option("--experiment", help="Only runs of this experiment.")
@click.option("--limit", type=int, help="At most this many, newest first.")
@OUTPUT
def runs_list(experiment: str | None, limit: int | None, output: str) -> None:
    """List runs, newest first."""
    from millpond.cli.commands import list_runs_command

    list_runs_command(experiment, limit, output)


@runs_group.command("get")
@click.argument("run_id")
@OUTPUT
def runs_get(run_id: str, output: str) -> None:
    """Show one run: state, parameters, tasks and outputs (a unique id prefix is enough)."""
    from millpond.cli.commands import get_run_command

    get_run_command(run_id, output)


@runs_group.command("logs")
@click.argument("run_id")
@click.argument("task", required=False)
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the run ends.")
def runs_logs(run_id: str, task: str | None, follow: bool) -> None:
    """Print the logs of a run's tasks (TASK: a task's name or path; all when left out)."""
    from millpond.cli.logs import logs_command

    logs_command(run_id, task, follow)


@runs_group.command("resume")
@click.argument("run_id")
@OUTPUT
def runs_resume(run_id: str, output: str) -> int:
    """Continue a run whose engine was killed (or that failed) without re-running succeeded tasks."""
    from millpond.cli.commands import resume_command

    return resume_command(run_id, output, only_finished=False)


@runs_group.command("retry")
@click.argument("run_id")
@OUTPUT
def runs_retry(run_id: str, output: str) -> int:
    """Re-run the failed tasks of a finished run (and what depends on them)."""
    from millpond.cli.commands import resume_command

    return resume_command(run_id, output, only_finished=True)


@app.group("experiments")
def experiments_group() -> None:
    """Inspect experiments."""


@experiments_group.command("list")
@OUTPUT
def experiments_list(output: str) -> None:
    """List experiments."""
    from millpond.cli.commands import list_experiments_command

    list_experiments_command(output)


@app.command("conformance")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds one pipeline may run.")
@click.option("--seed", type=int, help="Seed for the protocol's random parameter values.")
@click.option(
    "--twice", is_flag=True,
    help="Run each case a second time on the same home: it must end the same way, with cache hits where caching is on.",
)
@click.option("--manifests", is_flag=True,
              help="FOLDER is a manifest corpus (each file through `millpond apply -f`); any other folder is an error.")
@click.option("--allowlist", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="Manifest rows known to fail until a later issue (corpus/file, issue, why); they must fail cleanly.")
@click.option("--expected", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="The EXPECTED.tsv of a manifest corpus that ships none.")
@click.option("--before", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="A manifest applied in each row's fresh home first (the Secrets the corpus' files name).")
@click.option("--jobs", type=click.IntRange(1, 32), default=2, show_default=True,
              help="Manifest rows applied at once, each in its own home.")
def conformance_command(folder: Path, timeout: float, seed: int | None, twice: bool, manifests: bool,
                        allowlist: Path | None, expected: Path | None, before: Path | None, jobs: int) -> int:
    """Run every pipeline of FOLDER under the KFP conformance protocol, or every row of a manifest corpus
    under its README's (`millpond apply -f FILE`); exit 1 when any fails."""
    from millpond.cli.conformance import ManifestOptions, conformance

    options = ManifestOptions(manifests, allowlist, expected, before, jobs)
    return conformance(folder, timeout, seed, twice, options)


for _command in RUN_ACTIONS:
    runs_group.add_command(_command)


def main(argv: list[str] | None = None) -> None:
    """Run one command; SIGINT, SIGTERM and SIGHUP stop it, and a run it drives ends CANCELED (exit 130)."""
    with stopping.handled():
        try:
            code = app.main(args=argv, prog_name="millpond", standalone_mode=False)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.Abort as exc:  # click's word for a KeyboardInterrupt (a stop signal included)
            if isinstance(exc.__cause__, stopping.Stopped):
                print(str(exc.__cause__), file=sys.stderr)
            sys.exit(130)
        except Exception as exc:  # a MillpondError or a failed database: one line; anything else propagates
            exit_on(exc)
        except KeyboardInterrupt as exc:
            print(str(exc) if isinstance(exc, stopping.Stopped) else "interrupted", file=sys.stderr)
            sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()

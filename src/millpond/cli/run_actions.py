"""``millpond runs terminate|archive|unarchive|delete RUN_ID``: acting on a recorded run, as ``kfp run`` does.

A unique prefix of the id is enough, as for ``runs get``. ``-o json`` prints one JSON object.
An unknown id, or a run in the wrong state (terminating a finished run, archiving an archived
one) is one ``error:`` line and exit status 2. ``delete`` asks no confirmation (as
``kfp run delete`` and ``kubectl delete``); a run still in flight is terminated first.

Only click is imported here; the store loads when a command runs, so ``millpond run`` does not
pay for it.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from millpond.store.models import Run
    from millpond.store.runs import RunStore

_OUTPUT = click.option(
    "--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True, help="table or json."
)
_TIMEOUT = click.option(
    "--timeout", type=float, default=30.0, show_default=True, help="Seconds to wait for the engine to stop the run."
)


def _store() -> RunStore:
    from millpond.settings import load_settings
    from millpond.store.runs import RunStore

    return RunStore(load_settings().database_url)


def _run_summary(run: Run) -> dict[str, Any]:
    return {"run_id": run.id, "name": run.name, "state": run.state, "storage_state": run.storage_state or "AVAILABLE",
            "error": run.error}


def _print(output: str, data: dict[str, Any], line: str) -> None:
    if output == "json":
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    else:
        click.echo(line)


@click.command("terminate")
@click.argument("run_id")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait until the run has recorded its end.")
@_TIMEOUT
@_OUTPUT
def terminate_command(run_id: str, wait: bool, timeout: float, output: str) -> int:
    """Stop a PENDING or RUNNING run and its tasks (it ends CANCELED), whoever runs its engine."""
    from millpond.pipelines.run_actions import terminate_run, wait_until_stopped
    from millpond.store.journal import FINAL_STATES

    store = _store()
    run = terminate_run(store, run_id)
    if not wait:
        _print(output, _run_summary(store.get_run(run.id)), f"run {run.id} asked to stop")
        return 0
    run = wait_until_stopped(store, run.id, timeout)
    stopped = run.state in FINAL_STATES
    if stopped or output == "json":
        _print(output, _run_summary(run), f"run {run.id} terminated: {run.state}")
    if not stopped:
        click.echo(f"error: run {run.id} is still {run.state} {timeout:g}s after it was asked to stop", err=True)
        return 1
    return 0


@click.command("archive")
@click.argument("run_id")
@_OUTPUT
def archive_command(run_id: str, output: str) -> None:
    """Archive a run: hidden from the default lists, its records and outputs kept (a run in flight keeps running)."""
    from millpond.pipelines.run_actions import set_archived

    run = set_archived(_store(), run_id, archived=True)
    _print(output, _run_summary(run), f"run {run.id} archived")


@click.command("unarchive")
@click.argument("run_id")
@_OUTPUT
def unarchive_command(run_id: str, output: str) -> None:
    """Restore an archived run to the default lists."""
    from millpond.pipelines.run_actions import set_archived

    run = set_archived(_store(), run_id, archived=False)
    _print(output, _run_summary(run), f"run {run.id} unarchived")


@click.command("delete")
@click.argument("run_id")
@_TIMEOUT
@_OUTPUT
def delete_command(run_id: str, timeout: float, output: str) -> int:
    """Delete a run (no confirmation, as kfp's): its records, its logs and its artifacts under the default root.

    A run in flight is terminated first. Artifacts under a pipeline root you chose (--pipeline-root,
    a folder or s3://...) are left in place.
    """
    from millpond.pipelines.run_actions import RunStillRunning, delete_run
    from millpond.settings import load_settings

    try:
        deleted = delete_run(_store(), load_settings(), run_id, timeout)
    except RunStillRunning as exc:
        click.echo(f"error: {exc}", err=True)
        return 1
    lines = [f"run {deleted.run_id} deleted"] + [f"  removed {path}" for path in deleted.removed]
    lines += [f"  kept {what}" for what in deleted.kept]
    _print(output, {"run_id": deleted.run_id, "deleted": True, "removed": deleted.removed, "kept": deleted.kept},
           "\n".join(lines))
    return 0


COMMANDS = (terminate_command, archive_command, unarchive_command, delete_command)

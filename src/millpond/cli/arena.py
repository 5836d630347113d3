"""The ``arena`` command (also ``millpond train``): Arena's training-job CLI on one machine.

``submit`` (see ``arena_submit``), ``list``, ``get``, ``logs``, ``delete``, ``prune``, ``top``
(see ``arena_top``), with Arena's flags, columns and ``-o json`` shapes, so a script written
for Arena (``arena get NAME -o json | jq .status``) runs as it is. Bad input is one ``error:`` line and exit 2.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from typing import Any

import click

from millpond.cli.arena_serve import serve_group
from millpond.cli.arena_submit import submit_group
from millpond.cli.arena_top import top_group
from millpond.cli.failures import exit_on
from millpond.cli.namespace_option import NAMESPACE as NAMESPACE_TYPE
from millpond.errors import UserError

NAMESPACE = click.option("-n", "--namespace", type=NAMESPACE_TYPE, default="default", show_default=True)
TYPE = click.option("-T", "--type", "trainer", default="",
                    help="Only a job of this trainer (pytorchjob, mpijob, tfjob).")
PRUNE_SINCE = "48h"  # Arena's prune default


@click.group("arena", context_settings={"help_option_names": ["-h", "--help"]})
def arena_group() -> None:
    """Training jobs, as Arena runs them: submit, list, get, logs, delete, prune, top; serve models (serve)."""


arena_group.add_command(submit_group)
arena_group.add_command(top_group)
arena_group.add_command(serve_group)


def _dump(data: Any, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    else:
        import yaml

        click.echo(yaml.safe_dump(data, sort_keys=False).rstrip())


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


@arena_group.command("list")
@NAMESPACE
@click.option("-A", "--allNamespaces", "all_namespaces", is_flag=True, help="Jobs of every namespace.")
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml", "wide"]), default="table")
@TYPE
def list_command(namespace: str, all_namespaces: bool, output: str, trainer: str) -> None:
    """List training jobs: NAME STATUS TRAINER DURATION GPU(Requested) GPU(Allocated) NODE."""
    from millpond.store.training import JobStore
    from millpond.training import jobs, views

    store = JobStore()
    found = [j for j in jobs.list_jobs(None if all_namespaces else namespace, store) if trainer in ("", j.trainer)]
    if output in ("json", "yaml"):
        from millpond.scheduling import gpu_metrics

        metrics = gpu_metrics.read()
        _dump([views.job_info(job, store.instances(job.uid), metrics) for job in found], output)
        return
    header = ["NAME", "STATUS", "TRAINER", "DURATION", "GPU(Requested)", "GPU(Allocated)", "NODE"]
    if output == "wide":
        header += ["PRIORITY", "MESSAGE"]
    if all_namespaces:
        header = ["NAMESPACE", *header]
    rows = [header]
    for job in found:
        row = [job.name, job.status, job.trainer.upper(), views.short_duration(views.duration_s(job)),
               str(views.requested_gpus(job)), str(views.allocated_gpus(job)),
               views.node_name() if job.started_at else "N/A"]
        if output == "wide":
            row += [job.spec.get("priority") or "N/A", job.message or ""]
        rows.append([job.namespace, *row] if all_namespaces else row)
    _table(rows)


@arena_group.command("get")
@click.argument("name")
@NAMESPACE
@TYPE
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml", "wide"]), default="table")
@click.option("-e", "--events", is_flag=True, help="Also the job's events.")
def get_command(name: str, namespace: str, trainer: str, output: str, events: bool) -> None:
    """Show one job: status, reason, instances (and events with -e)."""
    from millpond.store.training import JobStore
    from millpond.training import jobs, views

    store = JobStore()
    job = jobs.get(name, namespace, store)
    if trainer and trainer != job.trainer:
        raise UserError(f"the job {name} is a {job.trainer}, not a {trainer}")
    instances = store.instances(job.uid)
    if output in ("json", "yaml"):
        from millpond.scheduling import gpu_metrics

        info = views.job_info(job, instances, gpu_metrics.read())
        if events:
            info["events"] = [views.event_info(e) for e in store.events(job.uid)]
        _dump(info, output)
        return
    info = views.job_info(job, instances)
    created = job.created_at.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    ended = job.finished_at.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S") if job.finished_at else ""
    queueing = [("Queue", info["queue"])] if "queue" in info else []
    queueing += [("User", info["user"])] if "user" in info else []
    for label, value in (("Name", job.name), ("Status", job.status), ("Namespace", job.namespace),
                         ("Priority", info["priority"]), *queueing, ("Trainer", job.trainer.upper()),
                         ("Duration", info["duration"]), ("CreateTime", created), ("EndTime", ended),
                         ("Reason", job.reason or ""), ("Message", job.message or "")):
        click.echo(f"{label + ':':<12}{value}")
    for role, (gib, cores) in views.role_shares(job).items():
        of_cores = f", {cores}% of its cores" if cores else ""
        click.echo(f"{'GPUShare:':<12}{role}: {gib} GiB of one GPU's memory{of_cores}")
    click.echo("\nInstances:")
    rows = [["NAME", "STATUS", "AGE", "IS_CHIEF", "GPU(Requested)", "NODE"]]
    if output == "wide":
        rows[0] += ["EXIT_CODE", "PID"]
    for item, raw in zip(info["instances"], instances, strict=True):
        requested = (views.share_words(item["requestGPUMemory"], item["requestGPUCore"])
                     if "requestGPUMemory" in item else str(item["requestGPUs"]))
        row = [item["name"], item["status"], item["age"], str(item["chief"]).lower(), requested, item["node"]]
        if output == "wide":
            row += ["" if raw.exit_code is None else str(raw.exit_code), str(raw.pid or "")]
        rows.append(row)
    _table([["  " + row[0], *row[1:]] for row in rows])
    if events:
        click.echo("\nEvents:")
        found = store.events(job.uid)
        event_rows = [["TYPE", "REASON", "AGE", "MESSAGE"]]
        event_rows += [[e["type"], e["reason"], e["age"], e["message"]] for e in map(views.event_info, found)]
        _table([["  " + row[0], *row[1:]] for row in event_rows])


@arena_group.command("logs")
@click.argument("name")
@NAMESPACE
@TYPE
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the job ends.")
@click.option("-t", "--tail", type=int, default=-1, help="Only the last N lines.")
@click.option("--since", default="", help="Only lines newer than this Go duration (5s, 2m, 3h).")
@click.option("--timestamps", is_flag=True, help="Prefix each line with the time it was printed.")
@click.option("-i", "--instance", default="", help="The instance (default: the chief).")
def logs_command(name: str, namespace: str, trainer: str, follow: bool, tail: int, since: str, timestamps: bool,
                 instance: str) -> None:
    """Print an instance's log (the master's unless -i)."""
    from millpond.durations import parse_go_duration
    from millpond.errors import NotFoundError
    from millpond.store.keys import utcnow
    from millpond.store.training import JobStore
    from millpond.training import jobs, logs
    from millpond.training.paths import instance_log

    store = JobStore()
    job = jobs.get(name, namespace, store)
    names = [i.name for i in store.instances(job.uid)]
    chosen = instance or next((n for n in names if n.endswith(("-master-0", "-chief-0", "-launcher-0"))), "")
    chosen = chosen or (names[0] if names else "")
    if instance and instance not in names:
        raise NotFoundError(f"the job {name} has no instance {instance} (its instances: {', '.join(names) or 'none'})")
    if not chosen:
        return  # nothing started yet
    cutoff = utcnow() - dt.timedelta(seconds=parse_go_duration(since, "--since").seconds) if since else None
    log = instance_log(job.uid, chosen)
    shown = logs.read(log, tail if tail >= 0 else None, cutoff, timestamps)
    for line in shown:
        click.echo(line)
    if follow:
        total = len(logs.read(log))

        def ended() -> bool:
            current = store.by_uid(job.uid)
            return current is None or jobs.observed(store, current).finished

        for line in logs.follow(log, total, ended, timestamps):
            click.echo(line)


@arena_group.command("delete")
@click.argument("names", nargs=-1, required=True)
@NAMESPACE
@TYPE
def delete_command(names: tuple[str, ...], namespace: str, trainer: str) -> None:
    """Delete jobs, stopping the processes of one still running."""
    from millpond.training import jobs

    for name in names:
        jobs.delete(name, namespace)
        click.echo(f"INFO: The training job {name} has been deleted successfully", err=True)


@arena_group.command("prune")
@NAMESPACE
@click.option("-A", "--allNamespaces", "all_namespaces", is_flag=True)
@click.option("-s", "--since", default=PRUNE_SINCE, show_default=True, help="Finished more than this long ago.")
def prune_command(namespace: str, all_namespaces: bool, since: str) -> None:
    """Delete the finished jobs that ended more than --since ago."""
    from millpond.durations import parse_go_duration
    from millpond.training import jobs

    for name in jobs.prune(parse_go_duration(since, "--since").seconds, None if all_namespaces else namespace):
        click.echo(f"INFO: The training job {name} has been deleted successfully", err=True)


def main(argv: list[str] | None = None) -> None:
    """The ``arena`` console script: every bad input one ``error:`` line, exit 2."""
    try:
        arena_group.main(args=argv, prog_name="arena", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        print(f"error: {exc.format_message()}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except click.Abort:
        sys.exit(130)
    except Exception as exc:  # a MillpondError or a failed database: one line; anything else propagates
        exit_on(exc)
    sys.exit(0)


if __name__ == "__main__":
    main()

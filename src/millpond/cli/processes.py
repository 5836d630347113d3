"""``millpond ps``: every background process this home keeps, and the end of those nobody uses.

Listed: FUSE mount daemons (a shared one with who uses it), data operations' runners, Cron
schedules waiting for their next run, training jobs' supervisors (with the job's status), the
API server, the engines of runs in flight, and the running containers of the home's objects (their
owner, image and main pid) — each with what it holds in the machine-wide
ledger (GPUs, CPUs, memory), and any other holder. Every one is told alive or gone by its
``runners.processes.ProcessIdentity`` (pid + start time), wherever it is recorded.
Before listing, it reconciles: a shared dataset mount whose users have all gone (killed
ones included) is unmounted, and a runner whose operation was deleted is ended. Each one
ended is said on stderr, so nothing ends unseen.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from millpond.runners.background import BackgroundProcess

HEADERS = ("KIND", "OBJECT", "PID", "STARTED", "STATE")
IN_FLIGHT = ("PENDING", "RUNNING", "CANCELING")


@dataclass(frozen=True)
class Row:
    kind: str
    object: str
    pid: int
    started: str
    state: str


def reconcile() -> list[str]:
    """End what nobody uses (shared mounts without a live user, runners of deleted operations); one line each."""
    from millpond.datasets.operations.processes import ProcessesReconciler, ProcessTransition
    from millpond.datasets.shared_mounts import reconcile as end_unused_mounts
    from millpond.runners.reconcile import reconcile as reconcile_pass

    said = {
        ProcessTransition.END_ORPHAN: "ended: runner of {subject} ({detail}): its object was deleted",
        ProcessTransition.END_LEFTOVERS: "ended: what was left of the runner of {subject} ({detail}, dead)",
    }
    lines = [said[done.transition].format(subject=done.subject, detail=done.detail)
             for done in reconcile_pass(ProcessesReconciler()) if done.transition in said]
    from millpond.training.jobs import reconcile_all as end_abandoned_jobs

    lines += [f"failed: training job {j.namespace}/{j.name}: {j.message}" for j in end_abandoned_jobs()]
    lines += [f"ended: mount of dataset {r.namespace}/{r.dataset} at {r.folder} (pid {r.pid}): no live user"
              for r in end_unused_mounts()]
    from millpond.datasets.mounts import clear_all_dead

    lines += [f"ended: mount of dataset {d.record.namespace}/{d.record.dataset} at {d.record.folder}: {d.words}"
              for d in clear_all_dead()]
    return lines


def container_rows() -> list[Row]:
    """The running containers this home's objects started (labelled with the home), when a runtime works."""
    from millpond.runners.containers import runtimes, sweep
    from millpond.runners.containers.command import HOME_LABEL
    from millpond.settings import load_settings

    runtime = runtimes.find()
    if isinstance(runtime, str):
        return []
    home = load_settings().home
    return [Row("container", f"{c.owner or c.name} in {c.image}", c.pid, c.started,
                f"running ({runtime.name} {c.name})") for c in sweep.running_with(runtime, f"{HOME_LABEL}={home}")]


def mount_rows() -> list[Row]:
    from millpond.datasets.mounts import daemon_runs, is_mounted, records
    from millpond.datasets.shared_mounts import users

    rows = []
    for record in records():
        if not daemon_runs(record):
            continue  # a record left by a mount that ended outside millpond: no process to list
        if not is_mounted(record.folder):
            state = "unmounted, ending (a leftover of a killed user still had it open)"
        elif record.shared:
            holders = users(record)
            who = "; ".join(f"{h.user} (pid {h.pid})" for h in holders)
            state = f"shared, used by {who}" if holders else "shared, unused (busy: a file is open in it)"
        else:
            state = f"mounted by dataset mount (millpond dataset unmount {record.folder})"
        rows.append(Row("mount", f"Dataset {record.namespace}/{record.dataset} at {record.folder}", record.pid,
                        record.started or "?", state))
    return rows


def other_rows() -> list[Row]:
    from millpond.datasets.operations.processes import KIND, runners
    from millpond.runners.background import running

    rows = [Row(view.kind, view.process.object, view.process.pid, view.process.started, view.state)
            for view in runners()]
    rows += [Row(p.kind, p.object, p.pid, p.started, _state(p)) for p in running() if p.kind != KIND]
    return rows


def _state(process: "BackgroundProcess") -> str:
    if process.kind == "server":
        return "serving"
    if process.kind == "inference-service":
        return _serving_state(process)
    if process.kind != "training-job":
        return "running"
    from millpond.store.training import JobStore

    namespace, _, name = process.object.partition("/")
    job = JobStore().get(name, namespace)
    if job is None or process.uid and job.uid != process.uid:
        return "its job was deleted"
    return job.status + (f": {job.message}" if job.status == "QUEUING" and job.message else "")


def _serving_state(process: "BackgroundProcess") -> str:
    """An InferenceService supervisor's row: Ready (or why not) and its replicas that answer."""
    from millpond.serving import endpoints, lifecycle
    from millpond.store.resources import ResourceStore

    namespace, _, name = process.object.partition("/")
    resource = ResourceStore().get("InferenceService", name, namespace)
    if resource is None or process.uid and resource.uid != process.uid:
        return "its InferenceService was deleted"
    conditions = lifecycle.observed_status(resource).get("conditions") or []
    ready: dict[str, Any] = next((c for c in conditions if c.get("type") == "Ready"), {})
    found = endpoints.read(namespace, name)
    answering = sum(len(revision.replicas) for revision in found.revisions) if found else 0
    state = f"Ready {ready.get('status', 'Unknown')}" + (f" ({ready['reason']})" if ready.get("reason") else "")
    return f"{state}, {answering} replica{'' if answering == 1 else 's'} answering"


def engine_rows() -> list[Row]:
    """The engines of runs in flight (a ``millpond run`` in a terminal, or a server's worker)."""
    from millpond.runners.processes import is_running
    from millpond.settings import load_settings
    from millpond.store.runs import RunStore

    rows = []
    for claim in RunStore(load_settings().database_url).engine_claims(IN_FLIGHT):
        if claim.engine_pid and is_running(claim.engine_pid, claim.engine_start):
            rows.append(Row("engine", f"run {claim.run_id}", claim.engine_pid, _iso(claim.created_at), "running"))
    return rows


def with_grants(rows: list[Row]) -> list[Row]:
    """``rows``, each saying what its process holds in the ledger, and a row for any other holder."""
    from millpond.scheduling import Ledger

    held: dict[int, list[str]] = {}
    others = []
    listed = {row.pid for row in rows}
    for grant in Ledger().grants():
        held.setdefault(grant.holder.pid, []).append(grant.summary)
        if grant.holder.pid not in listed:
            others.append(Row(grant.holder.kind, grant.holder.name, grant.holder.pid, grant.granted_at[:19] + "Z", ""))
    rows = [*rows, *{row.pid: row for row in others}.values()]
    return [
        Row(r.kind, r.object, r.pid, r.started, ", ".join(filter(None, [r.state, "holds " + "; ".join(held[r.pid])])))
        if r.pid in held else r
        for r in rows
    ]


def _iso(moment: dt.datetime) -> str:
    aware = moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)
    return aware.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@click.command("ps")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="A table, or a JSON list.")
def ps_command(output: str) -> None:
    """List the background processes this MILLPOND_HOME keeps, after ending those nobody uses."""
    from millpond.cli.resource_tables import format_table

    for line in reconcile():
        click.echo(line, err=True)
    rows = sorted(with_grants(mount_rows() + other_rows() + engine_rows()), key=lambda row: (row.started, row.pid))
    rows += container_rows()
    if output == "json":
        click.echo(json.dumps([asdict(row) for row in rows], indent=2))
        return
    click.echo(format_table(HEADERS, [[r.kind, r.object, str(r.pid), r.started, r.state] for r in rows]), nl=False)

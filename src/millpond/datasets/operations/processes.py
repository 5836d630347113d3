"""The runner processes of data operations: recorded as they start, listed by ``millpond ps``, ended when orphaned.

Each runner (``python -m millpond.datasets.operations``) records itself in the home's
background processes (``runners.background``) with its object's uid. A ``policy: Cron``
operation's runner lives on between its runs, waiting for the next time: ``millpond ps``
shows it as ``cron``. A runner whose object is gone — deleted, or deleted and applied again
(another uid) — serves nobody; ``end_orphans`` ends its process group (the runner leads its
own session, so its DataProcess scripts go with it). A runner that died (``kill -9``) may
leave its group behind — a script's background job still in its sandbox, holding the
dataset's mount: ``end_leftovers`` ends what is left and drops the record.
"""

from __future__ import annotations

from dataclasses import dataclass

from millpond.runners.background import BackgroundProcess, end_leftover_group, forget, records, register, running
from millpond.settings import load_settings
from millpond.store.resources import Resource, ResourceStore, read_manifest

KIND = "operation"


@dataclass(frozen=True)
class RunnerView:
    """One live runner as ``millpond ps`` shows it."""

    process: BackgroundProcess
    kind: str  # operation | cron
    state: str
    orphaned: bool


def register_runner(kind: str, name: str, namespace: str) -> None:
    """Record this process as the runner of operation ``kind`` ``namespace``/``name`` (what ``start`` spawns)."""
    found = read_manifest(load_settings(), kind, name, namespace)
    register(KIND, f"{kind} {namespace}/{name}", uid=found[0] if found else "")


def runner_of(kind: str, name: str, namespace: str = "default") -> BackgroundProcess | None:
    """The live runner of one operation, or None (not started yet, or ended)."""
    served = f"{kind} {namespace}/{name}"
    return next((process for process in running() if process.kind == KIND and process.object == served), None)


def _key(process: BackgroundProcess) -> tuple[str, str, str]:
    kind, _, full = process.object.partition(" ")
    namespace, _, name = full.partition("/")
    return kind, name, namespace


def runners(store: ResourceStore | None = None) -> list[RunnerView]:
    """The data operations' runner processes alive now, oldest first."""
    store = store or ResourceStore()
    views = []
    for process in running():
        if process.kind != KIND:
            continue
        resource = store.get(*_key(process))
        orphaned = resource is None or bool(process.uid) and resource.uid != process.uid
        cron = resource is not None and resource.spec.get("policy") == "Cron"
        views.append(RunnerView(process, "cron" if cron else KIND, _state(resource, orphaned), orphaned))
    return views


def _state(resource: Resource | None, orphaned: bool) -> str:
    if orphaned or resource is None:
        return "orphaned: its object was deleted"
    status = resource.status or {}
    phase = str(status.get("phase") or "Pending")
    if resource.spec.get("policy") == "Cron" and phase != "Executing":
        return f"waiting, next run {status.get('nextScheduleTime', '?')} (last: {phase})"
    if status.get("waitingFor"):
        return f"{phase}, after {status['waitingFor']}"
    return phase


def end_orphans(store: ResourceStore | None = None) -> list[RunnerView]:
    """End every runner whose operation no longer exists; the ones ended."""
    return [view for view in runners(store)
            if view.orphaned and view.process.identity.kill_group()]


def end_leftovers() -> list[BackgroundProcess]:
    """Drop the records of runners that died, ending what is left of their process groups; those with leftovers."""
    ended = []
    for record in records():
        if record.kind != KIND or record.running:
            continue
        if end_leftover_group(record):
            ended.append(record)
        forget(record)
    return ended

"""The runner processes of data operations: recorded as they start, listed by ``millpond ps``, ended when orphaned.

Each runner (``python -m millpond.datasets.operations``) records itself in the home's
background processes (``runners.background``) with its object's uid. A ``policy: Cron``
operation's runner lives on between its runs, waiting for the next time: ``millpond ps``
shows it as ``cron``. A runner whose object is gone — deleted, or deleted and applied again
(another uid) — serves nobody; the reconciler ends its process group (the runner leads its
own session, so its DataProcess scripts go with it). A runner that died (``kill -9``) may
leave its group behind — a script's background job still in its sandbox, holding the
dataset's mount: it ends what is left and drops the record. ``ProcessesReconciler`` does both,
and drops the record of every other background process that ended (``millpond ps``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from millpond.runners.background import BackgroundProcess, end_leftover_group, forget, records, register, running
from millpond.runners.reconcile import Applied, applied
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
    return [_view(process, store) for process in running() if process.kind == KIND]


def _view(process: BackgroundProcess, store: ResourceStore) -> RunnerView:
    resource = store.get(*_key(process))
    orphaned = resource is None or bool(process.uid) and resource.uid != process.uid
    cron = resource is not None and resource.spec.get("policy") == "Cron"
    return RunnerView(process, "cron" if cron else KIND, _state(resource, orphaned), orphaned)


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


class ProcessTransition(Enum):
    """What the background-processes reconciler does."""

    END_ORPHAN = "a live operation runner whose object was deleted (or re-created): its process group SIGKILLed"
    END_LEFTOVERS = "a dead operation runner left processes in its group: SIGKILLed, and its record dropped"
    FORGET_DEAD = "a recorded background process (any kind) that ended, with nothing left: its record dropped"


@dataclass(frozen=True)
class ProcessesSnapshot:
    """The home's background records: the live operation runners (with their objects looked up), and the dead."""

    runners: tuple[RunnerView, ...]
    dead: tuple[BackgroundProcess, ...]


class ProcessesReconciler:
    """Every recorded background process serves a live object, or is ended and forgotten.

    1. END_ORPHAN: a live runner whose operation no longer exists → its group is ended (the record
       goes at the next pass, once the process is seen dead).
    2. END_LEFTOVERS: a runner that died (``kill -9``) and left its group behind (a script's background
       job, holding the dataset's mount) → what is left is ended, the record dropped.
    3. FORGET_DEAD: any other record whose process ended → dropped.
    """

    name = "processes"

    def __init__(self, store: ResourceStore | None = None) -> None:
        self.store = store or ResourceStore()

    def observe(self) -> ProcessesSnapshot:
        live, dead = [], []
        for record in records():
            if record.running:
                if record.kind == KIND:
                    live.append(_view(record, self.store))
            else:
                dead.append(record)
        return ProcessesSnapshot(tuple(live), tuple(dead))

    def step(self, snapshot: ProcessesSnapshot) -> list[Applied]:
        done = []
        for view in snapshot.runners:
            if view.orphaned and view.process.identity.kill_group():
                done.append(applied(self.name, ProcessTransition.END_ORPHAN, view.process.object,
                                    f"pid {view.process.pid}", view.process.uid))
        for record in snapshot.dead:
            leftovers = record.kind == KIND and end_leftover_group(record)
            forget(record)
            transition = ProcessTransition.END_LEFTOVERS if leftovers else ProcessTransition.FORGET_DEAD
            done.append(applied(self.name, transition, record.object, f"pid {record.pid}", record.uid))
        return done

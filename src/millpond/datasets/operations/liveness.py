"""Whether a data operation's process is alive, and what becomes of the operation when it is not.

The process that runs an operation is recorded in the operation's row (pid + start time, as
runs record their engine; columns beside the status, which stays what Fluid shows). Whoever
reads the status — ``millpond get``, the REST API and UI, the SDK, ``wait`` — and the server
when it starts call ``observed``, which compares the record with /proc:

- alive (the same pid with the same start time, and not a zombie): nothing to do;
- gone while the operation is Pending or Executing (a Cron operation at any time: its process
  is its schedule): a DataLoad or DataMigrate is resumed in a new process, copying only what
  is missing (a DataLoad skips the blocks already cached, a DataMigrate the files an earlier
  process copied and verified, see ``copied``), at most ``MAX_RESUMES`` times; any other
  operation, or one whose process keeps dying, is marked Failed, saying
  ``<Kind> <name>: its process (pid N) died``.

Races, and how they are closed:

- An operation writes Complete or Failed before its process exits; the status is read again
  after the process was seen gone, so an operation that ended normally is never marked Failed.
- The start time defeats pid reuse: a recycled pid has another start time.
- Every change after a death is a compare-and-set on the record seen dead, so of two readers
  (two CLIs, a CLI and the server) seeing the same death, exactly one resumes or fails it.
- A new process is recorded in three steps: its launcher records itself (with the status, for
  a fresh start), spawns it, then records it — or the new process records itself first, as it
  starts (``claim``). A live process is recorded at every moment, and a launcher killed
  before its process took over is a dead record like any other; the process it left behind
  then finds the record no longer its launcher's and exits without doing anything.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from millpond.datasets.kinds import KINDS
from millpond.runners.detached import spawn_detached
from millpond.runners.processes import ProcessIdentity
from millpond.runners.reconcile import Applied, applied
from millpond.runners.reconcile import reconcile as reconcile_pass
from millpond.settings import load_settings
from millpond.store.resources import ProcessRecord, Resource, ResourceStore

MAX_RESUMES = 3
RESUMABLE = frozenset({"DataLoad", "DataMigrate"})
OPERATION_KINDS = tuple(info.kind for info in KINDS.values() if info.category == "operation")
FINISHED = ("Complete", "Failed")
# How a new operation process learns which launcher's record it takes over (pid:start:resumes).
LAUNCHER_ENV = "MILLPOND_OPERATION_LAUNCHER"

logger = logging.getLogger(__name__)


def log_path(kind: str, name: str, namespace: str) -> Path:
    """Where an operation's process writes what it prints (one file per operation, appended to)."""
    return load_settings().home / "operations" / f"{namespace}_{kind}_{name}.log"


def launch(store: ResourceStore, resource: Resource) -> None:
    """Start a fresh run of the operation: Pending, in a new background process that outlives the caller."""
    launcher = _me(resumes=0)
    if store.record_process(
        resource.kind, resource.name, resource.namespace, launcher, status={"phase": "Pending", "conditions": []}
    ):
        _spawn(store, resource, launcher)


def claim(store: ResourceStore, kind: str, name: str, namespace: str) -> bool:
    """In the operation's own process, before anything else: take over the record from its launcher.

    False when this process must not run: its launcher was seen dead meanwhile and the
    operation failed, or was resumed in another process.
    """
    launcher = _decode(os.environ.pop(LAUNCHER_ENV, ""))  # not inherited by what the operation runs
    if launcher is None:  # started by hand: it is the process to watch from now on
        store.record_process(kind, name, namespace, _me(resumes=0))
        return True
    me = _me(launcher.resumes)
    if store.swap_process(kind, name, namespace, launcher, me):
        return True
    found = store.get(kind, name, namespace)
    return found is not None and found.process == me  # the launcher recorded this process first


class OperationTransition(Enum):
    """What the liveness reconciler does to an operation whose process was seen gone while it is watched."""

    RESUME = "a DataLoad or DataMigrate resumed fewer than MAX_RESUMES times: resumed in a new process"
    FAIL = "any other operation, or one whose process keeps dying: Failed, saying its process died"


@dataclass(frozen=True)
class OperationSeen:
    """One operation as observed: ``dead`` when it needs a live process and its recorded one is gone."""

    resource: Resource
    dead: bool

    @property
    def subject(self) -> str:
        return f"{self.resource.kind} {self.resource.namespace}/{self.resource.name}"


@dataclass(frozen=True)
class OperationsSnapshot:
    """Every data operation of the home, observed."""

    operations: tuple[OperationSeen, ...]


def observe_operation(resource: Resource) -> OperationSeen:
    """Whether the operation's recorded process is gone while the operation still needs it (nothing is changed)."""
    process = resource.process
    dead = process is not None and _watched(resource) and not ProcessIdentity(process.pid, process.start).is_running()
    return OperationSeen(resource, dead)


def observed(store: ResourceStore, resource: Resource) -> dict[str, Any]:
    """The operation's status once its record is checked against the processes alive: what to show."""
    seen = observe_operation(resource)
    if not seen.dead:
        return resource.status or {"phase": "Pending"}
    return step_operation(store, seen)[0]


class OperationsReconciler:
    """Every unfinished (or scheduled) data operation has a live process, or is Failed saying why.

    1. RESUME: a DataLoad or DataMigrate whose process died, resumed fewer than ``MAX_RESUMES``
       times → a new process copies what is missing.
    2. FAIL: any other operation whose process died, or one resumed ``MAX_RESUMES`` times → Failed.
    """

    name = "operation-liveness"

    def __init__(self, store: ResourceStore) -> None:
        self.store = store

    def observe(self) -> OperationsSnapshot:
        return OperationsSnapshot(tuple(
            observe_operation(resource) for kind in OPERATION_KINDS for resource in self.store.list(kind)
        ))

    def step(self, snapshot: OperationsSnapshot) -> list[Applied]:
        done = []
        for seen in snapshot.operations:
            if not seen.dead:
                continue
            try:
                transition = step_operation(self.store, seen)[1]
            except Exception:  # noqa: BLE001 - one operation's trouble must not keep the others unseen
                logger.exception("checking the process of %s", seen.subject)
                continue
            if transition is not None:
                done.append(transition)
        return done


def reconcile_all(store: ResourceStore) -> list[Applied]:
    """One reconcile of every operation of the home: what the server does when it starts; the transitions applied."""
    return reconcile_pass(OperationsReconciler(store))


def _watched(resource: Resource) -> bool:
    """Whether the operation needs a live process: until it ends, or for ever when it runs on a schedule.

    A schedule that cannot run (condition ``InvalidSchedule``) ended for good: its process
    exited on purpose, and resuming it would only replace that reason.
    """
    status = resource.status or {}
    if resource.spec.get("policy") == "Cron":
        return not any(c.get("reason") == "InvalidSchedule" for c in status.get("conditions") or [])
    return status.get("phase") not in FINISHED


def step_operation(store: ResourceStore, seen: OperationSeen) -> tuple[dict[str, Any], Applied | None]:
    """Resume or fail an operation whose process was seen gone (unless its end, or another reader, came first).

    The operation's status now, and the transition if this call applied it: every change is a
    compare-and-set on the record seen dead, so of two readers exactly one applies it.
    """
    fresh = store.get(seen.resource.kind, seen.resource.name, seen.resource.namespace)
    if fresh is None:
        return seen.resource.status or {"phase": "Pending"}, None
    dead = fresh.process
    if dead is None or dead != seen.resource.process or not _watched(fresh):
        return fresh.status or {"phase": "Pending"}, None
    label = f"{fresh.kind} {fresh.name}: its process (pid {dead.pid}) died"
    done = None
    if fresh.kind in RESUMABLE and dead.resumes < MAX_RESUMES:
        launcher = _me(dead.resumes + 1)
        if store.swap_process(fresh.kind, fresh.name, fresh.namespace, dead, launcher):
            note = f"{label}; resuming it ({launcher.resumes} of at most {MAX_RESUMES} resumes)"
            _note(fresh, note)
            _spawn(store, fresh, launcher)
            done = applied(OperationsReconciler.name, OperationTransition.RESUME, seen.subject, note, fresh.uid)
    else:
        why = label + (f"; it was resumed {dead.resumes} times and died each time" if dead.resumes else "")
        if fresh.spec.get("policy") == "Cron":
            why += "; its schedule no longer runs"
        if store.swap_process(fresh.kind, fresh.name, fresh.namespace, dead, None,
                              _failed(fresh.kind, fresh.status, why)):
            from millpond.datasets.operations import lineage  # noqa: PLC0415 — the executors' modules, at an end only

            lineage.operation_ended(store.get(fresh.kind, fresh.name, fresh.namespace))
            done = applied(OperationsReconciler.name, OperationTransition.FAIL, seen.subject, why, fresh.uid)
    now = store.get(seen.resource.kind, seen.resource.name, seen.resource.namespace)
    return (now.status if now else fresh.status) or {"phase": "Pending"}, done


def _spawn(store: ResourceStore, resource: Resource, launcher: ProcessRecord) -> None:
    """Start ``python -m millpond.datasets.operations KIND NAME NS`` and record it in place of its launcher."""
    key = (resource.kind, resource.name, resource.namespace)
    try:
        spawned = spawn_detached("millpond.datasets.operations", key, log=log_path(*key),
                                 env={**os.environ, LAUNCHER_ENV: _encode(launcher)})
    except OSError as exc:
        why = f"{resource.kind} {resource.name}: cannot start its process: {exc}"
        store.swap_process(*key, launcher, None, _failed(resource.kind, resource.status, why))
        return
    if spawned.start is not None:
        store.swap_process(*key, launcher, ProcessRecord(spawned.pid, spawned.start, launcher.resumes))


def _failed(kind: str, status: dict[str, Any], message: str) -> dict[str, Any]:
    """Failed, with the reason; the last progress and duration its process wrote are kept."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    result = {key: value for key, value in (status or {}).items() if key != "waitingFor"}
    result.update(phase="Failed", completionTime=stamp, conditions=[{
        "type": "Failed", "status": "True", "reason": f"{kind}Failed", "message": message,
        "lastProbeTime": stamp, "lastTransitionTime": stamp,
    }])
    return result


def _note(resource: Resource, line: str) -> None:
    """A line in the operation's log, where its processes write theirs."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        with open(log_path(resource.kind, resource.name, resource.namespace), "a") as log:
            log.write(f"{stamp} {line}\n")
    except OSError:
        pass  # the resume goes on without its note


def _me(resumes: int) -> ProcessRecord:
    me = ProcessIdentity.own()
    return ProcessRecord(me.pid, me.start or "", resumes)


def _encode(record: ProcessRecord) -> str:
    return f"{record.pid}:{record.start}:{record.resumes}"


def _decode(text: str) -> ProcessRecord | None:
    parts = text.split(":")
    if len(parts) != 3 or not parts[0].isdigit() or not parts[2].isdigit():
        return None
    return ProcessRecord(int(parts[0]), parts[1], int(parts[2]))

"""One admission cycle against the metadata database, and the helpers a waiting process uses.

The API for whoever runs a workload (a job supervisor, a pipeline engine):

1. ``record = submit(settings, kind=..., name=..., namespace=..., user=..., queue=...,
   requests={...}, priority_class=...)`` records a PENDING workload (its priority resolved from
   the WorkloadPriorityClass, its holder this process);
2. ``admission = wait_for_admission(store, record.id, on_pending=show, cancel=event)`` runs
   cycles until the workload is admitted; ``show(reason, position)`` is called whenever either
   changes, so the caller can print or record why it waits;
3. while it runs, the holder watches its row: ``Evicted`` means stop (preempted, or its queue
   drained): end the processes, then ``release(settings, id, stopped=True)`` puts it back in
   its queue (``requeues`` + 1, its place kept) and lets the next one in;
4. when it ends, ``release(settings, id)`` finishes it and runs a cycle at once, so whoever waits
   for the freed quota is admitted without waiting for its own next poll.

A cycle (:func:`run_cycle`) loads the Kueue objects applied with ``millpond apply -f``, takes the
database-wide admission lock, finishes workloads whose holder process is gone (a holder on
another machine counts as alive, as ``runners.processes`` judges), calls the pure
``admission.decide`` and writes its decision; the lock makes two cycles take turns, so quota
is never given twice whichever machines run them.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping

from millpond.errors import MillpondError, UserError
from millpond.runners.processes import engine_mark, is_running, own_identity
from millpond.scheduling.queues.admission import PODS, decide
from millpond.scheduling.queues.live import kept
from millpond.scheduling.queues.live import workload_of as workload_of  # where views and the job queueing take it
from millpond.scheduling.queues.model import (
    Admission,
    Decision,
    Snapshot,
    WorkloadState,
)
from millpond.scheduling.queues.objects import stored_objects
from millpond.scheduling.queues.specs import KINDS, QueueObjects
from millpond.settings import Settings
from millpond.store.resources import ResourceStore
from millpond.store.workloads import WorkloadRecord, WorkloadStore

CYCLE_INTERVAL = 0.5  # seconds between the cycles a waiter runs
POLL_INTERVAL = 0.1  # seconds between its reads of its own row (another process's cycle may admit it)


def own_holder() -> str:
    """This process as a workload's holder: ``PID:TICKS@MACHINE``."""
    pid, ticks = own_identity()
    return f"{pid}:{engine_mark(ticks) or ''}"


def holder_alive(holder: str) -> bool:
    """Whether a holder mark names a process still running (another machine's: assumed so)."""
    pid, _, ticks = holder.partition(":")
    if not pid.isdigit() or not ticks:
        return True  # not a process mark: nothing to judge by
    return is_running(int(pid), ticks)


# Per database: the stamps of the Kueue objects last read (``ResourceStore.stamps``) and what they were read as.
# The records are frozen and nobody changes the maps, so every cycle of this process may share them.
_OBJECTS: dict[str, tuple[tuple[object, ...], QueueObjects]] = {}


def load_objects(settings: Settings) -> QueueObjects:
    """The Kueue objects applied in this home (cluster-scoped ones are stored under ``default``).

    Read and parsed again only when one was created, changed or deleted since this process last read them
    (whichever process wrote it): a cycle of a busy queue reads their stamps only (~1 ms, not ~18 ms for 70
    objects). A change that lands while a cycle runs is seen by the next, as it would be without the cache.
    """
    store = ResourceStore(settings)
    stamps = store.stamps(KINDS)
    kept_objects = _OBJECTS.get(settings.database_url)
    if kept_objects is not None and kept_objects[0] == stamps:
        return kept_objects[1]
    objects = stored_objects(store)
    _OBJECTS[settings.database_url] = (stamps, objects)
    return objects


def priority_of(objects: QueueObjects, priority_class: str | None) -> int:
    if priority_class is None:
        return 0
    found = objects.priority_classes.get(priority_class)
    if found is None:
        raise UserError(f"WorkloadPriorityClass {priority_class} doesn't exist "
                        "(millpond apply -f a kueue.x-k8s.io WorkloadPriorityClass first)")
    return found.value


def submit(settings: Settings, *, kind: str, name: str, namespace: str, user: str, queue: str,
           requests: Mapping[str, int], priority_class: str | None = None, pod_count: int = 1,
           holder: str | None = None) -> WorkloadRecord:
    """Record a PENDING workload, its priority taken from ``priority_class`` (a missing class:
    UserError, nothing stored), ``pods`` (``pod_count``) added to its requests. A missing queue is
    no error here: the workload waits with that reason, as in Kueue."""
    priority = priority_of(load_objects(settings), priority_class)
    requests = {PODS: pod_count * 1000, **requests}  # a queue that covers "pods" counts them
    return WorkloadStore(settings).submit(
        kind=kind, name=name, namespace=namespace, user=user, queue=queue, requests=requests, priority=priority,
        priority_class=priority_class, pod_count=pod_count, holder=own_holder() if holder is None else holder)


def reclaim_dead(settings: Settings) -> int:
    """Finish the workloads whose holder process is gone, and let the next ones in; how many were found.

    What every read of a queue calls first (``views.live_workloads``: ``queue list``, ``get
    clusterqueues``, the server's routes, the UI, ``/metrics``) and the server's timer: a holder killed
    with ``kill -9`` runs no ``release``, and its waiting peers may be dead too, so without this the
    quota it held stays counted until someone submits again. A read that finds none takes no lock;
    one that does runs a whole cycle, as ``release`` does, so the freed quota is handed on at once.
    """
    states = [state.value for state in (WorkloadState.PENDING, WorkloadState.ADMITTED, WorkloadState.EVICTED)]
    alive = functools.cache(holder_alive)  # many workloads share a holder (an engine, a server): /proc once each
    dead = sum(1 for record in WorkloadStore(settings).list(states=states)
               if record.holder and not alive(record.holder))
    if dead:
        run_cycle(settings)
    return dead


def run_cycle(settings: Settings, now: float | None = None) -> Decision:
    """One admission cycle: load, lock, reclaim dead holders, decide, write. Returns what was decided.

    The live workloads come from this process's copy (``queues.live``), brought up to date under
    the lock from the rows written since its last cycle, whoever wrote them.
    """
    objects = load_objects(settings)
    store = WorkloadStore(settings)
    live = kept(settings.database_url)
    with live.lock:
        with store.locked() as locked:
            now = time.time() if now is None else now
            live.refresh(locked)
            read_at = live.generation
            alive = functools.cache(holder_alive)  # one /proc read per distinct holder in this cycle, not per row
            gone = [w for w in live.models.values() if w.holder and not alive(w.holder)]
            for workload in gone:
                locked.finish(workload.id, f"its holder process {workload.holder.partition(':')[0]} is gone")
            dead = {workload.id for workload in gone}
            snapshot = Snapshot(cluster_queues=objects.cluster_queues, local_queues=objects.local_queues,
                                cohorts=objects.cohorts, flavors=objects.flavors,
                                workloads=tuple(w for key, w in live.models.items() if key not in dead))
            decision = decide(snapshot, now)
            admitted = [(a.workload_id, a.cluster_queue, a.flavors) for a in decision.admitted]
            evicted = [(e.workload_id, e.reason) for e in decision.evicted]
            waiting = [(p.workload_id, p.reason, p.position) for p in decision.pending]
            locked.write(admitted=admitted, evicted=evicted, waiting=waiting, at=now, known=live.shown)
        live.written(locked.stamp, read_at, admitted, evicted, waiting, dead, now)
    return decision


def release(settings: Settings, workload_id: str, *, stopped: bool = False, reason: str = "finished") -> Decision:
    """The holder is done with its quota: finished (or, ``stopped``, an evicted workload back in its
    queue). A cycle runs at once so that the freed quota goes to whoever waits for it."""
    store = WorkloadStore(settings)
    if stopped:
        store.mark_stopped(workload_id)
    else:
        store.finish(workload_id, reason)
    return run_cycle(settings)


def wait_for_admission(store: WorkloadStore, workload_id: str, *,
                       on_pending: Callable[[str, int | None], None] | None = None,
                       cancel: threading.Event | None = None, interval: float = CYCLE_INTERVAL,
                       poll: float = POLL_INTERVAL) -> Admission | None:
    """Run admission cycles until ``workload_id`` is admitted, and return its Admission.

    ``borrowing`` is known only when this process's own cycle admitted it. A workload admitted and
    already evicted by another process's cycle is returned too: its holder sees ``Evicted`` on its
    row at its first look. ``on_pending(reason, position)`` is called on each change of either.
    None when ``cancel`` is set first (the workload is left pending: finish it if it is not to
    run). A workload FINISHED meanwhile (its holder gone, deleted) raises MillpondError.
    """
    seen: tuple[str, int | None] | None = None
    next_cycle = 0.0
    while True:
        borrowing = False
        if time.monotonic() >= next_cycle:
            decision = run_cycle(store.settings)
            borrowing = any(a.borrowing for a in decision.admitted if a.workload_id == workload_id)
            next_cycle = time.monotonic() + interval
        record = store.require(workload_id)
        if record.state in (WorkloadState.ADMITTED.value, WorkloadState.EVICTED.value):
            return Admission(record.id, record.cluster_queue or "", dict(record.flavors), borrowing)
        if record.state == WorkloadState.FINISHED.value:
            raise MillpondError(f"workload {record.namespace}/{record.name} ended while it waited: {record.reason}")
        if on_pending is not None and (record.reason, record.position) != seen:
            seen = (record.reason, record.position)
            on_pending(record.reason, record.position)
        if cancel is not None:
            if cancel.wait(poll):
                return None
        else:
            time.sleep(poll)

"""The live workloads an admitting process keeps between its cycles, brought up to date from the store's change counter.

A cycle decides over every workload not FINISHED: thousands of rows when a cohort is saturated
(Kueue's baseline replay keeps ~10,000 waiting). Reading and modelling them all each cycle cost
more than deciding. So a process keeps what its last cycle read, with the workload generation it
was read at (``store.workloads``, migration 0016: every transaction that writes workloads stamps its
rows with the next generation), and under the admission lock reads only the rows stamped since:
none when nothing changed, the few submitted, finished or requeued meanwhile otherwise.

Correct whatever else runs: the generation is read in the cycle's transaction, so rows another
process (on any machine) wrote are seen at the next cycle; a process killed with ``kill -9`` takes
its copy with it, and a new one starts from a full read. After its own write a cycle applies its
decision to its copy itself only when its own stamp is the next generation (nobody else wrote in
between); otherwise its copy stays at the generation it read, and the next cycle re-reads from there.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from millpond.scheduling.queues.model import Workload, WorkloadKind, WorkloadState
from millpond.store.workloads import FINISHED, LockedWorkloads, WorkloadRecord


def workload_of(record: WorkloadRecord) -> Workload:
    """A stored row as the model's record."""
    return Workload(
        id=record.id, kind=WorkloadKind(record.kind), name=record.name, namespace=record.namespace,
        user=record.user, queue=record.queue, requests=dict(record.requests), priority=record.priority,
        priority_class=record.priority_class, pod_count=record.pod_count, created=record.created,
        state=WorkloadState(record.state), cluster_queue=record.cluster_queue, flavors=dict(record.flavors),
        reason=record.reason, requeues=record.requeues, holder=record.holder, admitted_at=record.admitted_at,
        position=record.position)


@dataclass
class LiveWorkloads:
    """The workloads not FINISHED as of ``generation``, as the model's records, and the reason and
    position each one's row shows (kept apart: a cycle rewrites those of thousands of waiting rows,
    and deciding never reads them)."""

    generation: int = -1  # -1: nothing read yet
    epoch: str = ""  # the database's (``Generation.epoch``)
    models: dict[str, Workload] = field(default_factory=dict)
    shown: dict[str, tuple[str, int | None]] = field(default_factory=dict)  # id -> (reason, position) as stored
    # held for a whole cycle (refresh, decide, write, commit, written): a process's cycles take turns anyway
    lock: threading.Lock = field(default_factory=threading.Lock)

    def refresh(self, locked: LockedWorkloads) -> None:
        """Up to date with the store, under the admission lock: the rows stamped since, or all on a first read."""
        now = locked.generation()  # first: a row stamped after it is read now or at the next refresh
        if (now.epoch, now.value) == (self.epoch, self.generation):
            return
        if now.epoch != self.epoch or now.value < self.generation:  # a first read, or another database
            self.models.clear()
            self.shown.clear()
            self._put(locked.active())
        else:
            self._put(locked.changed_since(self.generation))
        self.epoch, self.generation = now.epoch, now.value

    def drop(self, workload_id: str) -> None:
        self.models.pop(workload_id, None)
        self.shown.pop(workload_id, None)

    def _put(self, records: Iterable[WorkloadRecord]) -> None:
        for record in records:
            if record.state == FINISHED:
                self.drop(record.id)
            else:
                self.models[record.id] = workload_of(record)
                self.shown[record.id] = (record.reason, record.position)

    def written(self, stamp: int | None, read_at: int, admitted: Iterable[tuple[str, str, Mapping[str, str]]],
                evicted: Iterable[tuple[str, str]], waiting: Iterable[tuple[str, str, int]],
                finished: Iterable[str], at: float) -> None:
        """After the cycle's commit: its own writes applied, when its ``stamp`` follows ``read_at`` directly."""
        if stamp is None:
            return  # it wrote nothing
        if stamp != read_at + 1:
            return  # another process wrote in between: the next refresh reads from read_at
        for key in finished:
            self.drop(key)
        for key, queue, flavors in admitted:
            self.models[key] = dataclasses.replace(self.models[key], state=WorkloadState.ADMITTED, cluster_queue=queue,
                                                   flavors=dict(flavors), admitted_at=at, reason="", position=None)
            self.shown[key] = ("", None)
        for key, reason in evicted:
            self.models[key] = dataclasses.replace(self.models[key], state=WorkloadState.EVICTED, reason=reason)
            self.shown[key] = (reason, self.shown[key][1])
        for key, reason, position in waiting:
            if key in self.shown:
                self.shown[key] = (reason, position)
        self.generation = stamp


_KEPT: dict[str, LiveWorkloads] = {}
_KEPT_LOCK = threading.Lock()


def kept(database_url: str) -> LiveWorkloads:
    """This process's copy for one database (cycles of one process take turns on the admission lock)."""
    with _KEPT_LOCK:
        return _KEPT.setdefault(database_url, LiveWorkloads())

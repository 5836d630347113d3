"""The workloads of a run's queued tasks, held by its engine: submit, wait, watch for eviction, requeue, finish.

A queued task (``pipelines.queueing``) waits PENDING until an admission cycle admits its
workload, then takes the machine's ledger as any task does. The engine's one walking thread
drives it: :meth:`EngineQueues.admitted` while the task waits (one admission cycle at most every
``cycle.CYCLE_INTERVAL`` for the whole run, the task's reason written when it changes),
:meth:`EngineQueues.evictions` while tasks run (an evicted task's :class:`TaskCancel` is set,
so its process is stopped as a cancelled one is: SIGTERM, then SIGKILL), ``requeue`` once
that process ended (the workload back to its place, the task PENDING again and run again when
re-admitted, its retry policy untouched), ``finish`` when it is done. The engine's process is
every workload's holder: if it dies, the next cycle anywhere gives their quota back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from millpond.errors import MillpondError, UserError
from millpond.scheduling.queues import cycle
from millpond.scheduling.queues.model import Workload, WorkloadState
from millpond.settings import Settings
from millpond.store.workloads import WorkloadStore

_POLL_S = 0.1
_EVICTION_POLL_S = 0.5  # how often the engine reads its running tasks' workloads


class TaskCancel(threading.Event):
    """A queued task's own stop flag: set when its workload is evicted, and set whenever the run's is."""

    def __init__(self, run_cancel: threading.Event) -> None:
        super().__init__()
        self.run_cancel = run_cancel

    def is_set(self) -> bool:
        return super().is_set() or self.run_cancel.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            left = _POLL_S if deadline is None else min(_POLL_S, deadline - time.monotonic())
            if left <= 0:
                return False
            super().wait(left)
        return True


@dataclass
class QueuedTask:
    """One task's workload while its run's engine holds it: submitted, waiting, admitted, evicted."""

    model: Workload
    cancel: TaskCancel
    id: str = ""
    shown: tuple[str, str] = ("", "")  # the last reason and place written on the task
    evicted: str = ""  # Kueue's message once evicted while it ran


class EngineQueues:
    """The workloads of one run's queued tasks, held by the engine's process (its death frees them).

    The engine's walk calls these from its one thread: :meth:`admitted` while a task waits (it
    runs an admission cycle at most every ``cycle.CYCLE_INTERVAL``, and writes the task's reason
    when it changes), :meth:`evictions` while tasks run, :meth:`requeue` after an evicted task's
    process stopped, :meth:`finish` when a task is done.
    """

    def __init__(self, settings: Settings, run_cancel: threading.Event,
                 show: Callable[[str, str, str, bool], None]) -> None:
        self.settings = settings
        self.store = WorkloadStore(settings)
        self.run_cancel = run_cancel
        self.show = show  # (task key, reason, place in its queue, whether the reason is new): tell why it waits
        self.tasks: dict[str, QueuedTask] = {}
        self._next_cycle = 0.0
        self._next_eviction_check = 0.0

    def add(self, key: str, model: Workload) -> TaskCancel:
        queued = QueuedTask(model, TaskCancel(self.run_cancel))
        self.tasks[key] = queued
        return queued.cancel

    def admitted(self, key: str) -> bool:
        """Whether the task may take the ledger now (True for a task that is not queued)."""
        queued = self.tasks.get(key)
        if queued is None:
            return True
        if not queued.id:
            if not self._submit(key, queued):
                return False
            self._next_cycle = 0.0  # a new workload: decided on at once, not at the run's next cycle
        if time.monotonic() >= self._next_cycle:
            cycle.run_cycle(self.settings)
            self._next_cycle = time.monotonic() + cycle.CYCLE_INTERVAL
        record = self.store.get(queued.id)
        if record is None or record.state == WorkloadState.FINISHED.value:
            raise MillpondError(f"its workload ended while it waited: {record.reason if record else 'deleted'}")
        if record.state == WorkloadState.ADMITTED.value:
            return True
        place = "" if record.position is None else f"{record.position} ahead of it in its ClusterQueue"
        self._show(key, queued, f"Pending: {record.reason}", place)
        return False

    def _submit(self, key: str, queued: QueuedTask) -> bool:
        model = queued.model
        try:
            queued.id = cycle.submit(self.settings, kind=model.kind.value, name=model.name, namespace=model.namespace,
                                     user=model.user, queue=model.queue, requests=model.requests,
                                     priority_class=model.priority_class).id
        except UserError as exc:  # Kueue cannot build the Workload: the task waits, saying so
            self._show(key, queued, f"WorkloadPriorityClassNotFound: {exc}", "")
            return False
        return True

    def _show(self, key: str, queued: QueuedTask, reason: str, place: str) -> None:
        if (reason, place) != queued.shown:
            self.show(key, reason, place, reason != queued.shown[0])
            queued.shown = (reason, place)

    def evictions(self, running: list[str]) -> list[str]:
        """The running tasks (keys) whose workloads were evicted since the last look (at most every 0.5 s):
        their cancel flags are set, so their processes stop."""
        now = time.monotonic()
        if now < self._next_eviction_check:
            return []
        self._next_eviction_check = now + _EVICTION_POLL_S
        found = []
        for key in running:
            queued = self.tasks.get(key)
            if queued is None or not queued.id or queued.evicted:
                continue
            record = self.store.get(queued.id)
            if record is not None and record.state == WorkloadState.EVICTED.value:
                queued.evicted = record.reason or "evicted"
                queued.cancel.set()
                found.append(key)
        return found

    def evicted(self, key: str) -> str:
        queued = self.tasks.get(key)
        return queued.evicted if queued is not None else ""

    def requeue(self, key: str) -> None:
        """An evicted task's process stopped: its workload goes back to its place in its queue."""
        queued = self.tasks[key]
        cycle.release(self.settings, queued.id, stopped=True)
        queued.evicted, queued.shown = "", ("", "")
        queued.cancel = TaskCancel(self.run_cancel)

    def cancel_of(self, key: str) -> TaskCancel | None:
        queued = self.tasks.get(key)
        return queued.cancel if queued is not None else None

    def finish(self, key: str, reason: str = "the task ended") -> None:
        queued = self.tasks.pop(key, None)
        if queued is not None and queued.id:
            cycle.release(self.settings, queued.id, reason=reason)

    def finish_all(self, reason: str) -> None:
        """Every workload this engine holds, finished (a walk that ends by an exception, a cancel)."""
        for key in list(self.tasks):
            try:
                self.finish(key, reason)
            except MillpondError:
                break  # the database does not answer: the next cycle finishes them once this process is gone

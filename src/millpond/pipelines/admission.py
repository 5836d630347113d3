"""Tasks between their policies and their end: waiting for their queue and the ledger, running, evicted.

A task's work goes to a worker thread once its Kueue queue admitted it (a queued task) and its
resources fit what the running tasks of every run and job of this home leave free (the
machine-wide ledger). Until then it waits; whenever something may have been given back the
engine calls ``start_waiting``. A queued task whose workload is evicted stops, waits PENDING for
its queue again and runs again when re-admitted (``requeue``).
"""

from __future__ import annotations

import threading
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from millpond.errors import MillpondError
from millpond.pipelines.cluster import ClusterBudget
from millpond.pipelines.graph import PENDING, Node
from millpond.pipelines.launcher import ContainerLauncher, TaskRequest
from millpond.pipelines.outcomes import TaskOutcome
from millpond.pipelines.resources import Budget, ResourceRequest
from millpond.pipelines.retries import RetryPolicy, with_retries
from millpond.pipelines.task_queues import EngineQueues
from millpond.pipelines.task_records import TaskRecords
from millpond.scheduling import GRANT_ENV, Grant, Holder
from millpond.scheduling.queues.submission import eviction_reason

Work = Callable[[Grant], TaskOutcome]


@dataclass(frozen=True)
class Waiting:
    """A task whose resources are not free yet: retried whenever something may have been given back."""

    node: Node
    work: Work
    resources: ResourceRequest
    log_path: Path | None
    noted: bool = False  # its log already says what it waits for


def covers(request: ResourceRequest, smaller: ResourceRequest) -> bool:
    """True when ``request`` asks for at least what ``smaller`` asks, in every resource."""
    return (
        request.cpu >= smaller.cpu
        and request.memory >= smaller.memory
        and request.accelerators >= smaller.accelerators
    )


def _note(log_path: Path | None, line: str) -> None:
    if log_path is not None:
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"[millpond] {line}\n")


class TaskAdmission:
    """One run's tasks that wait, run, or were evicted; ``futures`` maps work in flight to its task."""

    def __init__(self, budget: Budget | ClusterBudget, records: TaskRecords, cancel: threading.Event,
                 holder_of: Callable[[Node], Holder]) -> None:
        self.budget = budget
        self.records = records
        self.cancel = cancel
        self.holder_of = holder_of
        self.queues: EngineQueues | None = None  # set by the engine: its queues call back show_queued
        self.pool: Executor | None = None  # the walk's worker threads, while it runs
        self.futures: dict[Future[TaskOutcome], Node] = {}
        self.holding: dict[Future[TaskOutcome], Grant] = {}
        self.waiting: list[Waiting] = []
        self._queued: dict[str, Waiting] = {}  # a queued task's work, to run again after an eviction
        self.cleanups: dict[str, Callable[[], None]] = {}  # an evicted task's platform, kept for its next run

    @property
    def the_queues(self) -> EngineQueues:
        assert self.queues is not None, "the engine sets its queues before the walk"
        return self.queues

    def submit(self, node: Node, work: Work, resources: ResourceRequest = ResourceRequest(),
               log_path: Path | None = None, noted: bool = False) -> Waiting | None:
        """Hand ``work`` to a worker once its queue admitted it (a queued task) and ``resources`` fit what
        the running tasks (of every run and job of this home: the machine-wide ledger) leave free;
        the entry when the ledger refused it (None otherwise)."""
        queues = self.the_queues
        if node.path in queues.tasks:
            self._queued[node.path] = Waiting(node, work, resources, log_path)
            try:
                admitted = queues.admitted(node.path)
            except MillpondError as exc:
                self.unqueue(node.path)
                self.records.fail(node, str(exc))
                return None
            if not admitted:  # waits for its queue: not the ledger's refusal (None: nothing to note)
                self.waiting.append(Waiting(node, work, resources, log_path, noted))
                return None
        grant = self.budget.acquire(resources, self.holder_of(node))
        if grant is None:
            self.waiting.append(Waiting(node, work, resources, log_path, noted))
            return self.waiting[-1]
        warning = self.budget.fallback_warning(resources)
        if warning:
            _note(log_path, f"warning: {warning}")
        assert self.pool is not None, "tasks are submitted only while the walk runs"
        future = self.pool.submit(work, grant)
        self.futures[future] = node
        self.holding[future] = grant
        return None

    def start_waiting(self, note: bool = False) -> None:
        """Start the waiting tasks that fit now; with ``note``, the log of a task still waiting says
        what for, once (not at its first try: its own run may be about to give back what it needs)."""
        waiting, self.waiting = self.waiting, []
        refused: list[ResourceRequest] = []  # in this pass: a request at least as large as one of these fails too
        reasons: dict[ResourceRequest, str] = {}
        for entry in waiting:
            if self.cancel.is_set():
                self.unqueue(entry.node.path, "canceled while it waited for resources")
                self.records.never_started(entry.node, "canceled while it waited for resources")
                continue
            noted = entry.noted or note
            if any(covers(entry.resources, smaller) for smaller in refused):
                self.waiting.append(Waiting(entry.node, entry.work, entry.resources, entry.log_path, noted))
            elif self.submit(entry.node, entry.work, entry.resources, entry.log_path, noted) is not None:
                refused.append(entry.resources)
            else:
                continue
            if note and not entry.noted and entry.log_path is not None:
                if entry.resources not in reasons:
                    reasons[entry.resources] = self.budget.why_waiting(entry.resources)
                _note(entry.log_path, f"waiting for resources: {reasons[entry.resources]}")

    def release_all(self) -> None:
        """Give back every grant still held (a walk that ends by an exception leaves some).

        A ledger that cannot be written now keeps them only until this process ends: the next
        request after that reclaims them.
        """
        holding, self.holding = self.holding, {}
        for grant in holding.values():
            try:
                self.budget.release(grant)
            except MillpondError:
                break

    def attempts(self, launcher: ContainerLauncher, request: TaskRequest, policy: RetryPolicy, grant: Grant,
                 cancel: threading.Event) -> TaskOutcome:
        """Run a container task, retrying per its retryPolicy (in a worker thread) until ``cancel``: the run's
        flag, or a queued task's own (set too when its workload is evicted)."""
        gpus = list(grant.gpus)
        if grant.id:  # a task that hands its work on (a training job) may give its grant back
            request.extra_env[GRANT_ENV] = grant.id
        if gpus or self.budget.gpus:
            visible = ",".join(str(g) for g in gpus)
            request.extra_env.update({"CUDA_VISIBLE_DEVICES": visible, "NVIDIA_VISIBLE_DEVICES": visible or "void"})
        return with_retries(
            lambda: launcher.launch(request, cancel),
            policy,
            cancel,
            request.log_path,
            on_retry=lambda attempt: self.records.store.update_task(request.task_id, attempts=attempt),
        )

    # --- Kueue: queued tasks (pipelines.queueing, pipelines.task_queues) ----------------------
    def show_queued(self, path: str, reason: str, place: str, new: bool) -> None:
        """Why a queued task waits, with its place, on its row (``millpond runs get``, the API's task error);
        in its log when the reason itself is ``new`` (not at each move up the queue)."""
        entry = self._queued.get(path)
        if entry is None or not entry.node.record_id:
            return
        reason = f"{reason} ({place})" if place else reason
        self.records.store.update_task(entry.node.record_id, error=reason)
        if new:
            _note(entry.log_path, f"waiting for its queue: {reason}")
        self.records.listener.task_changed(path, entry.node.display_name, PENDING, reason)

    def evicted(self, node: Node, future: Future[TaskOutcome]) -> bool:
        """Whether the task ended because its workload was evicted (not on its own, not by the run's cancel)."""
        if not self.the_queues.evicted(node.path) or self.cancel.is_set() or future.exception() is not None:
            return False
        return not future.result().succeeded

    def requeue(self, node: Node) -> None:
        """An evicted task's process has stopped: PENDING again, waiting for its queue to admit it again."""
        message = self.the_queues.evicted(node.path)
        entry = self._queued[node.path]
        self.the_queues.requeue(node.path)
        self.records.began[node.path].clear()  # its next start records RUNNING again
        why = f"Evicted ({eviction_reason(message)}): {message}; requeued"
        _note(entry.log_path, why)
        self.records.store.update_task(node.record_id or "", state=PENDING, error=why)
        self.records.listener.task_changed(node.path, node.display_name, PENDING, why)
        self.waiting.append(Waiting(node, entry.work, entry.resources, entry.log_path))

    def unqueue(self, path: str, reason: str = "the task ended") -> None:
        """A queued task is done: its workload finished (its quota to the next), its platform cleaned up."""
        self._queued.pop(path, None)
        self.cleanups.pop(path, lambda: None)()
        self.the_queues.finish(path, reason)

    def unqueue_all(self, reason: str) -> None:
        for cleanup in self.cleanups.values():
            cleanup()
        self.cleanups.clear()
        self.the_queues.finish_all(reason)

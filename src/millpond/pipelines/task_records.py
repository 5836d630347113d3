"""How a task's state changes are recorded: its row in the journal, the walk's node, the listener.

The engine decides; this writes. Every change goes to the three places in the same order (row,
node, listener), and a task that becomes final settles in its scope and has the walk look at that
scope again (``advance``), so its dependents start.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, Protocol

from millpond.pipelines.graph import CANCELED, FAILED, PENDING, RUNNING, SUCCEEDED, Node, Outputs, Scope
from millpond.pipelines.policies.launch import TaskLaunch
from millpond.runners.processes import start_ticks
from millpond.store.journal import RunJournal
from millpond.store.keys import utcnow
from millpond.store.lineage import (
    CONTAINER_EXECUTION,
    DAG_EXECUTION,
    IMPORTER_EXECUTION,
    ArtifactLink,
    ExecutionRecord,
    RunScope,
    dataset_links,
    input_links,
    output_links,
)

_EXECUTION_TYPES = {"container": CONTAINER_EXECUTION, "importer": IMPORTER_EXECUTION, "dag": DAG_EXECUTION,
                    "loop": DAG_EXECUTION}


class Listener(Protocol):
    """Told about every state change, for progress displays; must be quick."""

    def task_changed(self, path: str, name: str, state: str, error: str | None) -> None: ...

    def run_changed(self, state: str, error: str | None) -> None: ...


class Silent:
    """The listener of a run nobody watches."""

    def task_changed(self, path: str, name: str, state: str, error: str | None) -> None:
        pass

    def run_changed(self, state: str, error: str | None) -> None:
        pass


class TaskRecords:
    """The state changes of one run's tasks; ``failed`` lists the run's task failures, first first."""

    def __init__(self, store: RunJournal, listener: Listener, run_id: str, advance: Callable[[Scope], None],
                 lineage: RunScope | None = None) -> None:
        self.store = store
        self.lineage = lineage  # None: lineage is not recorded (MILLPOND_LINEAGE=0)
        self.inputs: dict[str, Mapping[str, Any]] = {}  # the resolved input artifacts of tasks in flight, by path
        self.mounts: dict[str, tuple[ArtifactLink, ...]] = {}  # the datasets they mount, by path
        self.listener = listener
        self.run_id = run_id
        self.advance = advance
        self.failed: list[str] = []
        self.began: dict[str, threading.Event] = {}  # cleared when an evicted task waits again

    def parent_record(self, node: Node) -> str | None:
        scope = node.scope
        if scope.record_id:
            return scope.record_id
        return scope.owner.record_id if scope.owner else None

    def start(
        self, node: Node, kind: str, image: str | None, inputs: Mapping[str, object], log_path: Path | None = None,
        state: str = RUNNING,
    ) -> None:
        """Record the task's row: RUNNING (started now), or PENDING (waiting; ``starter`` marks its start)."""
        if self.lineage is not None:
            artifacts = inputs.get("artifacts")
            self.inputs[node.path] = artifacts if isinstance(artifacts, Mapping) else {}
        node.record_id = self.store.start_task(
            run_id=self.run_id, path=node.path, name=node.display_name, kind=kind, component=node.component_name,
            parent_id=self.parent_record(node), image=image, inputs=inputs,
            log_path=str(log_path) if log_path else None, task_id=node.record_id, state=state,
        )
        node.state, node.kind = RUNNING, kind  # the walk's own state: started, not final
        self.listener.task_changed(node.path, node.display_name, state, None)

    def mounted(self, node: Node, datasets: list[str], namespace: str) -> None:
        """The Fluid datasets a task mounts (its platform's PVCs), inputs of its lineage."""
        if self.lineage is not None and datasets:
            self.mounts[node.path] = dataset_links(datasets, namespace)

    def record_task(self, launch: TaskLaunch, kind: str, image: str | None, log_path: Path | None) -> None:
        """A launched task's row, PENDING until its work begins (``policies.launch.TaskRows``)."""
        self.start(launch.node, kind, image, launch.inputs.to_json(), log_path, state=PENDING)
        launch.recorded = True

    def starter(self, node: Node) -> Callable[..., None]:
        """What a worker thread calls when ``node``'s work really begins (its process, with a pid): the
        first call records the task RUNNING with its ``started_at`` (and ``fields`` the launcher adds, such as
        where it runs, in the same write); a retry's only records its new pid."""
        task_id, path, name = node.record_id or "", node.path, node.display_name
        began = self.began[node.path] = threading.Event()

        def started(pid: int | None, **fields: Any) -> None:
            process = {"pid": pid, "pid_start": start_ticks(pid)} if pid is not None else {}
            if began.is_set():
                if process:  # a retry on a Ray node has no pid of this machine to record
                    self.store.update_task(task_id, **process)
                return
            began.set()
            self.store.update_task(task_id, state=RUNNING, started_at=utcnow(), error=None, **process, **fields)
            self.listener.task_changed(path, name, RUNNING, None)

        return started

    def decide(self, node: Node, kind: str, state: str, reason: str | None) -> None:
        """Record a task that will not run (skipped)."""
        node.record_id = self.store.start_task(
            run_id=self.run_id, path=node.path, name=node.display_name, kind=kind,
            component=node.component_name, parent_id=self.parent_record(node), state=state, task_id=node.record_id,
        )
        self.store.update_task(node.record_id, error=reason)
        node.state, node.error = state, reason
        node.scope.settle(node)
        self.listener.task_changed(node.path, node.display_name, state, reason)

    def fail(self, node: Node, error: str, exit_code: int | None = None, attempts: int | None = None) -> None:
        node.state, node.error = FAILED, error
        node.scope.settle(node)
        self.failed.append(f"task {node.display_name!r} failed: {error}")
        if node.record_id:
            self.store.finish_task(node.record_id, state=FAILED, error=error, exit_code=exit_code, attempts=attempts,
                                   lineage=self._execution(node, FAILED))
        self.listener.task_changed(node.path, node.display_name, FAILED, error)
        self.advance(node.scope)

    def dag_failed(self, node: Node, failed: Node | None, reason: str = "failed") -> None:
        """A sub-DAG or loop whose task failed: fails too, without counting the failure twice."""
        node.state = FAILED
        node.scope.settle(node)
        node.error = f"task {failed.display_name!r} failed: {failed.error}" if failed else reason
        if node.record_id:
            self.store.finish_task(node.record_id, state=FAILED, error=node.error,
                                   lineage=self._execution(node, FAILED))
        self.listener.task_changed(node.path, node.display_name, FAILED, None)
        self.advance(node.scope)

    def succeed(
        self, node: Node, outputs: Outputs, exit_code: int | None = None, attempts: int | None = None,
        record_artifacts: bool = True, cache_entry: tuple[str, Mapping[str, object]] | None = None,
        cached_from: str | None = None,
    ) -> None:
        node.state = SUCCEEDED
        node.outputs = outputs
        node.scope.settle(node)
        # A DAG's outputs are its tasks' artifacts, and a cache hit's belong to the task that made them.
        produced_here = record_artifacts and node.kind in ("container", "importer")
        artifacts = [item for items in outputs.artifacts.values() for item in items] if produced_here else []
        if node.record_id:
            self.store.finish_task(
                node.record_id, state=SUCCEEDED, outputs=outputs.to_json(), exit_code=exit_code,
                artifacts=artifacts, run_id=self.run_id, attempts=attempts, cache_entry=cache_entry,
                lineage=self._execution(node, SUCCEEDED, outputs.artifacts, cached_from),
            )
        self.listener.task_changed(node.path, node.display_name, SUCCEEDED, None)
        self.advance(node.scope)

    def reuse(self, node: Node, record_id: str, outputs: Outputs) -> None:
        """On resume: a task that already succeeded keeps its row and outputs and does not run again."""
        node.record_id = record_id
        node.state = SUCCEEDED
        node.outputs = outputs
        node.scope.settle(node)
        self.listener.task_changed(node.path, node.display_name, SUCCEEDED, None)
        self.advance(node.scope)

    def never_started(self, node: Node, reason: str) -> None:
        """A task that waited (PENDING) and will not run: CANCELED, with no start time."""
        node.state, node.error = CANCELED, reason
        node.scope.settle(node)
        if node.record_id:
            self.store.finish_task(node.record_id, state=CANCELED, error=reason,
                                   lineage=self._execution(node, CANCELED))
        self.listener.task_changed(node.path, node.display_name, CANCELED, reason)

    def _execution(
        self, node: Node, state: str, outputs: Mapping[str, Any] | None = None, cached_from: str | None = None,
    ) -> ExecutionRecord | None:
        """The lineage of a task ending: its execution with KFP's type and properties, the artifacts it read
        and (when it succeeded) wrote; a cache hit names the execution it reused (``cached_execution_id``) and
        its outputs are that execution's artifacts. A DAG's outputs are its tasks': it records none of its own."""
        inputs, mounts = self.inputs.pop(node.path, {}), self.mounts.pop(node.path, ())
        if self.lineage is None or not node.record_id:
            return None
        kind = node.kind or "container"
        custom: dict[str, Any] = {"display_name": node.display_name, "task_name": node.display_name,
                                  "component_name": node.component_name, "run_id": self.lineage.run_id}
        if node.cache_key:
            custom["cache_fingerprint"] = node.cache_key
        if cached_from:
            custom["cached_execution_id"] = cached_from
        if node.scope.record_id or (node.scope.owner is not None and node.scope.owner.record_id):
            custom["parent_dag_id"] = self.parent_record(node)
        produced = output_links(outputs, node.display_name) if outputs and kind not in ("dag", "loop") else ()
        return ExecutionRecord(
            execution_id=node.record_id, type_name=_EXECUTION_TYPES.get(kind, CONTAINER_EXECUTION),
            name=node.path, state="CACHED" if cached_from else state, namespace=self.lineage.namespace,
            run=self.lineage, inputs=(*input_links(node.spec, inputs), *mounts), outputs=produced,
            custom_properties=custom, produced_here=cached_from is None,
        )

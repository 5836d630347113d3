"""The in-memory shape of a run being walked: DAG instances (scopes) and their tasks (nodes)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from millpond.pipelines.ir import task_dependencies

SUCCEEDED, FAILED, SKIPPED, RUNNING, PENDING, CANCELED = (
    "SUCCEEDED", "FAILED", "SKIPPED", "RUNNING", "PENDING", "CANCELED",
)
FINAL = (SUCCEEDED, FAILED, SKIPPED, CANCELED)
ALL_COMPLETED = "ALL_UPSTREAM_TASKS_COMPLETED"

Artifacts = dict[str, list[dict[str, Any]]]


@dataclass
class Outputs:
    parameters: dict[str, Any] = field(default_factory=dict)
    artifacts: Artifacts = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"parameters": self.parameters, "artifacts": self.artifacts}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "Outputs":
        data = data or {}
        return cls(dict(data.get("parameters", {})), dict(data.get("artifacts", {})))


@dataclass
class Node:
    """One task of one DAG instance: a container, an importer, a sub-DAG or a loop."""

    name: str
    spec: dict[str, Any]
    scope: "Scope"
    state: str = PENDING
    kind: str = ""  # container | importer | dag | loop, once started
    record_id: str | None = None
    outputs: Outputs = field(default_factory=Outputs)
    error: str | None = None
    cache_key: str | None = None
    settled: bool = False  # counted as final by its scope
    # Loops: the iterations still to start, the scopes started so far (by index), how many of
    # those are still running, and the first that failed.
    pending_iterations: deque[tuple[int, "Scope"]] = field(default_factory=deque)
    iterations: dict[int, "Scope"] = field(default_factory=dict)
    active_iterations: int = 0
    failed_iteration: "Scope | None" = None
    dropped_iterations: int = 0  # not started because the run had failed

    @property
    def path(self) -> str:
        return f"{self.scope.path}/{self.name}" if self.scope.path else self.name

    @property
    def display_name(self) -> str:
        return str(self.spec.get("taskInfo", {}).get("name") or self.name)

    @property
    def component_name(self) -> str:
        return str(self.spec["componentRef"]["name"])

    @property
    def is_loop(self) -> bool:
        return "parameterIterator" in self.spec or "artifactIterator" in self.spec

    @property
    def runs_after_failures(self) -> bool:
        """Exit handlers and ignore_upstream_failure() tasks run once their upstream is final, whatever it became."""
        return self.spec.get("triggerPolicy", {}).get("strategy") == ALL_COMPLETED

    def dependencies(self) -> set[str]:
        return task_dependencies(self.spec)

    def recursion_depth(self) -> int:
        """How many of the DAGs around this task repeat one further out: 0 but in a DAG that
        calls itself (a kfp 1.x ``graph_component``, an Argo template recursing), where each
        level down adds to it."""
        around: list[str] = []
        scope = self.scope
        while scope.owner is not None:
            around.append(scope.owner.component_name)
            scope = scope.owner.scope
        return len(around) - len(set(around))


@dataclass
class Scope:
    """One instance of a DAG component: the root, a nested pipeline, a branch, a loop iteration.

    It keeps, per task, how many of its upstream tasks are not final yet and who waits on it,
    so a task becoming final costs work in proportion to its dependents, not to the DAG.
    """

    path: str
    component: dict[str, Any]
    parameters: dict[str, Any]
    artifacts: Artifacts
    owner: Node | None
    record_id: str | None = None
    nodes: dict[str, Node] = field(default_factory=dict)
    finished: bool = False
    waiting_on: dict[str, int] = field(default_factory=dict)
    dependents: dict[str, list[str]] = field(default_factory=dict)
    ready: deque[str] = field(default_factory=deque)
    unfinished: int = 0

    def add_tasks(self, tasks: dict[str, Any]) -> None:
        for name, task in tasks.items():
            self.nodes[name] = Node(name=name, spec=task, scope=self)
        for name, node in self.nodes.items():
            deps = node.dependencies()
            self.waiting_on[name] = len(deps)
            for dep in deps:
                self.dependents.setdefault(dep, []).append(name)
            if not deps:
                self.ready.append(name)
        self.unfinished = len(self.nodes)

    def settle(self, node: Node) -> None:
        """``node`` became final: count it done and release the tasks that waited only on it.

        A node settles once; a second call is an engine bug that would make the count lie.
        """
        if node.settled:
            raise RuntimeError(f"task {node.path!r} became final twice")
        node.settled = True
        self.unfinished -= 1
        for name in self.dependents.get(node.name, ()):
            self.waiting_on[name] -= 1
            if self.waiting_on[name] == 0:
                self.ready.append(name)

    def done(self) -> bool:
        return self.unfinished == 0

    def first_failure(self) -> Node | None:
        return next((n for n in self.nodes.values() if n.state in (FAILED, CANCELED)), None)

    def unsettled(self) -> list[str]:
        """The paths of this scope's tasks that never became final (for a run's error)."""
        return [n.path for n in self.nodes.values() if not n.settled]

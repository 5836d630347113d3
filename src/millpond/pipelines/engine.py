"""The run engine: walk a pipeline's DAG, launch ready tasks in parallel, record every change.

One thread owns the walk and all database writes; task processes run on a pool of worker
threads (one per parallel slot) and hand their outcome back. A task is ready when the
tasks it depends on are final; sub-DAGs (nested pipelines) are walked as scopes of their
own and finish when their last task does. After a failure no new task starts, the ones in
flight run to their end, and the run ends FAILED — as the KFP backend does.
"""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from millpond.pipelines import ir
from millpond.pipelines.values import coerce
from millpond.pipelines.launcher import ContainerLauncher, TaskError, TaskOutcome, TaskRequest
from millpond.runners.base import Runner
from millpond.runners.local import LocalRunner
from millpond.settings import Settings
from millpond.store.models import Run, utcnow
from millpond.store.runs import RunStore

SUCCEEDED, FAILED, SKIPPED, RUNNING, PENDING, CANCELED = (
    "SUCCEEDED", "FAILED", "SKIPPED", "RUNNING", "PENDING", "CANCELED",
)
FINAL = (SUCCEEDED, FAILED, SKIPPED, CANCELED)


# For parameters and artifacts: the binding from the DAG's inputs, from a task, and its output key.
_BINDING_KEYS = {
    "parameters": ("componentInputParameter", "taskOutputParameter", "outputParameterKey"),
    "artifacts": ("componentInputArtifact", "taskOutputArtifact", "outputArtifactKey"),
}


class Listener(Protocol):
    """Told about every state change, for progress displays; must be quick."""

    def task_changed(self, path: str, name: str, state: str, error: str | None) -> None: ...

    def run_changed(self, state: str, error: str | None) -> None: ...


class _Silent:
    def task_changed(self, path: str, name: str, state: str, error: str | None) -> None:
        pass

    def run_changed(self, state: str, error: str | None) -> None:
        pass


@dataclass
class Outputs:
    parameters: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"parameters": self.parameters, "artifacts": self.artifacts}


@dataclass
class Node:
    """One task of one DAG instance."""

    name: str
    spec: dict[str, Any]
    scope: "Scope"
    state: str = PENDING
    record_id: str | None = None
    outputs: Outputs = field(default_factory=Outputs)
    child: "Scope | None" = None

    @property
    def path(self) -> str:
        return f"{self.scope.path}/{self.name}" if self.scope.path else self.name

    @property
    def display_name(self) -> str:
        return str(self.spec.get("taskInfo", {}).get("name") or self.name)

    def dependencies(self) -> set[str]:
        deps = set(self.spec.get("dependentTasks", []))
        for kind in ("parameters", "artifacts"):
            for binding in self.spec.get("inputs", {}).get(kind, {}).values():
                ref = binding.get("taskOutputParameter") or binding.get("taskOutputArtifact")
                if ref:
                    deps.add(ref["producerTask"])
        return deps


@dataclass
class Scope:
    """One instance of a DAG: the root pipeline, or a nested pipeline's body."""

    path: str
    component: dict[str, Any]
    parameters: dict[str, Any]
    artifacts: dict[str, list[dict[str, Any]]]
    parent: Node | None
    nodes: dict[str, Node] = field(default_factory=dict)

    def done(self) -> bool:
        return all(node.state in FINAL for node in self.nodes.values())


@dataclass
class RunResult:
    state: str
    error: str | None
    outputs: Outputs


class Engine:
    """Executes one run to its end. Build one per run."""

    def __init__(
        self,
        store: RunStore,
        settings: Settings,
        runner: Runner | None = None,
        listener: Listener | None = None,
        max_parallel: int | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.launcher = ContainerLauncher(runner or LocalRunner())
        self.listener = listener or _Silent()
        self.max_parallel = max(1, max_parallel or settings.max_parallel)
        self.cancel = threading.Event()
        self._failed: list[str] = []
        self._futures: dict[Future[TaskOutcome], Node] = {}

    # --- the walk -------------------------------------------------------------------------
    def execute(self, run: Run) -> RunResult:
        self.run = run
        self.spec = run.pipeline_spec
        self.store.update_run(run.id, state=RUNNING, started_at=utcnow())
        self.listener.run_changed(RUNNING, None)
        root = self._new_scope("", self.spec["root"], dict(run.parameters), {}, parent=None)
        with ThreadPoolExecutor(max_workers=self.max_parallel, thread_name_prefix="millpond-task") as pool:
            self.pool = pool
            try:
                self._advance(root)
                while self._futures:
                    done, _ = wait(list(self._futures), return_when=FIRST_COMPLETED)
                    for future in done:
                        node = self._futures.pop(future)
                        self._container_finished(node, future.result())
            except BaseException as exc:
                self._abandon(exc)
                raise
        state = FAILED if self._failed or not root.done() else SUCCEEDED
        error = self._failed[0] if self._failed else None
        outputs = self._dag_outputs(root) if state == SUCCEEDED else Outputs()
        self.store.update_run(run.id, state=state, error=error, outputs=outputs.to_json(), finished_at=utcnow())
        self.listener.run_changed(state, error)
        return RunResult(state=state, error=error, outputs=outputs)

    def _abandon(self, exc: BaseException) -> None:
        """Stop the tasks in flight and record the run as CANCELED (Ctrl-C, SIGTERM) or FAILED."""
        self.cancel.set()
        interrupted = isinstance(exc, (KeyboardInterrupt, SystemExit))
        state = CANCELED if interrupted else FAILED
        reason = "interrupted" if interrupted else f"engine error: {type(exc).__name__}: {exc}"
        for future, node in list(self._futures.items()):
            future.result()  # the runner saw the cancel flag and stopped the process
            if node.record_id:
                self.store.finish_task(node.record_id, state=CANCELED, error=reason)
            self.listener.task_changed(node.path, node.display_name, CANCELED, reason)
        self._futures.clear()
        self.store.update_run(self.run.id, state=state, error=reason, finished_at=utcnow())
        self.listener.run_changed(state, reason)

    def _new_scope(
        self, path: str, component: dict[str, Any], parameters: dict[str, Any],
        artifacts: dict[str, list[dict[str, Any]]], parent: Node | None,
    ) -> Scope:
        scope = Scope(path, component, parameters, artifacts, parent)
        for name, task in component["dag"].get("tasks", {}).items():
            scope.nodes[name] = Node(name=name, spec=task, scope=scope)
        return scope

    def _advance(self, scope: Scope) -> None:
        """Start every task of ``scope`` that has become ready; finish the scope when all are final."""
        progressed = True
        while progressed:
            progressed = False
            for node in scope.nodes.values():
                if node.state != PENDING:
                    continue
                deps = [scope.nodes[d] for d in node.dependencies()]
                if any(dep.state not in FINAL for dep in deps):
                    continue
                progressed = True
                failed_dep = next((d for d in deps if d.state in (FAILED, CANCELED)), None)
                if self._failed or failed_dep:
                    why = f"upstream task {failed_dep.display_name!r} failed" if failed_dep else "the run failed"
                    self._decide(node, SKIPPED, f"not run: {why}")
                    continue
                self._start(node)
        if scope.done() and scope.parent is not None and scope.parent.state == RUNNING:
            self._dag_finished(scope)

    def _start(self, node: Node) -> None:
        component_name = node.spec["componentRef"]["name"]
        component = ir.component(self.spec, component_name)
        try:
            parameters, artifacts = self._resolve_inputs(node, component)
        except TaskError as exc:
            self._record_start(node, "dag" if "dag" in component else "container", component_name, None, {})
            self._fail(node, str(exc))
            return
        inputs = {"parameters": parameters, "artifacts": artifacts}
        if "dag" in component:
            self._record_start(node, "dag", component_name, None, inputs)
            node.child = self._new_scope(node.path, component, parameters, artifacts, parent=node)
            self._advance(node.child)
            return
        executor = ir.executor(self.spec, component["executorLabel"])
        if "container" not in executor:
            kind = next(iter(executor), "unknown")
            self._record_start(node, kind, component_name, None, inputs)
            self._fail(node, f"executor kind {kind!r} is not supported yet")
            return
        container = executor["container"]
        log_path = self.settings.logs_dir / self.run.id / f"{node.path.replace('/', '.')}.log"
        self._record_start(node, "container", component_name, container.get("image"), inputs, log_path)
        request = TaskRequest(
            run_id=self.run.id,
            run_name=self.run.name,
            pipeline_name=self.run.pipeline_name,
            pipeline_root=self.run.pipeline_root,
            task_id=node.record_id or "",
            task_name=node.display_name,
            task_path=node.path,
            component_spec=component,
            container=container,
            parameters=parameters,
            artifacts=artifacts,
            log_path=log_path,
            staging_dir=self.settings.staging_dir,
            venvs_dir=self.settings.venvs_dir,
        )
        future = self.pool.submit(self.launcher.launch, request, self.cancel)
        self._futures[future] = node

    # --- inputs and outputs -------------------------------------------------------------
    def _resolve_inputs(
        self, node: Node, component: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
        bindings = node.spec.get("inputs", {})
        parameters = self._bound_values(node.scope, bindings.get("parameters", {}), "parameters")
        artifacts = self._bound_values(node.scope, bindings.get("artifacts", {}), "artifacts")
        for name, definition in ir.input_parameters(component).items():
            if name not in parameters:
                if "defaultValue" in definition:
                    parameters[name] = definition["defaultValue"]
                elif not definition.get("isOptional"):
                    raise TaskError(f"input parameter {name!r} has no value")
            if name in parameters:
                parameters[name] = coerce(parameters[name], ir.parameter_type(definition))
        for name, definition in ir.input_artifacts(component).items():
            if name not in artifacts and not definition.get("isOptional"):
                raise TaskError(f"input artifact {name!r} has no value")
        return parameters, artifacts

    def _bound_values(self, scope: Scope, bindings: dict[str, Any], kind: str) -> dict[str, Any]:
        """Values of a task's inputs from its DAG's inputs, upstream outputs or constants.

        An input whose source has no value (an optional input left out, a skipped producer)
        is absent, so the component's default or optionality decides.
        """
        from_input, from_task, output_key = _BINDING_KEYS[kind]
        values: dict[str, Any] = {}
        for name, binding in bindings.items():
            if from_input in binding:
                source = scope.parameters if kind == "parameters" else scope.artifacts
                if binding[from_input] in source:
                    values[name] = source[binding[from_input]]
            elif from_task in binding:
                ref = binding[from_task]
                produced = getattr(scope.nodes[ref["producerTask"]].outputs, kind)
                if ref[output_key] in produced:
                    values[name] = produced[ref[output_key]]
            elif kind == "parameters" and "runtimeValue" in binding:
                values[name] = binding["runtimeValue"].get("constant")
            else:
                raise TaskError(f"input {name!r}: binding {sorted(binding)} is not supported yet")
        return values

    def _dag_outputs(self, scope: Scope) -> Outputs:
        outputs = Outputs()
        spec = scope.component["dag"].get("outputs", {})
        for name, selector in spec.get("parameters", {}).items():
            ref = selector.get("valueFromParameter")
            if ref:
                produced = scope.nodes[ref["producerSubtask"]].outputs.parameters
                if ref["outputParameterKey"] in produced:
                    outputs.parameters[name] = produced[ref["outputParameterKey"]]
        for name, selector in spec.get("artifacts", {}).items():
            for ref in selector.get("artifactSelectors", []):
                produced = scope.nodes[ref["producerSubtask"]].outputs.artifacts
                if ref["outputArtifactKey"] in produced:
                    outputs.artifacts[name] = produced[ref["outputArtifactKey"]]
        return outputs

    # --- state changes ------------------------------------------------------------------
    def _record_start(
        self, node: Node, kind: str, component: str, image: str | None,
        inputs: dict[str, Any], log_path: Path | None = None,
    ) -> None:
        parent = node.scope.parent
        node.record_id = self.store.start_task(
            run_id=self.run.id, path=node.path, name=node.display_name, kind=kind, component=component,
            parent_id=parent.record_id if parent else None, image=image, inputs=inputs,
            log_path=str(log_path) if log_path else None,
        )
        node.state = RUNNING
        self.listener.task_changed(node.path, node.display_name, RUNNING, None)

    def _decide(self, node: Node, state: str, reason: str | None) -> None:
        """Record a task that will not run (skipped)."""
        component = node.spec["componentRef"]["name"]
        parent = node.scope.parent
        node.record_id = self.store.start_task(
            run_id=self.run.id, path=node.path, name=node.display_name, kind="dag" if "dag" in ir.component(self.spec, component) else "container",
            component=component, parent_id=parent.record_id if parent else None, state=state,
        )
        self.store.update_task(node.record_id, error=reason)
        node.state = state
        self.listener.task_changed(node.path, node.display_name, state, reason)

    def _fail(self, node: Node, error: str, exit_code: int | None = None) -> None:
        node.state = FAILED
        message = f"task {node.display_name!r} failed: {error}"
        self._failed.append(message)
        if node.record_id:
            self.store.finish_task(node.record_id, state=FAILED, error=error, exit_code=exit_code)
        self.listener.task_changed(node.path, node.display_name, FAILED, error)
        self._advance(node.scope)

    def _succeed(self, node: Node, outputs: Outputs, exit_code: int | None = None) -> None:
        node.state = SUCCEEDED
        node.outputs = outputs
        artifacts = [item for items in outputs.artifacts.values() for item in items] if node.child is None else []
        if node.record_id:
            self.store.finish_task(
                node.record_id, state=SUCCEEDED, outputs=outputs.to_json(), exit_code=exit_code,
                artifacts=artifacts, run_id=self.run.id,
            )
        self.listener.task_changed(node.path, node.display_name, SUCCEEDED, None)
        self._advance(node.scope)

    def _container_finished(self, node: Node, outcome: TaskOutcome) -> None:
        if outcome.succeeded:
            self._succeed(node, Outputs(outcome.parameters, outcome.artifacts), outcome.exit_code)
        else:
            self._fail(node, outcome.error or "failed", outcome.exit_code)

    def _dag_finished(self, scope: Scope) -> None:
        node = scope.parent
        assert node is not None
        failed = next((n for n in scope.nodes.values() if n.state in (FAILED, CANCELED)), None)
        if failed:
            node.state = FAILED
            if node.record_id:
                self.store.finish_task(node.record_id, state=FAILED, error=f"task {failed.display_name!r} failed")
            self.listener.task_changed(node.path, node.display_name, FAILED, None)
            self._advance(node.scope)
        else:
            self._succeed(node, self._dag_outputs(scope))

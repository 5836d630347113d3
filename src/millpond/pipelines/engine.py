"""The run engine: walk a pipeline's DAG, launch ready tasks in parallel, record every change.

One thread owns the walk and the database writes; task processes run on a pool of worker
threads and hand their outcome back. A container task is PENDING while it waits for the
resource budget (the home's machine-wide ledger, shared with other runs and training jobs) and
a process slot; its worker records it RUNNING, with its start time, when
its process starts — so a task's duration never counts its wait. A task is ready when the
tasks it depends on are final; its trigger condition (CEL) decides whether it runs.
Sub-DAGs (nested pipelines, condition branches, exit-handler bodies) and loop iterations
are scopes of their own, finished when their last task is. After a failure no new task
starts except exit handlers and ``ignore_upstream_failure`` tasks; the tasks in flight
run to their end, and the run ends FAILED — as the KFP backend does.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Protocol

from millpond.durations import DurationError
from millpond.errors import MillpondError, UserError
from millpond.pipelines import bindings, ir
from millpond.pipelines.caching import cache_entry, cache_key, caching_enabled, lookup
from millpond.pipelines.cancellation import CANCELING, close_tasks
from millpond.pipelines.cluster import ClusterBudget, demand, unshared_file
from millpond.pipelines.conditions import ConditionError, condition_holds
from millpond.pipelines.graph import (
    CANCELED,
    FAILED,
    PENDING,
    RUNNING,
    SKIPPED,
    SUCCEEDED,
    Artifacts,
    Node,
    Outputs,
    Scope,
)
from millpond.pipelines.importer import importer_uri, run_importer
from millpond.pipelines.launcher import ContainerLauncher, TaskError, TaskOutcome, TaskRequest
from millpond.pipelines.placeholders import PlaceholderContext
from millpond.pipelines.platform import PlatformError, PodInfo, TaskPlatform, builtin_task, prepare_platform
from millpond.pipelines.queueing import TaskQueueing, project_of, task_queueing, task_workload
from millpond.pipelines.resources import (
    Budget,
    ResourceRequest,
    static_accelerator_problems,
    task_request,
    with_inputs,
)
from millpond.pipelines.retries import RetryPolicy, with_retries
from millpond.pipelines.task_queues import EngineQueues
from millpond.pipelines.values import coerce
from millpond.pipelines.workflow_limits import WorkflowLimits, workflow_limits
from millpond.runners import stopping
from millpond.runners.base import Bind, Runner
from millpond.runners.pool import PoolRunner
from millpond.runners.processes import engine_mark, own_identity, start_ticks
from millpond.runners.ray_cluster import RayRunner, cluster_cpus
from millpond.scheduling import GRANT_ENV, Grant, Holder
from millpond.scheduling.queues.submission import eviction_reason
from millpond.settings import Settings
from millpond.store.journal import RunJournal
from millpond.store.journal import RunRecord as Run
from millpond.store.journal import TaskRecord as Task
from millpond.store.keys import new_id, utcnow
from millpond.store.paths import UnsafePath, contained_path, task_log_file
from millpond.store.secrets import ConfigStore

_STOP_POLL_S = 0.2  # how often the walk, waiting for its tasks, looks for a stop request (SIGINT, SIGTERM)


class Listener(Protocol):
    """Told about every state change, for progress displays; must be quick."""

    def task_changed(self, path: str, name: str, state: str, error: str | None) -> None: ...

    def run_changed(self, state: str, error: str | None) -> None: ...


class _Silent:
    def task_changed(self, path: str, name: str, state: str, error: str | None) -> None:
        pass

    def run_changed(self, state: str, error: str | None) -> None:
        pass


@dataclass(frozen=True)
class _Waiting:
    """A task whose resources are not free yet: retried whenever something may have been given back."""

    node: Node
    work: Callable[[Grant], TaskOutcome]
    resources: ResourceRequest
    log_path: Path | None
    noted: bool = False  # its log already says what it waits for


def _covers(request: ResourceRequest, smaller: ResourceRequest) -> bool:
    """True when ``request`` asks for at least what ``smaller`` asks, in every resource."""
    return (
        request.cpu >= smaller.cpu
        and request.memory >= smaller.memory
        and request.accelerators >= smaller.accelerators
    )


@dataclass
class RunResult:
    state: str
    error: str | None
    outputs: Outputs


def _has_lightweight_tasks(spec: dict[str, Any]) -> bool:
    return any(
        "kfp.dsl.executor_main" in " ".join(map(str, executor.get("container", {}).get("command") or []))
        for executor in spec.get("deploymentSpec", {}).get("executors", {}).values()
    )


class Engine:
    """Executes one run to its end. Build one per run."""

    def __init__(
        self,
        store: RunJournal,
        settings: Settings,
        runner: Runner | None = None,
        listener: Listener | None = None,
        max_parallel: int | None = None,
        use_cache: bool = True,
        ignore_resources: bool = False,
        stop: stopping.StopRequest | None = None,
    ) -> None:
        self.store = store
        self._stop = stop  # default: this process's (set by its SIGINT/SIGTERM/SIGHUP handlers)
        self.use_cache = use_cache
        self.ignore_resources = ignore_resources  # kfp.local's way: requests are not scheduled
        self.configs = ConfigStore(settings.home)
        self.settings = settings
        self.budget: Budget | ClusterBudget = Budget(settings)  # the home's ledger: shared with other runs and jobs
        parallel = max_parallel or settings.max_parallel
        if runner is None and settings.ray_address:  # cluster mode: tasks are Ray tasks; Ray places and queues
            runner = RayRunner(settings.ray_address, settings.shared_roots, fork_server=settings.fork_server)
            self.budget = ClusterBudget()
            parallel = max(parallel, cluster_cpus())
        self.runner = runner or PoolRunner(use_fork_server=settings.fork_server)
        self.max_parallel = max(1, parallel)
        self.launcher = ContainerLauncher(self.runner, threading.Semaphore(self.max_parallel))
        self.listener = listener or _Silent()
        self.cancel = threading.Event()
        self._failed: list[str] = []
        self._futures: dict[Future[TaskOutcome], Node] = {}
        self._holding: dict[Future[TaskOutcome], Grant] = {}
        self._waiting: list[_Waiting] = []
        self._to_walk: deque[Scope] = deque()  # scopes with ready tasks, walked one at a time (_advance)
        self._walking = False
        self._previous: dict[str, Task] = {}
        # Kueue: the workloads of queued tasks (pipelines.queueing), by task path
        self.queues = EngineQueues(settings, self.cancel, self._show_queued)
        self._queued: dict[str, _Waiting] = {}  # a queued task's work, to run again after an eviction
        self._began: dict[str, threading.Event] = {}  # cleared when an evicted task waits again
        self._cleanups: dict[str, Callable[[], None]] = {}  # an evicted task's platform, kept for its next run
        self.limits = WorkflowLimits()  # a translated Argo workflow's run-wide limits (set per run)
        self._deadline: float | None = None  # monotonic end of the workflow's activeDeadlineSeconds
        self._cut_by_deadline: set[str] = set()  # tasks whose time limit is what is left of the workflow's

    # --- the walk -------------------------------------------------------------------------
    def execute(self, run: Run, resume: bool = False) -> RunResult:
        """Run ``run`` to its end; with ``resume``, tasks that already SUCCEEDED are not run again.

        A stop signal does not interrupt the walk wherever it is (see ``runners.stopping``): the
        walk looks for it between steps, stops the tasks, records CANCELED and raises ``Stopped``.
        """
        with stopping.deferred() as process_stop:
            self.stop = self._stop or process_stop
            return self._execute(run, resume)

    def _execute(self, run: Run, resume: bool) -> RunResult:
        self.run = run
        self.spec = run.pipeline_spec
        self.context = {
            "pipeline_job_name": run.name,
            "pipeline_job_resource_name": f"{run.pipeline_name}-{run.id[:8]}",  # as an Argo workflow name
            "pipeline_job_uuid": run.id,
            "pipeline_root": run.pipeline_root,
        }
        if resume:
            self._previous = {t.path: t for t in self.store.list_tasks(run.id) if t.state == SUCCEEDED}
        self._apply_limits(workflow_limits(run.platform_spec, f"run {run.id}"))
        pid, ticks = self._identity = own_identity()
        self.store.update_run(
            run.id, state=RUNNING, error=None, started_at=run.started_at or utcnow(), finished_at=None,
            engine_pid=pid, engine_start=engine_mark(ticks),  # TICKS@MACHINE: other machines may share the database
        )
        self.listener.run_changed(RUNNING, None)
        problems = [] if self.ignore_resources else static_accelerator_problems(self.spec, self.budget)
        if problems:
            error = "cannot run on this machine: task " + "; task ".join(problems)
            self.store.update_run(run.id, state=FAILED, error=error, finished_at=utcnow())
            self.listener.run_changed(FAILED, error)
            return RunResult(state=FAILED, error=error, outputs=Outputs())
        if _has_lightweight_tasks(self.spec):
            getattr(self.runner, "warm_up", lambda: None)()  # its ~0.2 s start overlaps the first tasks' set-up
        root = self._new_scope("", self.spec["root"], dict(run.parameters), {}, owner=None)
        # Twice the process slots in threads: one task's preparation and outputs overlap another's process.
        with ThreadPoolExecutor(max_workers=2 * self.max_parallel, thread_name_prefix="millpond-task") as pool:
            self.pool = pool
            try:
                self.stop.check()
                self._advance(root)
                while self._futures or self._waiting:
                    if self._futures:
                        done, _ = wait(list(self._futures), timeout=_STOP_POLL_S, return_when=FIRST_COMPLETED)
                    else:  # only tasks waiting for what other runs or jobs hold: look again shortly
                        done = set()
                        self.cancel.wait(_STOP_POLL_S)
                    self.stop.check()
                    for future in done:
                        node = self._futures.pop(future)
                        grant = self._holding.pop(future)
                        if self._evicted(node, future):
                            self.budget.release(grant)
                            self._requeue(node)
                            continue
                        try:  # recorded finished before its resources go to another run's task
                            self._task_finished(node, future.result())
                        finally:
                            self.budget.release(grant)
                            self._unqueue(node.path)
                        self._start_waiting()
                    if not done:  # another process may have given back what a waiting task needs
                        self._start_waiting(note=True)
                    if self.queues.tasks:
                        self.queues.evictions([node.path for node in self._futures.values()])
            except BaseException as exc:
                self._abandon(exc)
                raise
            finally:
                self.runner.close()
                self._release_all()
                self._unqueue_all("the run ended")
        state, error = self._outcome(root)
        outputs = bindings.dag_outputs(root) if state == SUCCEEDED else Outputs()
        self.store.update_run(run.id, state=state, error=error, outputs=outputs.to_json(), finished_at=utcnow())
        self.listener.run_changed(state, error)
        return RunResult(state=state, error=error, outputs=outputs)

    def _outcome(self, root: Scope) -> tuple[str, str | None]:
        """The run's end state and why: a FAILED or CANCELED run always names its reason."""
        if self._failed:
            return FAILED, self._failed[0]
        if root.done():
            return SUCCEEDED, None
        unsettled = ", ".join(root.unsettled()[:5])
        if self.cancel.is_set():
            return CANCELED, f"canceled before these tasks ended: {unsettled}"
        return FAILED, f"engine error: the walk ended with tasks never final: {unsettled}"

    def _abandon(self, exc: BaseException) -> None:
        """Stop the tasks in flight and record the run as CANCELED (a stop signal, Ctrl-C) or FAILED.

        Every task not yet final — in flight, waiting for a slot, a loop or sub-DAG around them —
        is recorded CANCELED; CANCELING comes first, so a run cancelled here is never resumed.
        """
        self.cancel.set()
        interrupted = isinstance(exc, (KeyboardInterrupt, SystemExit))
        state = CANCELED if interrupted else FAILED
        reason = f"engine error: {type(exc).__name__}: {exc}"
        if interrupted:  # CANCELING first: whatever happens next, nothing resumes this run
            reason = str(exc) if isinstance(exc, stopping.Stopped) else "interrupted"
            self.store.update_run(self.run.id, state=CANCELING, error=reason)
            self.listener.run_changed(CANCELING, reason)
        wait(list(self._futures))  # the runners saw the cancel flag and stopped the processes
        stopped = [*self._futures.values(), *(waiting.node for waiting in self._waiting)]
        self._release_all()  # the machine-wide ledger outlives this walk (a server's engine thread)
        self._unqueue_all(f"the run ended: {reason}")
        self._futures.clear()
        self._waiting.clear()
        close_tasks(self.store, self.run.id, reason)  # in flight and waiting alike: their rows are not final
        for node in stopped:
            self.listener.task_changed(node.path, node.display_name, CANCELED, reason)
        self.store.update_run(self.run.id, state=state, error=reason, finished_at=utcnow())
        self.listener.run_changed(state, reason)

    def _new_scope(
        self, path: str, component: dict[str, Any], parameters: dict[str, Any], artifacts: Artifacts, owner: Node | None
    ) -> Scope:
        scope = Scope(path, component, parameters, artifacts, owner)
        scope.add_tasks(component["dag"].get("tasks", {}))
        return scope

    def _advance(self, scope: Scope) -> None:
        """Walk ``scope`` now, or after the walk under way: the engine walks one scope at a time.

        Starting a task can finish it at once (a cache hit, a skip, a failure before its
        process), which readies its dependents; starting a sub-DAG readies a whole scope. Those
        are queued and walked by the one loop here, never by a nested call, so the call stack
        stays flat however deep the DAGs nest or recurse (an Argo recursion of a thousand cached
        levels) and however long a chain of cache hits runs. Between two scopes the walk is
        whole, so a stop request is honoured there.
        """
        self._to_walk.append(scope)
        if self._walking:
            return
        self._walking = True
        try:
            while self._to_walk:
                self.stop.check()  # a walk of cache hits may go on a long while: a stop still ends it
                self._walk(self._to_walk.popleft())
        finally:
            self._walking = False

    def _walk(self, scope: Scope) -> None:
        """Start the tasks of ``scope`` whose upstream became final; finish the scope when all are."""
        while scope.ready:
            node = scope.nodes[scope.ready.popleft()]
            if node.state != PENDING:
                continue
            deps = [scope.nodes[d] for d in node.dependencies()]
            reason = self._blocked(node, deps)
            if reason:
                self._decide(node, SKIPPED, f"not run: {reason}")
            else:
                self._start(node)
        if scope.done() and not scope.finished:
            self._scope_finished(scope)

    def _blocked(self, node: Node, deps: list[Node]) -> str | None:
        """Why a task whose upstream is final must not run, or None."""
        if node.runs_after_failures:
            return None
        failed = next((d for d in deps if d.state in (FAILED, CANCELED)), None)
        if failed:
            return f"upstream task {failed.display_name!r} failed"
        if self._failed:
            return "the run failed"
        skipped = next((d for d in deps if d.state == SKIPPED), None)
        if skipped:
            return f"upstream task {skipped.display_name!r} was skipped"
        return None

    def _start(self, node: Node) -> None:
        component = ir.component(self.spec, node.component_name)
        kind = "loop" if node.is_loop else "dag" if "dag" in component else "container"
        node.record_id = node.record_id or new_id()
        context = {**self.context, "pipeline_task_name": node.display_name, "pipeline_task_uuid": node.record_id}
        try:
            parameters, artifacts = bindings.task_inputs(node, component, context)
            condition = node.spec.get("triggerPolicy", {}).get("condition")
            if condition and not condition_holds(condition, parameters):
                self._decide(node, SKIPPED, "condition is false")
                return
        except (TaskError, ConditionError) as exc:
            self._record_start(node, kind, None, {})
            self._fail(node, str(exc))
            return
        inputs = {"parameters": parameters, "artifacts": artifacts}
        if kind == "loop":
            self._start_loop(node, component, parameters, artifacts)
        elif kind == "dag":
            self._record_start(node, "dag", None, inputs)
            child = self._new_scope(node.path, component, parameters, artifacts, owner=node)
            self._advance(child)
        else:
            self._start_executor(node, component, parameters, artifacts)

    # --- loops ----------------------------------------------------------------------------
    def _start_loop(
        self, node: Node, component: dict[str, Any], parameters: dict[str, Any], artifacts: Artifacts
    ) -> None:
        self._record_start(node, "loop", None, {"parameters": parameters, "artifacts": artifacts})
        try:
            item_input, items = bindings.loop_items(node, parameters, artifacts)
        except TaskError as exc:
            self._fail(node, str(exc))
            return
        item_type = ir.parameter_type(ir.input_parameters(component).get(item_input, {}))
        for index, item in enumerate(items):
            scope_parameters, scope_artifacts = dict(parameters), dict(artifacts)
            if "artifactIterator" in node.spec:
                scope_artifacts[item_input] = item
            else:
                scope_parameters[item_input] = coerce(item, item_type)
            scope = self._new_scope(
                f"{node.path}/iteration-{index}", component, scope_parameters, scope_artifacts, owner=node
            )
            node.pending_iterations.append((index, scope))
        if not items:
            self._succeed(node, bindings.collect_iterations(node))
            return
        self._start_iterations(node)

    def _start_iterations(self, node: Node) -> None:
        """Start iterations while the loop's parallelism limit allows (0 = no limit); end the loop after its last.

        Called when the loop starts and again each time an iteration ends. Starting an
        iteration only queues its scope for the walk (``_advance``), so an iteration that ends
        at once (all cache hits) calls back here after this call has returned, not inside it.
        """
        limit = int(node.spec.get("iteratorPolicy", {}).get("parallelismLimit") or 0)
        while node.pending_iterations and (not limit or node.active_iterations < limit):
            if self._failed:  # no new work after a failure: the iterations not started never run
                node.dropped_iterations += len(node.pending_iterations)
                node.pending_iterations.clear()
                break
            index, scope = node.pending_iterations.popleft()
            node.iterations[index] = scope
            scope.record_id = self.store.start_task(
                task_id=new_id(),
                run_id=self.run.id, path=scope.path, name=f"{node.display_name}-iteration-{index}",
                kind="iteration",
                component=node.component_name, parent_id=node.record_id,
                inputs={"parameters": scope.parameters, "artifacts": scope.artifacts},
            )
            node.active_iterations += 1
            self._advance(scope)
        if node.state == RUNNING and not node.pending_iterations and not node.active_iterations:
            self._loop_finished(node)

    def _loop_finished(self, node: Node) -> None:
        """Every started iteration ended: the loop fails with its first failed iteration, or succeeds."""
        if node.failed_iteration is not None:
            self._dag_failed(node, node.failed_iteration.first_failure())
        elif node.dropped_iterations:
            self._dag_failed(node, None, f"{node.dropped_iterations} iteration(s) not started: the run failed")
        else:
            self._succeed(node, bindings.collect_iterations(node))

    def _scope_finished(self, scope: Scope) -> None:
        scope.finished = True
        owner = scope.owner
        failed = scope.first_failure()
        if scope.record_id:  # a loop iteration has a row of its own
            self.store.finish_task(
                scope.record_id, state=FAILED if failed else SUCCEEDED,
                error=f"task {failed.display_name!r} failed" if failed else None,
                outputs=None if failed else bindings.dag_outputs(scope).to_json(),
            )
        if owner is None or owner.state != RUNNING:
            return
        if owner.is_loop:
            owner.active_iterations -= 1
            if failed and owner.failed_iteration is None:
                owner.failed_iteration = scope
            self._start_iterations(owner)  # the next iteration, or the loop's end
        elif failed:
            self._dag_failed(owner, failed)
        else:
            self._succeed(owner, bindings.dag_outputs(scope))

    # --- executors ------------------------------------------------------------------------
    def _start_executor(
        self, node: Node, component: dict[str, Any], parameters: dict[str, Any], artifacts: Artifacts
    ) -> None:
        label = component["executorLabel"]
        executor = ir.executor(self.spec, label)
        inputs = {"parameters": parameters, "artifacts": artifacts}
        previous = self._previous.get(node.path)
        if previous is not None:
            self._reuse(node, previous)
            return
        if "importer" in executor:
            self._record_start(node, "importer", None, inputs, state=PENDING)
            workspace = self._workspace()
            began = self._starter(node)

            def imported(_grant: Grant) -> TaskOutcome:
                began(None)
                return self._import(executor["importer"], component, parameters, workspace)

            self._submit(node, imported)
            return
        if "container" not in executor:
            self._record_start(node, next(iter(executor), "unknown"), None, inputs)
            self._fail(node, f"executor kind {next(iter(executor), 'unknown')!r} is not supported")
            return
        container = executor["container"]
        try:
            log_path = task_log_file(self.settings.logs_dir, self.run.id, node.path)
        except UnsafePath as exc:  # a run recorded before its names were checked
            self._record_start(node, "container", container.get("image"), inputs)
            self._fail(node, str(exc))
            return
        # PENDING until its process starts: it may wait for the resource budget and a process slot first.
        self._record_start(node, "container", container.get("image"), inputs, log_path, state=PENDING)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            produced = builtin_task(
                container.get("image", ""),
                parameters,
                self.settings.volumes_dir,
                self.context["pipeline_job_resource_name"],
            )
        except PlatformError as exc:
            self._fail(node, str(exc))
            return
        if produced is not None:  # kfp-kubernetes CreatePVC / DeletePVC
            self.store.update_task(node.record_id or "", started_at=utcnow())
            self._succeed(node, Outputs(parameters=produced))
            return
        try:
            resources = ResourceRequest() if self.ignore_resources else task_request(with_inputs(container, parameters))
        except ValueError as exc:
            self._fail(node, f"invalid resources: {exc}")
            return
        try:
            policy = RetryPolicy.from_spec(node.spec.get("retryPolicy"))
        except DurationError as exc:  # an IR stored before its durations were checked at submission
            self._fail(node, str(exc))
            return
        impossible = self.budget.impossible(resources)
        if impossible:
            self._fail(node, impossible)
            return
        if caching_enabled(node.spec):
            platform = ir.kubernetes_config(self.run.platform_spec, label)
            try:
                node.cache_key = cache_key(
                    component, container, platform, parameters, artifacts, node.recursion_depth()
                )
            except Exception as exc:  # an input we cannot read to hash: no caching; the task will say why
                node.cache_key = None
                with open(log_path, "a", encoding="utf-8") as log:
                    log.write(f"[millpond] not cached: {type(exc).__name__}: {exc}\n")
            max_age = self.limits.cache_staleness_s.get(str(node.spec.get("componentRef", {}).get("name")))
            hit = lookup(self.store, node.cache_key, max_age) if self.use_cache else None
            if hit is not None:
                outputs, source = hit
                log_path.write_text(f"[millpond] cache hit: reusing the outputs of task {source}\n")
                self.store.update_task(node.record_id or "", cached=True, started_at=utcnow())
                self._succeed(node, outputs, record_artifacts=False)
                return
        workspace = self._workspace()
        request = TaskRequest(
            run_id=self.run.id,
            run_name=self.context["pipeline_job_resource_name"],
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
        if workspace is not None:
            request.extra_binds.append(Bind(workspace, bindings.WORKSPACE_PATH))
        try:
            platform = self._platform(node, label, parameters)
        except PlatformError as exc:
            self._fail(node, str(exc))
            return
        request.extra_env.update(platform.env)
        request.extra_binds.extend(platform.binds)
        request.datasets = list(platform.dataset_binds)
        request.carried = list(platform.scratch)  # its secret, config-map and empty-dir folders
        request.timeout_s = platform.timeout_s
        late = self._deadline_problem(node, request)
        if late is not None:
            platform.cleanup()
            self._fail(node, late)
            return
        if platform.notes:
            with open(log_path, "a", encoding="utf-8") as log:
                log.writelines(f"[millpond] {note}\n" for note in platform.notes)
        if platform.labels or platform.annotations:
            self.store.update_task(
                node.record_id or "", pod_metadata={"labels": platform.labels, "annotations": platform.annotations}
            )
        request.on_start = self._starter(node)
        queueing = task_queueing(platform.labels, platform.annotations)
        if queueing is not None:
            try:
                self._enqueue(node, queueing, resources)
            except UserError as exc:
                platform.cleanup()
                self._fail(node, str(exc))
                return
        request.demand = demand(resources)
        if self.settings.ray_address and platform.datasets:  # prefer the node caching the task's datasets
            from millpond.datasets.placement import preferred_node_of

            preferred = preferred_node_of([(name, "default") for name in platform.datasets], self.settings)
            request.demand = replace(request.demand, prefer_node=preferred)

        def work(grant: Grant) -> TaskOutcome:
            try:
                return self._attempts(request, policy, grant, self.queues.cancel_of(node.path) or self.cancel)
            finally:
                if self.queues.evicted(node.path):  # it runs again once re-admitted
                    self._cleanups[node.path] = platform.cleanup
                else:
                    platform.cleanup()  # secret files live only while the task runs

        self._submit(node, work, resources, log_path)

    def _apply_limits(self, limits: WorkflowLimits) -> None:
        """An Argo workflow's ``parallelism`` (fewer task processes at once) and ``activeDeadlineSeconds``
        (counted from when this engine starts or resumes the run)."""
        self.limits = limits
        if limits.parallelism and limits.parallelism < self.max_parallel:
            self.launcher = ContainerLauncher(self.runner, threading.Semaphore(limits.parallelism))
        self._deadline = time.monotonic() + limits.deadline_s if limits.deadline_s else None

    def _deadline_problem(self, node: Node, request: TaskRequest) -> str | None:
        """Cut ``request``'s time limit to what is left of the workflow's deadline; the error when none is.

        An exit task (ALL_UPSTREAM_TASKS_COMPLETED) is exempt: it runs after a failure, deadline or not.
        """
        exit_task = node.spec.get("triggerPolicy", {}).get("strategy") == "ALL_UPSTREAM_TASKS_COMPLETED"
        if self._deadline is None or exit_task:
            return None
        left = self._deadline - time.monotonic()
        if left <= 0:
            return f"{self._deadline_text()} before it started"
        if request.timeout_s is None or left < request.timeout_s:
            request.timeout_s = left
            self._cut_by_deadline.add(node.path)
        return None

    def _deadline_text(self) -> str:
        return f"the workflow's activeDeadlineSeconds ({self.limits.deadline_s}s) passed"

    def _starter(self, node: Node) -> Callable[[int | None], None]:
        """What a worker thread calls when ``node``'s work really begins (its process, with a pid): the
        first call records the task RUNNING with its ``started_at``; a retry's only records its new pid."""
        task_id, path, name = node.record_id or "", node.path, node.display_name
        began = self._began[node.path] = threading.Event()

        def started(pid: int | None) -> None:
            process = {"pid": pid, "pid_start": start_ticks(pid)} if pid is not None else {}
            if began.is_set():
                if process:  # a retry on a Ray node has no pid of this machine to record
                    self.store.update_task(task_id, **process)
                return
            began.set()
            self.store.update_task(task_id, state=RUNNING, started_at=utcnow(), error=None, **process)
            self.listener.task_changed(path, name, RUNNING, None)

        return started

    def _platform(self, node: Node, label: str, parameters: dict[str, Any]) -> TaskPlatform:
        """Environment, mounts and settings from the task's kfp-kubernetes config."""

        def resolve(binding: dict[str, Any]) -> Any:
            found, value = bindings.resolve_parameter(node.scope, binding, self.context)
            return value if found else None

        # A subPath may hold the launcher's placeholders (a kfp 1.x one: ``{{workflow.uid}}_{{pod.name}}``).
        placeholders = PlaceholderContext(
            {"inputs": {"parameterValues": dict(parameters)}},
            job={**self.context, "pipeline_task_name": node.display_name, "pipeline_task_uuid": node.record_id or ""},
        )

        return prepare_platform(
            ir.kubernetes_config(self.run.platform_spec, label),
            resolve=resolve,
            render=placeholders.substitute,
            configs=self.configs,
            volumes_dir=self.settings.volumes_dir,
            scratch_dir=self.settings.staging_dir / f"{node.record_id}-platform",
            pod=PodInfo(
                name=f"{self.context['pipeline_job_resource_name']}-{node.name}"[:63], uid=node.record_id or ""
            ),
            remote=bool(getattr(self.runner, "mounts_datasets", False)),
            volumes_shared=self.settings.is_shared(self.settings.volumes_dir),
        )

    def _submit(
        self,
        node: Node,
        work: Callable[[Grant], TaskOutcome],
        resources: ResourceRequest = ResourceRequest(),
        log_path: Path | None = None,
        noted: bool = False,
    ) -> _Waiting | None:
        """Hand ``work`` to a worker once its queue admitted it (a queued task) and ``resources`` fit what
        the running tasks (of every run and job of this home: the machine-wide ledger) leave free."""
        if node.path in self.queues.tasks:
            self._queued[node.path] = _Waiting(node, work, resources, log_path)
            try:
                admitted = self.queues.admitted(node.path)
            except MillpondError as exc:
                self._unqueue(node.path)
                self._fail(node, str(exc))
                return None
            if not admitted:  # waits for its queue: not the ledger's refusal (None: nothing to note)
                self._waiting.append(_Waiting(node, work, resources, log_path, noted))
                return None
        grant = self.budget.acquire(resources, self._holder(node))
        if grant is None:
            self._waiting.append(_Waiting(node, work, resources, log_path, noted))
            return self._waiting[-1]
        warning = self.budget.fallback_warning(resources)
        if warning and log_path is not None:
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(f"[millpond] warning: {warning}\n")
        future = self.pool.submit(work, grant)
        self._futures[future] = node
        self._holding[future] = grant
        return None

    def _holder(self, node: Node) -> Holder:
        """Who holds a task's grant in the ledger: this engine's process (its death frees it)."""
        pid, ticks = self._identity
        name = f"{self.context['pipeline_job_resource_name']}/{node.path}"
        return Holder(kind="task", name=name, pid=pid, start=ticks)

    def _release_all(self) -> None:
        """Give back every grant still held (a walk that ends by an exception leaves some).

        A ledger that cannot be written now keeps them only until this process ends: the next
        request after that reclaims them.
        """
        holding, self._holding = self._holding, {}
        for grant in holding.values():
            try:
                self.budget.release(grant)
            except MillpondError:
                break

    def _start_waiting(self, note: bool = False) -> None:
        """Start the waiting tasks that fit now; with ``note``, the log of a task still waiting says
        what for, once (not at its first try: its own run may be about to give back what it needs)."""
        waiting, self._waiting = self._waiting, []
        refused: list[ResourceRequest] = []  # in this pass: a request at least as large as one of these fails too
        reasons: dict[ResourceRequest, str] = {}
        for entry in waiting:
            if self.cancel.is_set():
                self._never_started(entry.node, "canceled while it waited for resources")
                continue
            noted = entry.noted or note
            if any(_covers(entry.resources, smaller) for smaller in refused):
                self._waiting.append(_Waiting(entry.node, entry.work, entry.resources, entry.log_path, noted))
            elif self._submit(entry.node, entry.work, entry.resources, entry.log_path, noted) is not None:
                refused.append(entry.resources)
            else:
                continue
            if note and not entry.noted and entry.log_path is not None:
                if entry.resources not in reasons:
                    reasons[entry.resources] = self.budget.why_waiting(entry.resources)
                with open(entry.log_path, "a", encoding="utf-8") as log:
                    log.write(f"[millpond] waiting for resources: {reasons[entry.resources]}\n")

    def _never_started(self, node: Node, reason: str) -> None:
        """A task that waited (PENDING) and will not run: CANCELED, with no start time."""
        self._unqueue(node.path, reason)
        node.state, node.error = CANCELED, reason
        node.scope.settle(node)
        if node.record_id:
            self.store.finish_task(node.record_id, state=CANCELED, error=reason)
        self.listener.task_changed(node.path, node.display_name, CANCELED, reason)

    def _attempts(self, request: TaskRequest, policy: RetryPolicy, grant: Grant,
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
            lambda: self.launcher.launch(request, cancel),
            policy,
            cancel,
            request.log_path,
            on_retry=lambda attempt: self.store.update_task(request.task_id, attempts=attempt),
        )

    # --- Kueue: queued tasks (pipelines.queueing, pipelines.task_queues) ----------------------
    def _enqueue(self, node: Node, queueing: TaskQueueing, resources: ResourceRequest) -> None:
        """Make ``node`` a workload of its queue (UserError when the run's experiment is no namespace name)."""
        project = project_of(self.store.experiment_name(self.run.experiment_id))
        name = f"{self.context['pipeline_job_resource_name']}-{node.name}"[:63]  # its pod's name
        self.queues.add(node.path, task_workload(node.record_id or "", name, project, resources, queueing,
                                                 time.time()))

    def _show_queued(self, path: str, reason: str, place: str, new: bool) -> None:
        """Why a queued task waits, with its place, on its row (``millpond runs get``, the API's task error);
        in its log when the reason itself is ``new`` (not at each move up the queue)."""
        entry = self._queued.get(path)
        if entry is None or not entry.node.record_id:
            return
        reason = f"{reason} ({place})" if place else reason
        self.store.update_task(entry.node.record_id, error=reason)
        if new and entry.log_path is not None:
            with open(entry.log_path, "a", encoding="utf-8") as log:
                log.write(f"[millpond] waiting for its queue: {reason}\n")
        self.listener.task_changed(path, entry.node.display_name, PENDING, reason)

    def _evicted(self, node: Node, future: Future[TaskOutcome]) -> bool:
        """Whether the task ended because its workload was evicted (not on its own, not by the run's cancel)."""
        if not self.queues.evicted(node.path) or self.cancel.is_set() or future.exception() is not None:
            return False
        return not future.result().succeeded

    def _requeue(self, node: Node) -> None:
        """An evicted task's process has stopped: PENDING again, waiting for its queue to admit it again."""
        message = self.queues.evicted(node.path)
        entry = self._queued[node.path]
        self.queues.requeue(node.path)
        self._began[node.path].clear()  # its next start records RUNNING again
        why = f"Evicted ({eviction_reason(message)}): {message}; requeued"
        if entry.log_path is not None:
            with open(entry.log_path, "a", encoding="utf-8") as log:
                log.write(f"[millpond] {why}\n")
        self.store.update_task(node.record_id or "", state=PENDING, error=why)
        self.listener.task_changed(node.path, node.display_name, PENDING, why)
        self._waiting.append(_Waiting(node, entry.work, entry.resources, entry.log_path))

    def _unqueue(self, path: str, reason: str = "the task ended") -> None:
        """A queued task is done: its workload finished (its quota to the next), its platform cleaned up."""
        self._queued.pop(path, None)
        self._cleanups.pop(path, lambda: None)()
        self.queues.finish(path, reason)

    def _unqueue_all(self, reason: str) -> None:
        for cleanup in self._cleanups.values():
            cleanup()
        self._cleanups.clear()
        self.queues.finish_all(reason)

    def _import(
        self, importer: dict[str, Any], component: dict[str, Any], parameters: dict[str, Any], workspace: Path | None
    ) -> TaskOutcome:
        try:
            if self.settings.ray_address:  # the tasks reading it run on Ray nodes: a file here is not theirs
                problem = unshared_file(importer_uri(importer, parameters), self.settings)
                if problem:
                    return TaskOutcome(succeeded=False, error=problem)
            outputs = run_importer(importer, component, parameters, workspace)
        except MillpondError as exc:
            return TaskOutcome(succeeded=False, error=str(exc))
        return TaskOutcome(succeeded=True, parameters=outputs.parameters, artifacts=outputs.artifacts)

    def _workspace(self) -> Path | None:
        """The run's workspace folder, when the pipeline declares one (kfp's PipelineConfig)."""
        platform = self.run.platform_spec or {}
        config = platform.get("platforms", {}).get("kubernetes", {}).get("pipelineConfig", {})
        if "workspace" not in config:
            return None
        folder = contained_path(self.settings.home / "workspaces", self.run.id, what="run id")
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def _reuse(self, node: Node, previous: Task) -> None:
        """On resume: a task that already succeeded keeps its outputs and does not run again."""
        node.record_id = previous.id
        node.state = SUCCEEDED
        node.outputs = Outputs.from_json(previous.outputs)
        node.scope.settle(node)
        self.listener.task_changed(node.path, node.display_name, SUCCEEDED, None)
        self._advance(node.scope)

    # --- state changes ------------------------------------------------------------------
    def _parent_record(self, node: Node) -> str | None:
        scope = node.scope
        if scope.record_id:
            return scope.record_id
        return scope.owner.record_id if scope.owner else None

    def _record_start(
        self, node: Node, kind: str, image: str | None, inputs: dict[str, Any], log_path: Path | None = None,
        state: str = RUNNING,
    ) -> None:
        """Record the task's row: RUNNING (started now), or PENDING (waiting; ``_starter`` marks its start)."""
        node.record_id = self.store.start_task(
            run_id=self.run.id, path=node.path, name=node.display_name, kind=kind, component=node.component_name,
            parent_id=self._parent_record(node), image=image, inputs=inputs,
            log_path=str(log_path) if log_path else None, task_id=node.record_id, state=state,
        )
        node.state, node.kind = RUNNING, kind  # the walk's own state: started, not final
        self.listener.task_changed(node.path, node.display_name, state, None)

    def _decide(self, node: Node, state: str, reason: str | None) -> None:
        """Record a task that will not run (skipped)."""
        node.record_id = self.store.start_task(
            run_id=self.run.id, path=node.path, name=node.display_name,
            kind=(
                "loop" if node.is_loop
                else "dag" if "dag" in ir.component(self.spec, node.component_name)
                else "container"
            ),
            component=node.component_name, parent_id=self._parent_record(node), state=state, task_id=node.record_id,
        )
        self.store.update_task(node.record_id, error=reason)
        node.state, node.error = state, reason
        node.scope.settle(node)
        self.listener.task_changed(node.path, node.display_name, state, reason)

    def _fail(self, node: Node, error: str, exit_code: int | None = None, attempts: int | None = None) -> None:
        node.state, node.error = FAILED, error
        node.scope.settle(node)
        self._failed.append(f"task {node.display_name!r} failed: {error}")
        if node.record_id:
            self.store.finish_task(node.record_id, state=FAILED, error=error, exit_code=exit_code, attempts=attempts)
        self.listener.task_changed(node.path, node.display_name, FAILED, error)
        self._advance(node.scope)

    def _dag_failed(self, node: Node, failed: Node | None, reason: str = "failed") -> None:
        """A sub-DAG or loop whose task failed: fails too, without counting the failure twice."""
        node.state = FAILED
        node.scope.settle(node)
        node.error = f"task {failed.display_name!r} failed: {failed.error}" if failed else reason
        if node.record_id:
            self.store.finish_task(node.record_id, state=FAILED, error=node.error)
        self.listener.task_changed(node.path, node.display_name, FAILED, None)
        self._advance(node.scope)

    def _succeed(
        self, node: Node, outputs: Outputs, exit_code: int | None = None, attempts: int | None = None,
        record_artifacts: bool = True, cache_entry: tuple[str, dict[str, Any]] | None = None,
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
                artifacts=artifacts, run_id=self.run.id, attempts=attempts, cache_entry=cache_entry,
            )
        self.listener.task_changed(node.path, node.display_name, SUCCEEDED, None)
        self._advance(node.scope)

    def _task_finished(self, node: Node, outcome: TaskOutcome) -> None:
        if outcome.succeeded:
            outputs = Outputs(outcome.parameters, outcome.artifacts)
            entry = (node.cache_key, cache_entry(outputs)) if node.cache_key else None
            self._succeed(node, outputs, outcome.exit_code, outcome.attempts, cache_entry=entry)
        else:
            error = outcome.error or "failed"
            if node.path in self._cut_by_deadline and self._deadline is not None and time.monotonic() >= self._deadline:
                error = f"{self._deadline_text()}: {error}"
            self._fail(node, error, outcome.exit_code, outcome.attempts)

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

A container or importer task goes through the task policies in ``pipelines.policies.order``;
``task_records`` writes every state change; ``admission`` holds the waiting and running tasks.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from millpond.errors import MillpondError
from millpond.pipelines import bindings
from millpond.pipelines.admission import TaskAdmission
from millpond.pipelines.caching import cache_entry
from millpond.pipelines.cancellation import CANCELING, close_tasks
from millpond.pipelines.cluster import ClusterBudget
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
from millpond.pipelines.launcher import ContainerLauncher, TaskError
from millpond.pipelines.outcomes import TaskOutcome
from millpond.pipelines.policies import order
from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import Done, Fail, Submit
from millpond.pipelines.queueing import project_of
from millpond.pipelines.resources import Budget, static_accelerator_problems
from millpond.pipelines.run_deadline import RunDeadline
from millpond.pipelines.task_queues import EngineQueues
from millpond.pipelines.task_records import Listener, Silent, TaskRecords
from millpond.pipelines.values import coerce
from millpond.pipelines.views import ComponentSpec, PipelineSpec, TaskInputs, TaskSpec
from millpond.pipelines.workflow_limits import WorkflowLimits, workflow_limits
from millpond.runners import stopping
from millpond.runners.base import Runner
from millpond.runners.containers.policy import UnusedImages
from millpond.runners.pool import PoolRunner
from millpond.runners.processes import engine_mark, own_identity
from millpond.runners.ray_cluster import RayRunner, cluster_cpus
from millpond.scheduling import Grant, Holder
from millpond.settings import Settings
from millpond.store.journal import RunJournal
from millpond.store.journal import RunRecord as Run
from millpond.store.keys import new_id, utcnow
from millpond.store.lineage import RunScope
from millpond.store.secrets import ConfigStore

__all__ = ["Engine", "Listener", "RunResult"]

_STOP_POLL_S = 0.2  # how often the walk, waiting for its tasks, looks for a stop request (SIGINT, SIGTERM)


@dataclass
class RunResult:
    state: str
    error: str | None
    outputs: Outputs


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
        self.images_not_used = UnusedImages()  # said once when the run ends (runners.containers.policy)
        self.launcher = self._new_launcher(self.max_parallel)
        self.listener = listener or Silent()
        self.cancel = threading.Event()
        self._to_walk: deque[Scope] = deque()  # scopes with ready tasks, walked one at a time (_advance)
        self._walking = False
        # Kueue: the workloads of queued tasks (pipelines.queueing), by task path
        self.queues = EngineQueues(settings, self.cancel, self._show_queued)
        self.limits = WorkflowLimits()  # a translated Argo workflow's run-wide limits (set per run)
        self.deadline = RunDeadline()  # the workflow's activeDeadlineSeconds, counted from this engine's start

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
        self._begin(run, resume)
        problems = [] if self.ignore_resources else static_accelerator_problems(self.pipeline, self.budget)
        if problems:
            refusal = "cannot run on this machine: task " + "; task ".join(problems)
            self.store.update_run(run.id, state=FAILED, error=refusal, finished_at=utcnow())
            self.listener.run_changed(FAILED, refusal)
            return RunResult(state=FAILED, error=refusal, outputs=Outputs())
        if self.pipeline.has_lightweight_tasks:
            getattr(self.runner, "warm_up", lambda: None)()  # its ~0.2 s start overlaps the first tasks' set-up
        root = self._new_scope("", self.spec["root"], dict(run.parameters), {}, owner=None)
        # Twice the process slots in threads: one task's preparation and outputs overlap another's process.
        with ThreadPoolExecutor(max_workers=2 * self.max_parallel, thread_name_prefix="millpond-task") as pool:
            self.admission.pool = pool
            try:
                self.stop.check()
                self._advance(root)
                self._run_tasks()
            except BaseException as exc:
                self._abandon(exc)
                raise
            finally:
                self.runner.close()
                self.launcher.close()
                self.admission.release_all()
                self.admission.unqueue_all("the run ended")
        state, error = self._outcome(root)
        unused = self.images_not_used.summary()
        if unused:
            getattr(self.listener, "note", lambda line: None)(unused)
        outputs = bindings.dag_outputs(root) if state == SUCCEEDED else Outputs()
        self.store.update_run(run.id, state=state, error=error, outputs=outputs.to_json(), finished_at=utcnow())
        self.listener.run_changed(state, error)
        return RunResult(state=state, error=error, outputs=outputs)

    def _begin(self, run: Run, resume: bool) -> None:
        """Set up the walk of ``run`` (its records, its limits, what its task policies read) and record it RUNNING."""
        self.run = run
        self.spec = run.pipeline_spec
        self.pipeline = PipelineSpec(run.pipeline_spec)
        self.context = {
            "pipeline_job_name": run.name,
            "pipeline_job_resource_name": f"{run.pipeline_name}-{run.id[:8]}",  # as an Argo workflow name
            "pipeline_job_uuid": run.id,
            "pipeline_root": run.pipeline_root,
        }
        lineage = RunScope(run.id, getattr(run, "namespace", "") or "", run.pipeline_name)
        self.records = TaskRecords(self.store, self.listener, run.id, self._advance,
                                   lineage if self.settings.lineage else None)
        if isinstance(self.budget, Budget):
            self.budget.namespace = self._namespace(run)
        self.admission = TaskAdmission(self.budget, self.records, self.cancel, self._holder)
        self.admission.queues = self.queues
        previous = {t.path: t for t in self.store.list_tasks(run.id) if t.state == SUCCEEDED} if resume else {}
        self._apply_limits(workflow_limits(run.platform_spec, f"run {run.id}"))
        self.tasks = RunContext(
            run=run, job=self.context, settings=self.settings, store=self.store,
            configs=self.configs.in_namespace(self._pod_namespace(run), self.settings.multi_user),
            pod_namespace=self._pod_namespace(run),
            budget=self.budget, queues=self.queues, rows=self.records, limits=self.limits, deadline=self.deadline,
            previous=previous, use_cache=self.use_cache, ignore_resources=self.ignore_resources,
            remote_datasets=bool(getattr(self.runner, "mounts_datasets", False)),
        )
        pid, ticks = self._identity = own_identity()
        self.store.update_run(
            run.id, state=RUNNING, error=None, started_at=run.started_at or utcnow(), finished_at=None,
            engine_pid=pid, engine_start=engine_mark(ticks),  # TICKS@MACHINE: other machines may share the database
        )
        self.listener.run_changed(RUNNING, None)

    def _run_tasks(self) -> None:
        """Until no task runs or waits: record each task that ends, start the waiting ones that now fit."""
        admission = self.admission
        while admission.futures or admission.waiting:
            if admission.futures:
                done, _ = wait(list(admission.futures), timeout=_STOP_POLL_S, return_when=FIRST_COMPLETED)
            else:  # only tasks waiting for what other runs or jobs hold: look again shortly
                done = set()
                self.cancel.wait(_STOP_POLL_S)
            self.stop.check()
            for future in done:
                node = admission.futures.pop(future)
                grant = admission.holding.pop(future)
                if admission.evicted(node, future):
                    self.budget.release(grant)
                    admission.requeue(node)
                    continue
                try:  # recorded finished before its resources go to another run's task
                    self._task_finished(node, future.result())
                finally:
                    self.budget.release(grant)
                    admission.unqueue(node.path)
                admission.start_waiting()
            if not done:  # another process may have given back what a waiting task needs
                admission.start_waiting(note=True)
            if self.queues.tasks:
                self.queues.evictions([node.path for node in admission.futures.values()])

    def _outcome(self, root: Scope) -> tuple[str, str | None]:
        """The run's end state and why: a FAILED or CANCELED run always names its reason."""
        if self.records.failed:
            return FAILED, self.records.failed[0]
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
        admission = self.admission
        wait(list(admission.futures))  # the runners saw the cancel flag and stopped the processes
        stopped = [*admission.futures.values(), *(waiting.node for waiting in admission.waiting)]
        admission.release_all()  # the machine-wide ledger outlives this walk (a server's engine thread)
        admission.unqueue_all(f"the run ended: {reason}")
        admission.futures.clear()
        admission.waiting.clear()
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
                self.records.decide(node, self._kind(node, self.pipeline.component(node.component_name)), SKIPPED,
                                    f"not run: {reason}")
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
        if self.records.failed:
            return "the run failed"
        skipped = next((d for d in deps if d.state == SKIPPED), None)
        if skipped:
            return f"upstream task {skipped.display_name!r} was skipped"
        return None

    def _kind(self, node: Node, component: ComponentSpec) -> str:
        return "loop" if node.is_loop else "dag" if component.is_dag else "container"

    def _start(self, node: Node) -> None:
        component = self.pipeline.component(node.component_name)
        kind = self._kind(node, component)
        node.record_id = node.record_id or new_id()
        context = {**self.context, "pipeline_task_name": node.display_name, "pipeline_task_uuid": node.record_id}
        try:
            parameters, artifacts = bindings.task_inputs(node, component.raw, context)
            condition = TaskSpec(node.spec).condition
            if condition and not condition_holds(condition, parameters):
                self.records.decide(node, kind, SKIPPED, "condition is false")
                return
        except (TaskError, ConditionError) as exc:
            self.records.start(node, kind, None, {})
            self.records.fail(node, str(exc))
            return
        inputs = TaskInputs(parameters, artifacts)
        if kind == "loop":
            self._start_loop(node, component, inputs)
        elif kind == "dag":
            self.records.start(node, "dag", None, inputs.to_json())
            child = self._new_scope(node.path, component.raw, parameters, artifacts, owner=node)
            self._advance(child)
        else:
            self._start_executor(node, component, inputs)

    # --- loops ----------------------------------------------------------------------------
    def _start_loop(self, node: Node, component: ComponentSpec, inputs: TaskInputs) -> None:
        parameters, artifacts = inputs.parameters, inputs.artifacts
        self.records.start(node, "loop", None, inputs.to_json())
        try:
            item_input, items = bindings.loop_items(node, parameters, artifacts)
        except TaskError as exc:
            self.records.fail(node, str(exc))
            return
        item_type = component.input_type(item_input)
        for index, item in enumerate(items):
            scope_parameters, scope_artifacts = dict(parameters), dict(artifacts)
            if TaskSpec(node.spec).iterates_artifacts:
                scope_artifacts[item_input] = item
            else:
                scope_parameters[item_input] = coerce(item, item_type)
            scope = self._new_scope(
                f"{node.path}/iteration-{index}", component.raw, scope_parameters, scope_artifacts, owner=node
            )
            node.pending_iterations.append((index, scope))
        if not items:
            self.records.succeed(node, bindings.collect_iterations(node))
            return
        self._start_iterations(node)

    def _start_iterations(self, node: Node) -> None:
        """Start iterations while the loop's parallelism limit allows (0 = no limit); end the loop after its last.

        Called when the loop starts and again each time an iteration ends. Starting an
        iteration only queues its scope for the walk (``_advance``), so an iteration that ends
        at once (all cache hits) calls back here after this call has returned, not inside it.
        """
        limit = TaskSpec(node.spec).parallelism_limit
        while node.pending_iterations and (not limit or node.active_iterations < limit):
            if self.records.failed:  # no new work after a failure: the iterations not started never run
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
            self.records.dag_failed(node, node.failed_iteration.first_failure())
        elif node.dropped_iterations:
            self.records.dag_failed(node, None, f"{node.dropped_iterations} iteration(s) not started: the run failed")
        else:
            self.records.succeed(node, bindings.collect_iterations(node))

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
            self.records.dag_failed(owner, failed)
        else:
            self.records.succeed(owner, bindings.dag_outputs(scope))

    # --- executors: the task policies (pipelines.policies.order), then a worker -------------
    def _start_executor(self, node: Node, component: ComponentSpec, inputs: TaskInputs) -> None:
        """Apply the task policies in their order; act on the first verdict that is not Proceed."""
        launch = TaskLaunch(node, component, self.pipeline.executor(component.executor_label), inputs)
        verdict = order.prepare(launch, self.tasks)
        if isinstance(verdict, Fail):
            launch.release()
            if not launch.recorded:  # failed before its row was made: the failure needs one
                container = launch.executor.container
                kind = "container" if container is not None else launch.executor.kind
                self.records.start(node, kind, container.image_or_none if container else None, inputs.to_json())
            self.records.fail(node, verdict.error)
        elif isinstance(verdict, Done):
            self._done_early(node, verdict)
        elif isinstance(verdict, Submit):
            self.admission.submit(node, verdict.work)
        else:
            self._launch(launch)

    def _done_early(self, node: Node, done: Done) -> None:
        """A task that ended with no process: reused on resume, a built-in, or a cache hit."""
        if done.how == "reused":
            self.records.reuse(node, done.reused_id or "", done.outputs)
            return
        if done.how == "cached":
            self.store.update_task(node.record_id or "", cached=True, started_at=utcnow())
        else:
            self.store.update_task(node.record_id or "", started_at=utcnow())
        self.records.succeed(node, done.outputs, record_artifacts=done.how != "cached", cached_from=done.cached_from)

    def _launch(self, launch: TaskLaunch) -> None:
        """Hand a container task every policy let through to a worker: its attempts, then its platform's cleanup."""
        node, request, platform = launch.node, launch.the_request(), launch.platform
        request.on_start = self.records.starter(node)
        if platform is not None:
            self.records.mounted(node, platform.datasets, self._pod_namespace(self.run))

        def work(grant: Grant) -> TaskOutcome:
            try:
                cancel = self.queues.cancel_of(node.path) or self.cancel
                return self.admission.attempts(self.launcher, request, launch.retry, grant, cancel)
            finally:
                if platform is not None:
                    if self.queues.evicted(node.path):  # it runs again once re-admitted
                        self.admission.cleanups[node.path] = platform.cleanup
                    else:
                        platform.cleanup()  # secret files live only while the task runs

        self.admission.submit(node, work, launch.resources, launch.log_path)

    def _apply_limits(self, limits: WorkflowLimits) -> None:
        """An Argo workflow's ``parallelism`` (fewer task processes at once) and ``activeDeadlineSeconds``
        (counted from when this engine starts or resumes the run)."""
        self.limits = limits
        if limits.parallelism and limits.parallelism < self.max_parallel:
            self.launcher = self._new_launcher(limits.parallelism)
        self.deadline = RunDeadline(limits.deadline_s)

    def _new_launcher(self, parallelism: int) -> ContainerLauncher:
        launcher = ContainerLauncher(self.runner, threading.Semaphore(parallelism))
        launcher.images_not_used = self.images_not_used
        return launcher

    def _holder(self, node: Node) -> Holder:
        """Who holds a task's grant in the ledger: this engine's process (its death frees it), charged against the
        run's namespace's ResourceQuotas."""
        pid, ticks = self._identity
        name = f"{self.context['pipeline_job_resource_name']}/{node.path}"
        namespace = self.budget.namespace if isinstance(self.budget, Budget) else ""
        return Holder(kind="task", name=name, pid=pid, start=ticks, namespace=namespace)

    def _pod_namespace(self, run: Run) -> str:
        """The namespace of the run's pods, where the Secrets and ConfigMaps its tasks name are looked up: the run's
        own in multi-user mode; ``default`` in single-user mode, as ``policies.platform`` gives its pods."""
        return (self._namespace(run) or "default") if self.settings.multi_user else "default"

    def _namespace(self, run: Run) -> str:
        """The run's namespace (KFP's multi-user runs carry one), else its project: its experiment's name lower-cased
        (``pipelines.queueing``); "" when that is no namespace name (then no ResourceQuota applies)."""
        given = getattr(run, "namespace", "")
        if isinstance(given, str) and given:
            return given
        try:
            return project_of(self.store.experiment_name(run.experiment_id) or "default")
        except MillpondError:  # the experiment names no namespace
            return ""

    def _show_queued(self, path: str, reason: str, place: str, new: bool) -> None:
        self.admission.show_queued(path, reason, place, new)

    def _task_finished(self, node: Node, outcome: TaskOutcome) -> None:
        if outcome.succeeded:
            outputs = Outputs(outcome.parameters, outcome.artifacts)
            entry = (node.cache_key, cache_entry(outputs)) if node.cache_key else None
            self.records.succeed(node, outputs, outcome.exit_code, outcome.attempts, cache_entry=entry)
        else:
            error = self.deadline.explain(node.path, outcome.error or "failed")
            self.records.fail(node, error, outcome.exit_code, outcome.attempts)

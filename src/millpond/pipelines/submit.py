"""Start a run: bind arguments, record it, and execute it with the engine.

The CLI, the Python API and (later) the REST server all come through here, so a run
started one way looks the same from the others.
"""

from __future__ import annotations

import datetime as dt
import shutil
from dataclasses import dataclass
from typing import Any

from millpond.errors import UserError
from millpond.pipelines.arguments import bind_arguments
from millpond.pipelines.attempt_folders import leftovers
from millpond.pipelines.cancellation import CANCELED, CANCELING, record_cancelled
from millpond.pipelines.cluster import check_cluster
from millpond.pipelines.engine import Engine, Listener, RunResult
from millpond.pipelines.loader import LoadedPipeline
from millpond.pipelines.names import check_display_name
from millpond.pipelines.platform import missing_configs
from millpond.pipelines.queueing import project_of, queued, with_queue
from millpond.runners.base import Runner
from millpond.runners.processes import is_running, kill_group
from millpond.scheduling.queues.submission import check_priority, check_queue_name, os_user
from millpond.settings import Settings
from millpond.store.artifacts import normalize_root
from millpond.store.journal import DEFAULT_EXPERIMENT, RunJournal, RunRecord
from millpond.store.secrets import ConfigStore


@dataclass(frozen=True)
class RunRequest:
    pipeline: LoadedPipeline
    texts: dict[str, str]
    values: dict[str, Any]
    params_file: str | None = None
    pipeline_root: str | None = None
    experiment: str | None = None
    run_name: str | None = None
    queue: str = ""  # Kueue's LocalQueue for its tasks (pipelines.queueing); "" leaves them to the ledger alone
    priority: str = ""  # a WorkloadPriorityClass: refused at once when none of that name exists
    user: str = ""  # who asks: the API caller; "" is this process's OS user
    namespace: str = ""  # the experiment's namespace (multi-user API runs); "" in single-user mode


def _pod_namespace(request: RunRequest) -> str:
    """A multi-user run's namespace, as the engine gives its pods: the one the API recorded, else its project
    (its experiment's name lower-cased; ``default`` when that is no namespace name)."""
    if request.namespace:
        return request.namespace
    try:
        return project_of(request.experiment or DEFAULT_EXPERIMENT)
    except UserError:
        return "default"


def prepare_run(store: RunJournal, settings: Settings, request: RunRequest) -> RunRecord:
    """Validate everything, then record the run (PENDING). Raises UserError before writing anything."""
    if request.run_name is not None:
        check_display_name("the run name", request.run_name)
    if request.experiment is not None:
        check_display_name("the experiment name", request.experiment)
    arguments = bind_arguments(request.pipeline.spec, request.texts, request.values, request.params_file)
    root = normalize_root(request.pipeline_root or str(settings.default_pipeline_root))
    if settings.ray_address:  # cluster mode: Ray answers, every node reaches the root, every request fits a node
        check_cluster(settings, root, request.pipeline.spec, request.pipeline.platform_spec)
    check_queue_name(request.queue)
    check_priority(request.priority)
    platform_spec = with_queue(request.pipeline.spec, request.pipeline.platform_spec, request.queue,
                               request.priority, request.user or os_user())
    if queued(request.pipeline.spec, platform_spec) and not request.namespace:
        project_of(request.experiment or DEFAULT_EXPERIMENT)  # single-user: the experiment names the namespace
    # the Secrets its tasks name are its pods' namespace's: the run's in multi-user mode, else ``default``
    namespace = _pod_namespace(request) if settings.multi_user else "default"
    configs = ConfigStore(settings.home).in_namespace(namespace, settings.multi_user)
    missing = missing_configs(request.pipeline.platform_spec, configs)
    if missing:
        if namespace == "default":
            problems = "; ".join(f"{kind} {name!r} (used by {task}) not found" for kind, name, task in missing)
        else:  # the kubelet's words, in the run's namespace
            problems = "; ".join(f'{kind} "{name}" (used by {task}) not found in namespace "{namespace}"'
                                 for kind, name, task in missing)
        kind, name, _task = missing[0]
        where = "" if namespace == "default" else f" -n {namespace}"
        raise UserError(
            f"{request.pipeline.source}: {problems}"
            f" (create it with: millpond {kind} create {name}{where} --from-literal KEY=VALUE)"
        )
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    record = store.create_run(
        name=request.run_name or f"{request.pipeline.name}-{stamp}",
        experiment=request.experiment or DEFAULT_EXPERIMENT,
        pipeline_name=request.pipeline.name,
        pipeline_spec=request.pipeline.spec,
        platform_spec=platform_spec,
        parameters=arguments,
        pipeline_root=root,
        namespace=request.namespace,
    )
    if request.pipeline.workflow is not None:  # kfp 1.x: the UI draws the workflow, the API returns it
        store.update_run(record.id, workflow=request.pipeline.workflow)
    return record


def resume_run(
    store: RunJournal,
    settings: Settings,
    run_id: str,
    listener: Listener | None = None,
    only_finished: bool = False,
) -> tuple[RunRecord, RunResult]:
    """Continue a run whose engine died, or re-run the failed part of a finished run.

    Tasks that SUCCEEDED keep their outputs and do not run again; tasks that were in flight
    when the engine died are stopped if their processes linger, and run again.
    """
    run = store.get_run(run_id)
    if run.state == "SUCCEEDED":
        raise UserError(f"run {run.id} already SUCCEEDED; nothing to resume")
    if run.state in (CANCELING, CANCELED):
        if not only_finished:  # only an explicit retry brings back a run the user cancelled
            raise UserError(f"run {run.id} was cancelled; to run it again use: millpond runs retry {run.id}")
        if run.state == CANCELING:
            if is_running(run.engine_pid, run.engine_start):
                raise UserError(
                    f"run {run.id} is still stopping its tasks (engine process {run.engine_pid}); retry it then"
                )
            record_cancelled(store, run.id, run.error or "cancelled")  # its engine died while cancelling
    if run.state in ("RUNNING", "PENDING"):
        if only_finished:
            raise UserError(
                f"run {run.id} is {run.state}; retry takes a finished run (use 'runs resume' for a killed one)"
            )
        if is_running(run.engine_pid, run.engine_start):
            raise UserError(f"run {run.id} is still running (engine process {run.engine_pid})")
    in_flight = [task for task in store.list_tasks(run.id) if task.state == "RUNNING"]
    for task in in_flight:
        kill_group(task.pid, task.pid_start)
    for leftover in leftovers(settings.staging_dir, run.id, [task.id for task in in_flight]):
        shutil.rmtree(leftover, ignore_errors=True)
    result = Engine(store, settings, listener=listener).execute(run, resume=True)
    return store.get_run(run.id), result


def execute_run(
    store: RunJournal,
    settings: Settings,
    run: RunRecord,
    listener: Listener | None = None,
    runner: Runner | None = None,
    use_cache: bool = True,
    ignore_resources: bool = False,
) -> RunResult:
    engine = Engine(
        store, settings, runner=runner, listener=listener, use_cache=use_cache, ignore_resources=ignore_resources
    )
    return engine.execute(run)

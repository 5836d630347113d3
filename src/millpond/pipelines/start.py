"""Start a run as the KFP API describes one: inline IR or an uploaded pipeline version, in an experiment.

``POST /runs`` and the recurring-run scheduler both need this, and the scheduler is no HTTP
client: it calls :func:`start_run` with the recurring run's pipeline, parameters and
experiment, and gets the run (or an error saying why not) back. Executing the run is the
caller's ``launch`` (the server hands it to a worker process).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from millpond.errors import PreconditionError, UserError
from millpond.pipelines.loader import LoadedPipeline, load_ir_text
from millpond.pipelines.submit import RunRequest, prepare_run
from millpond.settings import Settings
from millpond.store.catalog import PipelineStore
from millpond.store.journal import DEFAULT_EXPERIMENT
from millpond.store.models import PipelineVersion, Run
from millpond.store.runs import RunStore


@dataclass(frozen=True)
class StartRequest:
    """What a run is started from: ``pipeline_spec`` (and its platform spec), or an uploaded version."""

    display_name: str | None = None
    pipeline_spec: dict[str, Any] | None = None
    platform_spec: dict[str, Any] | None = None
    pipeline_id: str | None = None
    pipeline_version_id: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    pipeline_root: str | None = None
    experiment_id: str | None = None
    recurring_run_id: str | None = None
    queue: str = ""  # Kueue's LocalQueue for its tasks (pipelines.queueing)
    priority: str = ""  # a WorkloadPriorityClass
    user: str = ""  # the API caller
    namespace: str = ""  # without an experiment: the namespace whose Default experiment it goes to


def resolve_version(catalog: PipelineStore, pipeline_id: str | None, version_id: str | None) -> PipelineVersion:
    """The version a run refers to: by id, or the pipeline's newest when only the pipeline is given."""
    if version_id:
        return catalog.get_version(version_id, pipeline_id)
    if not pipeline_id:
        raise UserError("pipeline_version_reference needs pipeline_id or pipeline_version_id")
    newest = catalog.newest_version(pipeline_id)  # NotFoundError when there is no such pipeline
    if newest is None:
        raise PreconditionError(f"pipeline {pipeline_id!r} has no versions to run")
    return newest


def load_inline(spec: dict[str, Any], platform: dict[str, Any] | None, source: str) -> LoadedPipeline:
    """Validate inline IR; ``spec`` may be kfp.Client's ``{"pipeline_spec", "platform_spec"}`` wrapper."""
    if "pipeline_spec" in spec:  # kfp.Client's form when the package has a platform spec
        spec, platform = spec["pipeline_spec"], spec.get("platform_spec") or platform
    text = json.dumps(spec) + ("\n---\n" + json.dumps(platform) if platform else "")
    return load_ir_text(text, source)


def experiment_name(runs: RunStore, experiment_id: str | None) -> str:
    """The name of the experiment a run is filed under; refuses a missing or archived one."""
    return filed_under(runs, experiment_id, "")[0]


def filed_under(runs: RunStore, experiment_id: str | None, namespace: str) -> tuple[str, str]:
    """(experiment name, namespace) a run is filed under: the experiment's own (refused when missing or
    archived), or without one the ``Default`` experiment of ``namespace``."""
    if not experiment_id:
        return DEFAULT_EXPERIMENT, namespace
    found = runs.find_experiment(experiment_id)  # NotFoundError when there is none
    if found.storage_state == "ARCHIVED":
        raise PreconditionError(f"experiment {found.name!r} is archived; unarchive it to start runs in it")
    return found.name, found.namespace


def start_run(
    store: RunStore, catalog: PipelineStore, settings: Settings, request: StartRequest, launch: Callable[[str], None],
) -> Run:
    """Validate, record the run (PENDING, linked to its version and recurring run), then ``launch`` it."""
    version = None
    if request.pipeline_spec is None:
        if not (request.pipeline_id or request.pipeline_version_id):
            raise UserError("pipeline_spec or pipeline_version_reference is required")
        version = resolve_version(catalog, request.pipeline_id, request.pipeline_version_id)
        spec, platform = version.pipeline_spec, version.platform_spec
        if version.workflow is not None:  # a kfp 1.x upload: translated again, so the run keeps its workflow
            spec, platform = version.workflow, None
    else:
        spec, platform = request.pipeline_spec, request.platform_spec
    experiment, namespace = filed_under(store, request.experiment_id, request.namespace)
    loaded = load_inline(spec, platform, f"run {request.display_name or ''}".strip())
    run_request = RunRequest(pipeline=loaded, texts={}, values=dict(request.parameters),
                             pipeline_root=request.pipeline_root, experiment=experiment, run_name=request.display_name,
                             queue=request.queue, priority=request.priority, user=request.user, namespace=namespace)
    record = prepare_run(store, settings, run_request)
    links: dict[str, Any] = {}
    if version is not None:
        links.update(pipeline_id=version.pipeline_id, pipeline_version_id=version.id)
    if request.recurring_run_id:
        links["recurring_run_id"] = request.recurring_run_id
    if links:
        store.update_run(record.id, **links)
    launch(record.id)
    return store.get_run(record.id)

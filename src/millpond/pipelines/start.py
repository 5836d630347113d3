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

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from millpond.errors import NotFoundError, PreconditionError, UserError
from millpond.pipelines.loader import LoadedPipeline, load_ir_text
from millpond.pipelines.submit import RunRequest, prepare_run
from millpond.settings import Settings
from millpond.store.journal import DEFAULT_EXPERIMENT
from millpond.store.models import Experiment, Pipeline, PipelineVersion, Run
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


def resolve_version(session: Session, pipeline_id: str | None, version_id: str | None) -> PipelineVersion:
    """The version a run refers to: by id, or the pipeline's newest when only the pipeline is given."""
    if version_id:
        version = session.get(PipelineVersion, version_id)
        if version is None or (pipeline_id and version.pipeline_id != pipeline_id):
            raise NotFoundError(f"no pipeline version with id {version_id!r}"
                                + (f" in pipeline {pipeline_id!r}" if pipeline_id else ""))
        return version
    if not pipeline_id:
        raise UserError("pipeline_version_reference needs pipeline_id or pipeline_version_id")
    if session.get(Pipeline, pipeline_id) is None:
        raise NotFoundError(f"no pipeline with id {pipeline_id!r}")
    newest = session.scalars(select(PipelineVersion).where(PipelineVersion.pipeline_id == pipeline_id)
                             .order_by(PipelineVersion.created_at.desc()).limit(1)).first()
    if newest is None:
        raise PreconditionError(f"pipeline {pipeline_id!r} has no versions to run")
    return newest


def load_inline(spec: dict[str, Any], platform: dict[str, Any] | None, source: str) -> LoadedPipeline:
    """Validate inline IR; ``spec`` may be kfp.Client's ``{"pipeline_spec", "platform_spec"}`` wrapper."""
    if "pipeline_spec" in spec:  # kfp.Client's form when the package has a platform spec
        spec, platform = spec["pipeline_spec"], spec.get("platform_spec") or platform
    text = json.dumps(spec) + ("\n---\n" + json.dumps(platform) if platform else "")
    return load_ir_text(text, source)


def experiment_name(session: Session, experiment_id: str | None) -> str:
    """The name of the experiment a run is filed under; refuses a missing or archived one."""
    if not experiment_id:
        return DEFAULT_EXPERIMENT
    found = session.get(Experiment, experiment_id)
    if found is None:
        raise NotFoundError(f"no experiment with id {experiment_id!r}")
    if found.storage_state == "ARCHIVED":
        raise PreconditionError(f"experiment {found.name!r} is archived; unarchive it to start runs in it")
    return found.name


def start_run(
    sessions: sessionmaker[Session], store: RunStore, settings: Settings, request: StartRequest,
    launch: Callable[[str], None],
) -> Run:
    """Validate, record the run (PENDING, linked to its version and recurring run), then ``launch`` it."""
    version = None
    with sessions() as session:
        if request.pipeline_spec is None:
            if not (request.pipeline_id or request.pipeline_version_id):
                raise UserError("pipeline_spec or pipeline_version_reference is required")
            version = resolve_version(session, request.pipeline_id, request.pipeline_version_id)
            spec, platform = version.pipeline_spec, version.platform_spec
        else:
            spec, platform = request.pipeline_spec, request.platform_spec
        experiment = experiment_name(session, request.experiment_id)
    loaded = load_inline(spec, platform, f"run {request.display_name or ''}".strip())
    run_request = RunRequest(pipeline=loaded, texts={}, values=dict(request.parameters),
                             pipeline_root=request.pipeline_root, experiment=experiment, run_name=request.display_name)
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

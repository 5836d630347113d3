"""Start a run: bind arguments, record it, and execute it with the engine.

The CLI, the Python API and (later) the REST server all come through here, so a run
started one way looks the same from the others.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from millpond.pipelines.arguments import bind_arguments
from millpond.pipelines.engine import Engine, Listener, RunResult
from millpond.pipelines.loader import LoadedPipeline
from millpond.runners.base import Runner
from millpond.settings import Settings
from millpond.store.artifacts import normalize_root
from millpond.store.models import Run
from millpond.store.runs import DEFAULT_EXPERIMENT, RunStore


@dataclass(frozen=True)
class RunRequest:
    pipeline: LoadedPipeline
    texts: dict[str, str]
    values: dict[str, Any]
    params_file: str | None = None
    pipeline_root: str | None = None
    experiment: str | None = None
    run_name: str | None = None


def prepare_run(store: RunStore, settings: Settings, request: RunRequest) -> Run:
    """Validate everything, then record the run (PENDING). Raises UserError before writing anything."""
    arguments = bind_arguments(request.pipeline.spec, request.texts, request.values, request.params_file)
    root = normalize_root(request.pipeline_root or str(settings.default_pipeline_root))
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return store.create_run(
        name=request.run_name or f"{request.pipeline.name}-{stamp}",
        experiment=request.experiment or DEFAULT_EXPERIMENT,
        pipeline_name=request.pipeline.name,
        pipeline_spec=request.pipeline.spec,
        platform_spec=request.pipeline.platform_spec,
        parameters=arguments,
        pipeline_root=root,
    )


def execute_run(
    store: RunStore,
    settings: Settings,
    run: Run,
    listener: Listener | None = None,
    runner: Runner | None = None,
    use_cache: bool = True,
) -> RunResult:
    return Engine(store, settings, runner=runner, listener=listener, use_cache=use_cache).execute(run)

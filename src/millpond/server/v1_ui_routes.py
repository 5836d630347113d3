"""The UI's helpers for kfp 1.x runs and pipelines (beside ``ui_routes``):

- ``GET /ui-api/runs/{run_id}/tasks/{task_id}/v1-outputs``: the task's ``mlpipeline-ui-metadata``
  visualizations and ``mlpipeline-metrics`` metrics (``v1_outputs`` reads them, bounded; a
  ``source`` is read only when it is one of this run's own artifacts).
- ``GET /ui-api/run-metrics?run_id=A&run_id=B``: the metrics of up to 100 runs, for the runs
  list's Metrics column and the compare view: kfp 1.x's ``mlpipeline-metrics`` (as v1's runs list
  showed them), then the scalars of KFP v2 ``system.Metrics`` artifacts (``scalar_metrics``).
- ``GET /ui-api/pipelines/{pipeline_id}/versions/{version_id}/graph``: the version's graph
  before any run: the workflow's own steps for a kfp 1.x upload, the IR's tasks otherwise.

In multi-user mode, as KFP authorizes reading a run's artifacts: ``readArtifact`` on the run's
``runs`` in its namespace (each run of a metrics request), ``get`` on the version's pipeline.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Query, Request

from millpond.access import kfp
from millpond.errors import UserError
from millpond.server.errors import ApiError
from millpond.server.ir_graph import ir_nodes
from millpond.server.kfp_access import check_run
from millpond.server.pipelines import readable_version
from millpond.server.scalar_metrics import scalar_metrics
from millpond.server.state import state_of
from millpond.server.ui_routes import read_artifact
from millpond.server.v1_outputs import (
    METADATA_ARTIFACT,
    METRICS_ARTIFACT,
    Metric,
    SourceError,
    read_metrics,
    read_visualizations,
)
from millpond.server.workflow_graph import parsed_workflow, workflow_nodes
from millpond.store.artifacts import is_remote
from millpond.store.models import Task

router = APIRouter(tags=["UI"])
MAX_RUNS = 100
_CACHE_SIZE = 512
# uri -> its metrics: an artifact does not change once its task has finished (only finished ones are read)
_metrics_cache: OrderedDict[str, list[Metric]] = OrderedDict()
_cache_lock = threading.Lock()


@router.get("/ui-api/runs/{run_id}/tasks/{task_id}/v1-outputs")
def task_v1_outputs(run_id: str, task_id: str, request: Request) -> dict[str, Any]:
    """The task's kfp 1.x visualizations and metrics (each empty when it wrote none)."""
    server = state_of(request)
    run = server.store.find_run(run_id)
    check_run(request, server.store, run, kfp.READ_ARTIFACT)
    task = server.store.get_task(run.id, task_id)
    answer: dict[str, Any] = {"visualizations": [], "metrics": []}
    metadata = _artifact_uri(task, METADATA_ARTIFACT)
    if metadata:
        reader = _source_reader(server.store.run_artifact_uris(run.id))
        try:
            answer["visualizations"] = read_visualizations(read_artifact(metadata), reader)
        except (ApiError, UserError) as exc:
            answer["visualizations_error"] = str(exc)
    metrics = _artifact_uri(task, METRICS_ARTIFACT)
    if metrics:
        try:
            answer["metrics"] = [m.view() for m in _metrics_of(metrics)]
        except (ApiError, UserError) as exc:
            answer["metrics_error"] = str(exc)
    return answer


@router.get("/ui-api/run-metrics")
def run_metrics(request: Request, run_id: list[str] = Query(default=[])) -> dict[str, Any]:
    """Each run's metrics, ``[{name, number_value, format, node}]``: kfp 1.x's (unreadable files left out),
    then the scalars of its KFP v2 ``system.Metrics`` artifacts (``scalar_metrics``, with ``artifact``)."""
    if len(run_id) > MAX_RUNS:
        raise ApiError(400, f"at most {MAX_RUNS} run_id values a request")
    store = state_of(request).store
    runs: dict[str, list[dict[str, Any]]] = {}
    chosen = [store.find_run(rid) for rid in dict.fromkeys(run_id)]
    for run in chosen:  # every run allowed before any is read
        check_run(request, store, run, kfp.READ_ARTIFACT)
    for rid, run in zip(dict.fromkeys(run_id), chosen, strict=True):
        found: list[dict[str, Any]] = []
        scalars: list[dict[str, Any]] = []
        for task in store.list_tasks(run.id):
            if task.state != "SUCCEEDED":
                continue
            scalars += scalar_metrics(task)
            uri = _artifact_uri(task, METRICS_ARTIFACT)
            if uri:
                try:
                    found += [{**m.view(), "node": task.name} for m in _metrics_of(uri)]
                except (ApiError, UserError):
                    continue
        runs[rid] = found + scalars
    return {"runs": runs}


@router.get("/ui-api/pipelines/{pipeline_id}/versions/{version_id}/graph")
def version_graph(pipeline_id: str, version_id: str, request: Request) -> dict[str, Any]:
    """The version's static graph: the kfp 1.x workflow's steps, or the IR's tasks and artifacts (no records).

    ``static``: there is no run, so the page draws no state (a node's ``state`` is only the
    run graph's default, kept for the callers that read it).
    """
    version = readable_version(request, pipeline_id, version_id)
    workflow = parsed_workflow(version.workflow) if version.workflow is not None else None
    if workflow is not None:
        return {"nodes": workflow_nodes(workflow, {}), "source": "workflow", "static": True}
    return {"nodes": ir_nodes(version.pipeline_spec or {}, {}), "source": "ir", "static": True}


def _artifact_uri(task: Task, name: str) -> str | None:
    entries = ((task.outputs or {}).get("artifacts") or {}).get(name)
    entry = entries[0] if isinstance(entries, list) and entries else entries
    uri = entry.get("uri") if isinstance(entry, dict) else None
    return uri if isinstance(uri, str) and uri else None


def _metrics_of(uri: str) -> list[Metric]:
    with _cache_lock:
        if uri in _metrics_cache:
            _metrics_cache.move_to_end(uri)
            return _metrics_cache[uri]
    metrics = read_metrics(read_artifact(uri))
    with _cache_lock:
        _metrics_cache[uri] = metrics
        while len(_metrics_cache) > _CACHE_SIZE:
            _metrics_cache.popitem(last=False)
    return metrics


def _source_reader(uris: set[str]) -> Callable[[str], bytes]:
    """Reads a visualization's ``source`` only when it is one of ``uris`` (the run's artifacts) or inside one."""

    def read(source: str) -> bytes:
        shown = source[:200]
        if "\x00" in source or ".." in re.split(r"[/\\]", source):
            raise SourceError(f"source {shown!r} is refused: only this run's own artifacts are read")
        base = next((uri for uri in uris if _within(source, uri)), None)
        if base is None:
            raise SourceError(f"source {shown!r} is not an artifact of this run: only the run's own artifacts are read")
        if not is_remote(source):  # a link inside an artifact folder must not lead out of it
            real, root = Path(source).resolve(), Path(base).resolve()
            if real != root and root not in real.parents:
                raise SourceError(f"source {shown!r} leads outside the run's artifacts")
        try:
            return read_artifact(source)
        except ApiError as exc:
            raise SourceError(f"source {shown!r}: {exc.message}") from None

    return read


def _within(source: str, uri: str) -> bool:
    """``source`` is artifact ``uri`` or a file inside it (a root-like URI such as ``/`` never counts)."""
    return bool(uri.strip("/")) and (source == uri or source.startswith(uri.rstrip("/") + "/"))

"""The namespace a pipeline run's files belong to, for multi-user isolation.

A local pipeline root holds every run's artifacts as ``<root>/<pipeline>/<run id>/…``; the run's namespace
is its pods' (the namespace recorded on the run in multi-user mode, the one the KFP API gave it from its
experiment; else its experiment's name lower-cased, ``pipeline_pods.project``), as
``pipelines.queueing.run_namespace`` reads it for Kueue. A pipeline task's inputs
(``pipelines.namespace_inputs``) and a model server's ``file://`` storageUri (``serving.model_fetch``)
are checked with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from millpond.errors import NotFoundError, UserError
from millpond.pods.pipeline_pods import project

RUN_ID_LENGTH = 36  # a run's id is a UUID; shorter path segments are pipeline and task names


class Runs(Protocol):
    """What of a run store this needs (the engine's journal and the home's RunStore both have it)."""

    def get_run(self, run_id: str) -> Any: ...
    def experiment_name(self, experiment_id: str) -> str: ...


def run_namespace(runs: Runs, run_id: str) -> str:
    """The namespace of the run ``run_id``."""
    run = runs.get_run(run_id)
    recorded = getattr(run, "namespace", "")
    return recorded if isinstance(recorded, str) and recorded else project(runs.experiment_name(run.experiment_id))


def owner_namespace(runs: Runs, path: Path) -> str | None:
    """The namespace of the run whose folder holds ``path`` (a segment of it is the run's id); None when none."""
    for segment in path.parts:
        if len(segment) != RUN_ID_LENGTH:
            continue
        try:
            return run_namespace(runs, segment)
        except (NotFoundError, UserError):
            continue
    return None

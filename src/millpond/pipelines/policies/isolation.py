"""Multi-user mode: what of the pipeline root a task sees — its own outputs, and its inputs from its namespace.

A local pipeline root is one folder for every run of every namespace (``<root>/<pipeline>/<run id>/…``),
so it cannot be shown whole. The task's sandbox (``runners.isolation``) covers the root as it covers the
home; its staged output folder is already one of its binds (``staging``), and this policy binds back,
read-only, each local input artifact it reads — when that artifact lies in a folder of a run of the
task's own namespace (its run's upstream outputs, or a cached output of an earlier run of the same
namespace). An input under the home or the root that belongs to another namespace's run, or to none,
fails the task before anything runs: a path in an importer is no way into another namespace.
Paths outside the home and the root (an importer of ``/data/x``) are the host's, seen as they are.

A run's namespace is derived as today (``pods.pipeline_pods.project``: its experiment's name
lower-cased) until runs carry a namespace of their own.
"""

from __future__ import annotations

import os
from pathlib import Path

from millpond.errors import NotFoundError, UserError
from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Fail, Verdict
from millpond.pods.pipeline_pods import project
from millpond.runners.base import Bind
from millpond.store.artifacts import is_remote


def prepare(launch: TaskLaunch, run: RunContext) -> Verdict:
    if not run.settings.multi_user:
        return PROCEED
    request = launch.the_request()
    root = run.run.pipeline_root
    local_root = [Path(os.path.realpath(root))] if root and not is_remote(root) else []
    request.hidden = local_root
    covered = [Path(os.path.realpath(run.settings.home)), *local_root]
    namespace = namespace_of_run(run, run.run.id)
    for items in request.artifacts.values():
        for item in items:
            uri = str(item.get("uri") or "")
            if not uri or is_remote(uri):
                continue
            path = Path(os.path.realpath(uri))
            if not any(path == folder or folder in path.parents for folder in covered):
                continue
            owner = _owner(run, path)
            if owner != namespace:
                whose = f"namespace {owner!r}" if owner else "no run"
                return Fail(f"input artifact {uri} belongs to {whose}: in multi-user mode a task of namespace "
                            f"{namespace!r} reads only its own namespace's artifacts")
            if path.exists():
                request.extra_binds.append(Bind(path, str(path), read_only=True))
    return PROCEED


def namespace_of_run(run: RunContext, run_id: str) -> str:
    """The namespace of the run ``run_id`` (its experiment's, as ``pods.pipeline_pods.project`` derives it)."""
    record = run.run if run_id == run.run.id else run.store.get_run(run_id)
    return project(run.store.experiment_name(record.experiment_id))


def _owner(run: RunContext, path: Path) -> str | None:
    """The namespace of the run whose folder holds ``path`` (a segment that is a run's id), None when none does."""
    for segment in path.parts:
        if len(segment) < 32:  # a run's id is a UUID; shorter segments are pipeline and task names
            continue
        try:
            return namespace_of_run(run, segment)
        except (NotFoundError, UserError):
            continue
    return None

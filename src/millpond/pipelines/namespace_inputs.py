"""Multi-user mode: what of the pipeline root a task sees — its own outputs, and its inputs from its namespace.

A local pipeline root is one folder for every run of every namespace (``<root>/<pipeline>/<run id>/…``),
so it cannot be shown whole. The task's sandbox (``runners.isolation``) covers the root as it covers the
home; its staged output folder is already one of its binds (``staging``), and ``confine`` binds back,
read-only, each local input artifact it reads — when that artifact lies in a folder of a run of the
task's own namespace (its run's upstream outputs, or a cached output of an earlier run of the same
namespace). An input under the home or the root that belongs to another namespace's run, or to none,
fails the task before anything runs: a path in an importer is no way into another namespace.
Paths outside the home and the root (an importer of ``/data/x``) are the host's, seen as they are.

A run's namespace is ``pods.run_namespaces``' (the one recorded on the run in multi-user mode, its
experiment's; else its experiment's name lower-cased).
"""

from __future__ import annotations

import os
from pathlib import Path

from millpond.pipelines.launcher import TaskRequest
from millpond.pods.run_namespaces import owner_namespace, run_namespace
from millpond.runners.base import Bind
from millpond.settings import Settings
from millpond.store.artifacts import is_remote
from millpond.store.journal import RunJournal, RunRecord


def confine(request: TaskRequest, run: RunRecord, store: RunJournal, settings: Settings) -> str | None:
    """In multi-user mode: cover ``run``'s local pipeline root in the task's sandbox and bind back its inputs; why
    the task cannot run (an input of another namespace), or None."""
    if not settings.multi_user:
        return None
    root = run.pipeline_root
    local_root = [Path(os.path.realpath(root))] if root and not is_remote(root) else []
    request.hidden = local_root
    covered = [Path(os.path.realpath(settings.home)), *local_root]
    namespace = run_namespace(store, run.id)
    for items in request.artifacts.values():
        for item in items:
            uri = str(item.get("uri") or "")
            if not uri or is_remote(uri):
                continue
            path = Path(os.path.realpath(uri))
            if not any(path == folder or folder in path.parents for folder in covered):
                continue
            owner = owner_namespace(store, path)
            if owner != namespace:
                whose = f"namespace {owner!r}" if owner else "no run"
                return (f"input artifact {uri} belongs to {whose}: in multi-user mode a task of namespace "
                        f"{namespace!r} reads only its own namespace's artifacts")
            if path.exists():
                request.extra_binds.append(Bind(path, str(path), read_only=True))
    return None

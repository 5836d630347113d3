"""What a user does to a recorded run besides running it: terminate, archive, delete.

One implementation for ``millpond runs terminate|archive|unarchive|delete`` and the KFP
routes behind the web UI's buttons, so a run stops and disappears the same way from both.
A run's engine is stopped by a signal to the process recorded in its row (pid and start
time), whoever started it: a ``millpond run`` in a terminal or a server's worker.
"""

from __future__ import annotations

import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from millpond.errors import MillpondError, UserError
from millpond.pipelines.attempt_folders import leftovers
from millpond.pipelines.cancellation import kill_leftover_tasks
from millpond.runners.processes import elsewhere, is_running, signal_process
from millpond.settings import Settings
from millpond.store.artifacts import is_remote
from millpond.store.journal import FINAL_STATES
from millpond.store.models import Run
from millpond.store.runs import RunStore

STOP_TIMEOUT_S = 30.0  # how long terminate and delete wait for an engine to record the run's end
_POLL_S = 0.1
ENGINELESS = "terminated (no engine process was running it)"


class RunStateError(UserError):
    """The run is in a state the action does not apply to (terminating a finished run, archiving an archived one)."""


class RunStillRunning(MillpondError):
    """The run's engine was asked to stop but did not record an end in time; nothing was deleted."""


@dataclass(frozen=True)
class DeletedRun:
    """What deleting a run removed, and what it left alone (and why)."""

    run_id: str
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def refuse_elsewhere(run: Run, action: str) -> None:
    """A run whose engine is on another machine sharing the database is stopped there: from here its
    engine can be neither signalled nor known dead (only a live engine stops its tasks)."""
    if run.state not in FINAL_STATES and elsewhere(run.engine_start):
        raise RunStateError(
            f"run {run.id} is {run.state} on another machine (engine process {run.engine_pid} there): "
            f"it can be {action} only on that machine (millpond runs terminate, or its server)"
        )


def terminate_run(store: RunStore, run_id: str) -> Run:
    """Ask the run's engine to stop (SIGTERM): it records CANCELED and stops its tasks.

    A run with no engine alive (killed with SIGKILL, or never started) is recorded CANCELED
    here, after stopping any task process it left behind. Returns the run as it was found.
    """
    run = store.get_run(run_id)
    if run.state in FINAL_STATES:
        raise RunStateError(f"run {run.id} is {run.state}: only a PENDING or RUNNING run can be terminated")
    refuse_elsewhere(run, "terminated")
    if not signal_process(run.engine_pid, run.engine_start, signal.SIGTERM):
        kill_leftover_tasks(store, run.id)
        store.cancel_engineless(run.id, ENGINELESS)  # one transaction: an engine that ended meanwhile wins
    return run


def wait_until_stopped(store: RunStore, run_id: str, timeout: float = STOP_TIMEOUT_S) -> Run:
    """The run once it is final and its engine has exited (no more writes), or as it is when ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        run = store.get_run(run_id)
        if run.state in FINAL_STATES and not is_running(run.engine_pid, run.engine_start):
            return run
        if time.monotonic() >= deadline:
            return run
        time.sleep(_POLL_S)


def set_archived(store: RunStore, run_id: str, archived: bool) -> Run:
    """Archive a run, or restore it.

    An archived run is hidden from the default lists, its records and outputs are kept, and a run in flight keeps
    running.
    """
    run = store.get_run(run_id)
    wanted = "ARCHIVED" if archived else "AVAILABLE"
    if (run.storage_state or "AVAILABLE") == wanted:
        raise RunStateError(f"run {run.id} is {'already archived' if archived else 'not archived'}")
    experiment = None if archived else store.get_experiment(run.experiment_id)
    if experiment is not None and experiment.storage_state == "ARCHIVED":  # as Kubeflow refuses it
        raise RunStateError(
            f"run {run.id} is in archived experiment {experiment.name!r}: unarchive the experiment first"
        )
    store.update_run(run.id, storage_state=wanted)
    return store.get_run(run.id)


def delete_run(store: RunStore, settings: Settings, run_id: str, timeout: float = STOP_TIMEOUT_S) -> DeletedRun:
    """Delete a run's records, its artifacts under the default pipeline root, and its logs.

    As Kubeflow does, a run still in flight is terminated first (its engine stops its tasks);
    if it has not stopped within ``timeout``, nothing is deleted. Artifacts under a pipeline
    root the user chose (a folder, s3://...) are left where they are: millpond did not pick
    that place, and other tools may read it.
    """
    run = store.get_run(run_id)
    if run.state not in FINAL_STATES:
        terminate_run(store, run.id)
        run = wait_until_stopped(store, run.id, timeout)
        if run.state not in FINAL_STATES or is_running(run.engine_pid, run.engine_start):
            raise RunStillRunning(
                f"run {run.id} is still {run.state} {timeout:g}s after it was asked to stop; not deleted"
            )
    task_ids = [task.id for task in store.list_tasks(run.id)]
    store.delete_run(run.id)
    removed: list[str] = []
    kept: list[str] = []
    artifacts = _default_root_folder(settings, run)
    if artifacts is None:
        kept.append(f"{run.pipeline_root} (a pipeline root the user chose: its artifacts are left in place)")
    elif _remove(artifacts):
        removed.append(str(artifacts))
    logs = settings.logs_dir
    for path in [logs / run.id, logs / f"engine-{run.id}.log"]:
        if _remove(path):
            removed.append(str(path))
    for leftover in leftovers(settings.staging_dir, run.id, task_ids):  # what an engine killed mid-task left
        _remove(leftover)
    return DeletedRun(run_id=run.id, removed=removed, kept=kept)


def _default_root_folder(settings: Settings, run: Run) -> Path | None:
    """The run's folder under the default pipeline root, or None when its root is another one.

    Proven to lie strictly inside the default root: a pipeline name never steers a delete elsewhere.
    """
    root = settings.default_pipeline_root.resolve()
    if is_remote(run.pipeline_root) or Path(run.pipeline_root).resolve() != root:
        return None
    folder = (root / run.pipeline_name / run.id).resolve()
    if not folder.is_relative_to(root) or folder == root:
        return None
    return folder


def _remove(path: Path) -> bool:
    """Remove a file or folder; True if something was there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
        return True
    if path.exists() or path.is_symlink():
        path.unlink(missing_ok=True)
        return True
    return False

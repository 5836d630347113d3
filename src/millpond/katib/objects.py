"""Experiments' supervisors and the objects an Experiment owns: start, stop, reconcile, delete.

Every Experiment that is not finished has one supervisor per uid (``katib.supervisor``), detached and
recorded among the home's background processes (kind ``experiment``: ``millpond ps`` lists it). An apply
starts one for an Experiment that has none (a raised ``maxTrialCount`` is read by the running one, or
restarts the one that had ended with the Experiment); ``millpond server`` starts one for each unfinished
Experiment that has none (``reconcile``: after a ``kill -9`` or a restart of the machine). Deleting an
Experiment deletes its Suggestion and Trials and their jobs, as Kubernetes' garbage collector follows
Katib's owner references.
"""

from __future__ import annotations

import shutil
from typing import Any

from millpond.errors import NotFoundError
from millpond.katib import paths
from millpond.katib.kinds import EXPERIMENT, EXPERIMENT_LABEL, SUGGESTION, TRIAL
from millpond.kind_handler import KindContext
from millpond.kinds import REGISTRY
from millpond.manifest_envelope import not_found
from millpond.runners import background, object_supervisors
from millpond.runners.background import BackgroundProcess
from millpond.settings import Settings
from millpond.store.resources import Resource, ResourceStore

PROCESS_KIND = "experiment"
STOP_WAIT_S = 10.0


def supervisors(namespace: str, name: str, uid: str | None = None) -> list[BackgroundProcess]:
    return object_supervisors.supervisors(PROCESS_KIND, namespace, name, uid)


def finished(status: dict[str, Any]) -> bool:
    """Succeeded or Failed (a Succeeded one may restart: the apply that raises maxTrialCount starts its supervisor)."""
    return any(one.get("type") in ("Succeeded", "Failed") and one.get("status") == "True"
               for one in status.get("conditions") or [] if isinstance(one, dict))


def start(settings: Settings, resource: Resource) -> bool:
    """Start the Experiment's supervisor unless one runs for its uid; True if one was started."""
    try:
        return object_supervisors.start("millpond.katib.supervisor", PROCESS_KIND, resource.namespace, resource.name,
                                        resource.uid, paths.supervisor_log(settings, resource.uid))
    except OSError as exc:  # said in its status, not raised
        ResourceStore(settings).set_status(EXPERIMENT.kind, resource.name, {**resource.status, "conditions": [{
            "type": "Failed", "status": "True", "reason": "ExperimentFailed",
            "message": f"cannot start its controller: {exc}"}]}, resource.namespace)
        return False


def stop(namespace: str, name: str) -> None:
    background.end_all(supervisors(namespace, name), STOP_WAIT_S)


def owned_trials(store: ResourceStore, namespace: str, experiment: str) -> list[Resource]:
    """The Trials of Experiment ``experiment``, oldest first (Katib lists them by its label)."""
    return [trial for trial in store.list(TRIAL.kind, namespace)
            if (trial.manifest.get("metadata", {}).get("labels") or {}).get(EXPERIMENT_LABEL) == experiment]


def job_of(trial: Resource) -> tuple[str, str] | None:
    """The (apiVersion, kind) of the job a Trial runs (its ``runSpec``)."""
    run = trial.manifest.get("spec", {}).get("runSpec") or {}
    if not run.get("kind"):
        return None
    return str(run.get("apiVersion") or ""), str(run["kind"])


def delete_job(settings: Settings, trial: Resource) -> bool:
    """Delete the Trial's job (and its pods, as its controller does); False when there was none."""
    found = job_of(trial)
    if found is None:
        return False
    entry = REGISTRY.loaded().find(found[1])
    if entry is None:
        return False
    try:
        REGISTRY.handler(entry).delete(entry, trial.name, trial.namespace, KindContext(settings))
    except NotFoundError:
        return False
    return True


def delete_trial(settings: Settings, namespace: str, name: str) -> None:
    store = ResourceStore(settings)
    trial = store.get(TRIAL.kind, name, namespace)
    if trial is None or not store.delete(TRIAL.kind, name, namespace):
        raise not_found(TRIAL, name, namespace)
    delete_job(settings, trial)


def delete_experiment(settings: Settings, namespace: str, name: str) -> None:
    """Forget the Experiment, end its supervisor, delete its Suggestion, Trials and their jobs."""
    store = ResourceStore(settings)
    resource = store.get(EXPERIMENT.kind, name, namespace)
    if resource is None or not store.delete(EXPERIMENT.kind, name, namespace):
        raise not_found(EXPERIMENT, name, namespace)
    stop(namespace, name)
    store.delete(SUGGESTION.kind, name, namespace)
    for trial in owned_trials(store, namespace, name):
        store.delete(TRIAL.kind, trial.name, namespace)
        delete_job(settings, trial)
    shutil.rmtree(paths.folder(settings, resource.uid), ignore_errors=True)


def reconcile(settings: Settings) -> list[str]:
    """Start a supervisor for every Experiment that has none and is unfinished or still has trials running; the
    names started."""
    started = []
    for resource in ResourceStore(settings).list(EXPERIMENT.kind, None):
        active = resource.status.get("trialsRunning") or resource.status.get("trialsPending")
        if (not finished(resource.status) or active) and start(settings, resource):
            started.append(f"{resource.namespace}/{resource.name}")
    return started

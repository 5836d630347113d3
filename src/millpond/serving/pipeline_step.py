"""What the ``deploy_model`` KFP component does inside its task: serve a Model artifact, wait, output its URL.

The component (``millpond.serving.components``) is a thin ``@dsl.component`` whose body calls
:func:`main`; the work is here, typed and testable. The task runs on the host, in the engine's
environment, so it reaches the home's store as any millpond process does, and the engine tells it
its run and task (``MILLPOND_RUN_ID``, ``MILLPOND_TASK_ID``).

- **The same InferenceService as ``millpond serve``.** The artifact's URI is the predictor's
  ``storageUri`` and its format the one asked, else the artifact's ``framework`` metadata or file
  name (``serving.from_run``); the manifest is checked and stored as ``apply -f`` stores one
  (``serving.deploy``), labelled with the run and task that deployed it.
- **A rerun keeps its own service.** The service is named as asked (default ``TASK-OUTPUT`` of
  the model's producer, made unique by the run: ``model-RUNID8``). One that an earlier attempt of
  this run, or another pipeline run, deployed under that name is re-applied: unchanged when it
  already serves this model (a retried task waits for it again), a new revision when the model
  changed (KServe's rollout: the pipeline deploys its newest model). One a person created (no run
  label: ``arena serve``, a manifest) is never touched, and the task fails naming it.
- **No deadlock over resources.** The model's replicas ask the ledger for their own resources; the
  task gives its own grant back once the service is applied, as ``train_job`` does.
- **Cancelling the run stops the wait.** SIGTERM (SIGINT, SIGHUP) ends the wait within a poll and
  fails the task with the signal's name; the service stays as applied (a model people may already
  query is not pulled from under them by a cancelled run: ``arena serve delete`` removes it).
- **The step waits for its own model.** A changed predictor is a new revision; the URL is output once
  that revision has all the traffic (``latestRolledoutRevision`` is the latest, and not the one that
  served before the apply), so a query right after the step reaches the model it deployed.
- **A model that cannot load fails the task** with its status's message (Ready False with a
  reason; or, rolled out into a served service, the new revision's failure while the previous one
  keeps serving), rather than waiting for the timeout.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

from millpond.errors import ConflictError, TaskFailure, UserError
from millpond.runners.environment import RUN_ID_ENV, TASK_ID_ENV
from millpond.runners.stopping import StopFlag
from millpond.scheduling import GRANT_ENV, Ledger
from millpond.serving import lifecycle
from millpond.serving.deploy import deploy
from millpond.serving.from_run import RUN_LABEL, TASK_LABEL, ModelArtifact, inference_service
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore

POLL_S = 0.25


@dataclass(frozen=True)
class DeployInputs:
    """The component's inputs: the Model artifact (URI, metadata) and how to serve it."""

    model_uri: str
    model_metadata: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    namespace: str = "default"
    format: str = ""
    replicas: int = 1
    timeout_s: float = 300.0


def service_name(inputs: DeployInputs, run_id: str) -> str:
    """The name asked, else ``model-`` and the run's id's first 8 characters (a DNS label led by a letter)."""
    if inputs.name.strip():
        return inputs.name.strip()
    return f"model-{re.sub(r'[^a-z0-9]', '', run_id.lower())[:8] or 'local'}"


def manifest(inputs: DeployInputs, run_id: str, task_id: str) -> dict[str, Any]:
    """The InferenceService the inputs describe, labelled with the run and task that deploy it."""
    artifact = ModelArtifact(run_id, run_id, "deploy", "model", inputs.model_uri, dict(inputs.model_metadata))
    labels = {key: value for key, value in ((RUN_LABEL, run_id), (TASK_LABEL, task_id)) if value}
    body = inference_service(artifact, service_name(inputs, run_id), inputs.namespace, inputs.format,
                             inputs.replicas, labels)
    if not run_id:
        body["metadata"]["labels"].pop(RUN_LABEL, None)
    return body


def run_step(inputs: DeployInputs) -> str:
    """Deploy, give back the task's grant, wait until Ready: the URL (TaskFailure: cannot load, cancelled)."""
    stop = StopFlag()
    with stop.installed():
        return _run(inputs, stop)


def _run(inputs: DeployInputs, stop: StopFlag) -> str:
    run_id, task_id = os.environ.get(RUN_ID_ENV, ""), os.environ.get(TASK_ID_ENV, "")
    body = manifest(inputs, run_id, task_id)
    name, namespace = body["metadata"]["name"], body["metadata"]["namespace"]
    settings = load_settings()
    store = ResourceStore(settings)
    existing = store.get("InferenceService", name, namespace)
    if existing is not None and not ((existing.manifest.get("metadata") or {}).get("labels") or {}).get(RUN_LABEL):
        raise ConflictError(f"the InferenceService {name} already exists in namespace {namespace} (created by arena, "
                            "the API or a manifest, not a pipeline run): give the step another name, or delete it")
    # a changed predictor is a new revision: the step waits for that one, not the one serving now
    superseded = _latest_revision(existing) if existing is not None and \
        (existing.manifest.get("spec") or {}).get("predictor") != body["spec"]["predictor"] else None
    done = deploy(body, store, "deploy_model", settings.volumes_dir)
    print(f"InferenceService {namespace}/{name} {done.action}: {inputs.model_uri}", flush=True)
    for note in done.notes:
        print(f"info: {note}", flush=True)
    _give_back_grant()
    if not done.started:
        raise TaskFailure(f"InferenceService {name}: not served here: "
                          f"{done.manifest.predictor.unservable if done.manifest.predictor else 'no predictor'}")
    return _wait_ready(store, name, namespace, inputs.timeout_s, stop, superseded)


def _latest_revision(resource: Any) -> str:
    """The latest revision KServe's status names (``components.predictor.latestCreatedRevision``), or ""."""
    return str((((resource.status or {}).get("components") or {}).get("predictor") or {})
               .get("latestCreatedRevision") or "")


def _wait_ready(store: ResourceStore, name: str, namespace: str, timeout_s: float, stop: StopFlag,
                superseded: str | None = None) -> str:
    """The URL once Ready with the latest revision rolled out (all the traffic: this step's model serves), and
    that revision is not ``superseded`` (the one serving before a changed predictor was applied)."""
    deadline = time.monotonic() + timeout_s
    said = ""
    while True:
        resource = store.get("InferenceService", name, namespace)
        if resource is None:
            raise TaskFailure(f"InferenceService {name} was deleted while its pipeline task waited for it")
        status = lifecycle.observed_status(resource) or {}
        ready: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
        revisions = (status.get("components") or {}).get("predictor") or {}
        latest = str(revisions.get("latestCreatedRevision") or "")
        rolled_out = bool(latest) and latest != superseded and revisions.get("latestRolledoutRevision") == latest
        state = f"{ready.get('status', 'Unknown')} {ready.get('reason', '')}".strip()
        if state != said:
            said = state
            print(f"Ready {state}{': ' + ready['message'] if ready.get('message') else ''}", flush=True)
        if ready.get("status") == "True" and status.get("url") and rolled_out:
            print(f"serving {latest} at {status['url']}", flush=True)
            return str(status["url"])
        failed = (status.get("modelStatus") or {}).get("lastFailureInfo") or {}
        if ready.get("status") == "False" and ready.get("reason") != lifecycle.NOT_SERVED:
            raise TaskFailure(f"InferenceService {name}: {ready.get('reason')}: {ready.get('message', '')}")
        if failed and latest and latest != superseded and not rolled_out:  # the previous model keeps serving
            raise TaskFailure(f"InferenceService {name}: {latest} cannot serve ({failed.get('reason')}: "
                              f"{failed.get('message', '')}); the previous revision keeps serving")
        if time.monotonic() >= deadline:
            raise TaskFailure(f"InferenceService {name}: not Ready after {timeout_s:g} s ({state}); "
                              f"arena serve logs {name} -n {namespace} shows its server's output")
        if stop.event.wait(POLL_S):
            raise TaskFailure(f"InferenceService {name}: stopped waiting because its pipeline task got {stop.signal} "
                              "(the service stays as applied)")


def _give_back_grant() -> None:
    """Release the ledger grant the engine holds for this task: the model's replicas ask for their own."""
    grant = os.environ.get(GRANT_ENV, "")
    if grant:
        Ledger().release(grant)


def step_inputs(**values: Any) -> DeployInputs:
    """``DeployInputs`` from the component's arguments (numbers as KFP hands them over: 2.0 for 2)."""
    try:
        metadata = dict(values.pop("model_metadata", None) or {})
        replicas = int(values.pop("replicas", 1))
        timeout_s = float(values.pop("timeout_s", 300.0))
    except (TypeError, ValueError):
        raise UserError("replicas is a whole number, timeout_s a number, model_metadata a dict") from None
    if timeout_s <= 0:
        raise UserError(f"timeout_s {timeout_s:g}: more than 0")
    return DeployInputs(model_metadata=metadata, replicas=replicas, timeout_s=timeout_s,
                        **{k: str(v) for k, v in values.items()})


def main(**values: Any) -> str:
    """The component's body: the endpoint's URL; a model that cannot be served or bad inputs fail the task."""
    return run_step(step_inputs(**values))

"""A served model's lineage: an InferenceService reading a model is an execution with that model as its INPUT.

So a model's lineage reaches from the dataset it was trained on to the services serving it, and
``/apis/v2beta1/artifact_tasks?artifact_ids=MODEL`` names them beside the tasks that read it. The model is
the predictor's ``storageUri`` as an artifact: the very artifact of the run that wrote it when the URI is that
artifact's (``millpond serve --from-run``, ``deploy_model``: its URI as it is; ``file:///PATH`` is ``PATH``),
else an artifact first seen here. One execution per service and model: applying the same again changes
nothing, a new ``storageUri`` is a new execution. Simplified: it stays ``RUNNING`` (MLMD's state) after the
service is deleted.

A model in a volume (``pvc://CLAIM/path/model.pt``) that no artifact names exactly (no pipeline wrote it) is read
from the volume ``pvc://CLAIM`` a training job wrote (``store.lineage_jobs``): when that volume's artifact is
recorded, the service's input is it (key ``model``), so a model a job left in a volume leads back through the job
to the datasets it read. Decided when the service is applied: a job that writes the volume later links nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from millpond.serving.manifests import ServingManifest
from millpond.settings import Settings
from millpond.store.lineage import DEPLOYMENT_EXECUTION, ArtifactLink, ExecutionRecord, dataset_links, derived_id
from millpond.store.lineage_store import LineageStore


def deployment(manifest: ServingManifest) -> ExecutionRecord | None:
    """The execution of an InferenceService serving a model from a ``storageUri``; None for any other."""
    predictor = manifest.predictor
    storage = predictor.storage if predictor is not None else None
    if predictor is None or storage is None:
        return None
    uri = storage.local_path if storage.scheme == "file" and storage.local_path else storage.uri
    names = {"kind": manifest.info.kind, "namespace": manifest.namespace, "name": manifest.name}
    return ExecutionRecord(
        execution_id=derived_id("deployment", manifest.namespace, manifest.name, uri), type_name=DEPLOYMENT_EXECUTION,
        name=f"{manifest.namespace}/{manifest.name}", state="RUNNING", namespace=manifest.namespace,
        inputs=(ArtifactLink("model", uri, "system.Model", {}, "COMPONENT_INPUT"),),
        properties=names, custom_properties={"display_name": manifest.name, "storage_uri": storage.uri},
    )


def record_deployments(manifests: Iterable[ServingManifest], settings: Settings) -> None:
    """Record the executions of these (created or changed) InferenceServices, unless lineage is off."""
    executions = [record for record in map(deployment, manifests) if record is not None]
    if not executions or not settings.lineage:
        return
    store = LineageStore(settings.database_url)
    for execution in executions:
        store.record(from_volume(execution, store))


def from_volume(execution: ExecutionRecord, store: LineageStore) -> ExecutionRecord:
    """``execution`` reading the volume ``pvc://CLAIM`` its ``pvc://CLAIM/path`` model lies in, when that volume is
    recorded and no artifact is the model's URI itself; else as it is."""
    model = execution.inputs[0]
    if not model.uri.startswith("pvc://"):
        return execution
    claim = model.uri.removeprefix("pvc://").split("/", 1)[0]
    volume = replace(dataset_links([claim], execution.namespace)[0], key="model")  # the artifact a job wrote
    known = store.existing_artifacts([model.artifact_id, volume.artifact_id])
    if volume.artifact_id not in known or model.artifact_id in known:
        return execution
    return replace(execution, inputs=(volume,), custom_properties={**execution.custom_properties,
                                                                    "model_path": model.uri})

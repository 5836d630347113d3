"""Lineage: which execution read and wrote which artifact, in which run of which pipeline (migration 0015).

The model is ML Metadata's, because both of KFP's lineage APIs map onto it: MLMD itself (artifacts with a type,
URI, properties, custom properties and state; executions with a type, properties and state; contexts with a
parent; events ``INPUT``/``OUTPUT`` with the input's or output's name as the path; attributions and
associations tying artifacts and executions to contexts) and KFP master's native artifact service
(``backend/api/v2beta1/artifact.proto``: an ``ArtifactTask`` is an event, with KFP's ``IOType`` and producer).

Every id is decided here, before anything is written, so the engine's journals (the stdlib SQLite one and
SQLAlchemy's) insert the same rows in the same transaction as the task's end, with no read first:

- an execution's id is its task's id (KFP's native service has no executions apart from tasks);
- an artifact's id is derived from its URI: a URI under a pipeline root names one artifact, so the output a
  task wrote, the input a later task read and the output a cache hit reused are one row, as MLMD keeps them
  (KFP's launcher finds an importer's artifact by URI the same way);
- a context's from its type and name, an event's from what it links.

For an MLMD endpoint: each artifact, execution and context has ``mlmd_id``, its int64 id (63 bits of its UUID,
indexed); types are names here (MLMD's type ids can be numbered from the names in use); an event's ``type`` is
MLMD's ``INPUT``/``OUTPUT`` and its ``path`` the one step ``key``; a context's parent is ``parent_id``;
attributions and associations are rows of their own; properties are plain JSON values (MLMD's ``Value``).

KFP's own types and property names are used (``system.ContainerExecution``, ``system.Model``,
``display_name``, ``task_name``, ``cache_fingerprint``, ``cached_execution_id``, contexts
``system.PipelineRun`` named by the run id under ``system.Pipeline`` named by the pipeline).
Simplified: a Metrics artifact stays one artifact with its scalars in ``metadata`` (KFP's native launcher
writes one ``Metric`` artifact per scalar); a loop's iterations are not recorded as executions of their own.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

# --- KFP's and MLMD's vocabulary ----------------------------------------------------------------------------
CONTAINER_EXECUTION, DAG_EXECUTION, IMPORTER_EXECUTION = (
    "system.ContainerExecution", "system.DAGExecution", "system.ImporterExecution")
PIPELINE_RUN, PIPELINE = "system.PipelineRun", "system.Pipeline"
# Executions outside pipelines that read or write artifacts (a model server, a training job, a data operation).
DEPLOYMENT_EXECUTION, TRAINING_EXECUTION = "millpond.Deployment", "millpond.TrainingJob"

# KFP artifact.proto's Artifact.ArtifactType, by the IR's schema title (``system.Model`` -> ``Model``).
ARTIFACT_TYPES = ("TYPE_UNSPECIFIED", "Artifact", "Model", "Dataset", "HTML", "Markdown", "Metric",
                  "ClassificationMetric", "SlicedClassificationMetric")
_TYPE_OF_SCHEMA = {"system.Artifact": "Artifact", "system.Model": "Model", "system.Dataset": "Dataset",
                   "system.HTML": "HTML", "system.Markdown": "Markdown", "system.Metrics": "Metric",
                   "system.ClassificationMetrics": "ClassificationMetric",
                   "system.SlicedClassificationMetrics": "SlicedClassificationMetric"}
# KFP artifact.proto's IOType (the order is the enum's numbers).
IO_TYPES = ("UNSPECIFIED", "COMPONENT_DEFAULT_INPUT", "TASK_OUTPUT_INPUT", "COMPONENT_INPUT", "RUNTIME_VALUE_INPUT",
            "COLLECTED_INPUTS", "ITERATOR_INPUT", "ITERATOR_INPUT_RAW", "ITERATOR_OUTPUT", "OUTPUT", "ONE_OF_OUTPUT",
            "TASK_FINAL_STATUS_OUTPUT")
# MLMD's Event.Type names; the native API's IOType says more about an input, MLMD's only INPUT or OUTPUT.
INPUT, OUTPUT = "INPUT", "OUTPUT"
# MLMD's Execution.State by the engine's task state.
_EXECUTION_STATES = {"PENDING": "NEW", "RUNNING": "RUNNING", "SUCCEEDED": "COMPLETE", "FAILED": "FAILED",
                     "CANCELED": "CANCELED", "SKIPPED": "CANCELED", "CACHED": "CACHED"}

_NAMESPACE = uuid.UUID("6f1c3f55-1a43-4a8e-9a43-6d696c6c706f")  # any fixed UUID: ids are uuid5s under it


_SCHEMA_OF_TYPE = {kfp_type: schema for schema, kfp_type in _TYPE_OF_SCHEMA.items()}
OUTPUT_IO_TYPES = ("ITERATOR_OUTPUT", "OUTPUT", "ONE_OF_OUTPUT", "TASK_FINAL_STATUS_OUTPUT")  # MLMD's OUTPUT events


def schema_of(artifact_type: str) -> str:
    """The IR schema title of KFP's ``ArtifactType`` name (``Metric`` -> ``system.Metrics``)."""
    return _SCHEMA_OF_TYPE.get(artifact_type, "system.Artifact")


def artifact_type_of(schema_title: str) -> str:
    """KFP's ``ArtifactType`` name of an IR schema title; any other title (``google.VertexModel``...) is an
    ``Artifact``, as KFP's native service types what it does not know."""
    return _TYPE_OF_SCHEMA.get(schema_title, "Artifact")


def artifact_id(uri: str, scope: str = "") -> str:
    """An artifact's id: its URI's; ``scope`` for a URI that names different things in different namespaces
    (``pvc://NAME``)."""
    return str(uuid.uuid5(_NAMESPACE, f"artifact\0{scope}\0{uri}" if scope else f"artifact\0{uri}"))


def context_id(type_name: str, name: str, namespace: str = "") -> str:
    """A context's id: a pipeline's name is unique within its namespace (a run's id everywhere)."""
    return str(uuid.uuid5(_NAMESPACE, f"context\0{type_name}\0{namespace}\0{name}"))


def mlmd_id(record_id: str) -> int:
    """The int64 id ML Metadata gives the record ``record_id`` (an artifact, execution or context): 63 bits of its
    UUID, so an MLMD endpoint answers ids that stay the same and that it can look up (the ``mlmd_id`` column)."""
    try:
        number = uuid.UUID(record_id).int
    except ValueError:  # not a UUID (no id here is one, but a task id is the journal's)
        number = uuid.uuid5(_NAMESPACE, record_id).int
    return (number >> 65) or 1


def derived_id(*parts: str) -> str:
    """The id of a record made of ``parts`` (an event, a link, an execution that is no task's): the same parts,
    the same id, so recording it again changes nothing."""
    return str(uuid.uuid5(_NAMESPACE, "\0".join(parts)))


# --- what the engine hands in -------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArtifactLink:
    """One artifact an execution read or wrote, under the input's or output's name (MLMD's event path)."""

    key: str
    uri: str
    schema_title: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    io_type: str = "OUTPUT"  # KFP's IOType
    producer_task: str = ""  # the task that wrote it, for the native API's IOProducer
    scope: str = ""  # what makes its URI unique when the URI alone does not (a PVC's namespace)

    @property
    def artifact_id(self) -> str:
        return artifact_id(self.uri, self.scope)


@dataclass(frozen=True)
class RunScope:
    """Where a run's executions belong: its id, namespace ("" in single-user mode) and pipeline's name."""

    run_id: str
    namespace: str
    pipeline_name: str


@dataclass(frozen=True)
class ExecutionRecord:
    """One execution ending (a task of a run, or a deployment, job or data operation when ``run`` is None)."""

    execution_id: str
    type_name: str
    name: str
    state: str  # the engine's state (SUCCEEDED...), kept as MLMD's
    namespace: str
    run: RunScope | None = None
    inputs: tuple[ArtifactLink, ...] = ()
    outputs: tuple[ArtifactLink, ...] = ()
    properties: Mapping[str, Any] = field(default_factory=dict)
    custom_properties: Mapping[str, Any] = field(default_factory=dict)
    produced_here: bool = True  # False for a cache hit: its outputs are the reused execution's artifacts


Conflict = Literal["ignore", "update"]


@dataclass(frozen=True)
class TableRows:
    """Rows for one lineage table; ``conflict`` says what an existing id gets (kept, or its columns replaced)."""

    table: str
    rows: list[dict[str, Any]]
    conflict: Conflict
    update: tuple[str, ...] = ()  # the columns an "update" replaces


ARTIFACTS, EXECUTIONS, CONTEXTS, EVENTS = (
    "lineage_artifacts", "lineage_executions", "lineage_contexts", "lineage_events")
ATTRIBUTIONS, ASSOCIATIONS = "lineage_attributions", "lineage_associations"


def rows_of(record: ExecutionRecord, now: dt.datetime) -> list[TableRows]:
    """The rows recording ``record``: contexts, the execution, its artifacts, events and context links.

    Order matters only for readers inside the transaction (none): every table is written in one commit.
    """
    tables: list[TableRows] = []
    context_ids: list[str] = []
    if record.run is not None:
        run = record.run
        pipeline = context_id(PIPELINE, run.pipeline_name, run.namespace)
        run_context = context_id(PIPELINE_RUN, run.run_id)
        context_ids = [run_context, pipeline]
        tables.append(TableRows(CONTEXTS, [
            _context_row(pipeline, PIPELINE, run.pipeline_name, run.namespace, None, {}, now),
            _context_row(run_context, PIPELINE_RUN, run.run_id, run.namespace, pipeline,
                         {"pipeline_name": run.pipeline_name}, now),
        ], "ignore"))
    run_id = record.run.run_id if record.run else None
    tables.append(TableRows(EXECUTIONS, [{
        "id": record.execution_id, "mlmd_id": mlmd_id(record.execution_id), "type": record.type_name,
        "name": record.name,
        "state": _EXECUTION_STATES.get(record.state, "UNKNOWN"), "namespace": record.namespace, "run_id": run_id,
        "properties": dict(record.properties), "custom_properties": dict(record.custom_properties),
        "created_at": now, "updated_at": now,
    }], "update", ("state", "properties", "custom_properties", "updated_at")))
    produced = [link for link in record.outputs if record.produced_here]
    reused = [link for link in record.outputs if not record.produced_here]
    if produced:  # written now: its metadata is what the task wrote (a re-run replaces it)
        replaced = ("type", "artifact_type", "name", "custom_properties", "state", "updated_at")
        tables.append(TableRows(ARTIFACTS, [_artifact_row(link, record, run_id, now) for link in produced],
                                "update", replaced))
    if record.inputs or reused:  # known already, or else first seen here (an importer's, a pipeline input)
        tables.append(TableRows(ARTIFACTS, [_artifact_row(link, record, None, now)
                                            for link in (*record.inputs, *reused)], "ignore"))
    events = [_event_row(link, record, INPUT, run_id, now) for link in record.inputs]
    events += [_event_row(link, record, OUTPUT, run_id, now) for link in record.outputs]
    if events:
        tables.append(TableRows(EVENTS, events, "ignore"))
    if context_ids:
        tables.append(TableRows(ASSOCIATIONS, [
            {"id": derived_id("association", c, record.execution_id), "context_id": c,
             "execution_id": record.execution_id} for c in context_ids], "ignore"))
        artifacts = {link.artifact_id for link in (*record.inputs, *record.outputs)}
        if artifacts:
            tables.append(TableRows(ATTRIBUTIONS, [
                {"id": derived_id("attribution", c, a), "context_id": c, "artifact_id": a}
                for c in context_ids for a in sorted(artifacts)], "ignore"))
    return tables


def _context_row(context: str, type_name: str, name: str, namespace: str, parent: str | None,
                 custom: dict[str, Any], now: dt.datetime) -> dict[str, Any]:
    return {"id": context, "mlmd_id": mlmd_id(context), "type": type_name, "name": name, "namespace": namespace,
            "parent_id": parent, "properties": {}, "custom_properties": custom, "created_at": now}


def _artifact_row(link: ArtifactLink, record: ExecutionRecord, run_id: str | None,
                  now: dt.datetime) -> dict[str, Any]:
    name = link.metadata.get("display_name") if isinstance(link.metadata.get("display_name"), str) else link.key
    return {
        "id": link.artifact_id, "mlmd_id": mlmd_id(link.artifact_id), "type": link.schema_title or "system.Artifact",
        "artifact_type": artifact_type_of(link.schema_title), "name": name, "uri": link.uri,
        "namespace": record.namespace, "state": "LIVE", "run_id": run_id,
        "properties": {}, "custom_properties": {**link.metadata, "display_name": name},
        "created_at": now, "updated_at": now,
    }


def _event_row(link: ArtifactLink, record: ExecutionRecord, kind: str, run_id: str | None,
               now: dt.datetime) -> dict[str, Any]:
    artifact = link.artifact_id
    return {
        "id": derived_id("event", record.execution_id, kind, link.key, artifact), "artifact_id": artifact,
        "execution_id": record.execution_id, "type": kind, "path": link.key,
        "io_type": link.io_type if kind == INPUT else "OUTPUT",
        "producer_task": link.producer_task or (record.name if kind == OUTPUT else ""),
        "run_id": run_id, "created_at": now,
    }


# --- a task's links, from its IR spec and its resolved inputs and outputs ------------------------------------
def input_links(task_spec: Mapping[str, Any], artifacts: Mapping[str, Any]) -> tuple[ArtifactLink, ...]:
    """The artifacts a task read, each with KFP's IOType from how its spec binds the input: an upstream task's
    output (``TASK_OUTPUT_INPUT``, with that producer), the enclosing DAG's input (``COMPONENT_INPUT``), a loop's
    item (``ITERATOR_INPUT``), a ``dsl.Collected`` list (``COLLECTED_INPUTS``)."""
    bindings = (task_spec.get("inputs") or {}).get("artifacts") or {}
    links = []
    for key, items in artifacts.items():
        binding = bindings.get(key) or {}
        io_type, producer = "COMPONENT_INPUT", ""
        if "taskOutputArtifact" in binding:
            io_type, producer = "TASK_OUTPUT_INPUT", str(binding["taskOutputArtifact"].get("producerTask", ""))
        elif key == task_spec.get("artifactIterator", {}).get("itemInput"):
            io_type = "ITERATOR_INPUT"
        listed = items if isinstance(items, list) else [items]
        if len(listed) > 1:
            io_type = "COLLECTED_INPUTS"
        links += [_link(key, item, io_type, producer) for item in listed if _has_uri(item)]
    return tuple(links)


def output_links(artifacts: Mapping[str, Any], producer: str) -> tuple[ArtifactLink, ...]:
    return tuple(_link(key, item, "OUTPUT", producer)
                 for key, items in artifacts.items()
                 for item in (items if isinstance(items, list) else [items]) if _has_uri(item))


def dataset_links(datasets: list[str], namespace: str) -> tuple[ArtifactLink, ...]:
    """The Fluid datasets a task mounts (a kfp-kubernetes ``pvcMount`` of the PVC Fluid names after a dataset), as
    ``system.Dataset`` artifacts ``pvc://NAME`` of the namespace: so a model's lineage reaches the dataset its
    training task read. Keyed by the dataset's name; ``COMPONENT_INPUT``, as they come from outside the DAG."""
    return tuple(ArtifactLink(name, f"pvc://{name}", "system.Dataset", {"namespace": namespace, "kind": "Dataset"},
                              "COMPONENT_INPUT", scope=namespace) for name in dict.fromkeys(datasets))


def _has_uri(item: Any) -> bool:
    return isinstance(item, Mapping) and isinstance(item.get("uri"), str) and bool(item["uri"])


def _link(key: str, item: Mapping[str, Any], io_type: str, producer: str) -> ArtifactLink:
    schema = item.get("type") or {}
    title = schema.get("schemaTitle", "") if isinstance(schema, Mapping) else str(schema)
    metadata = item.get("metadata") if isinstance(item.get("metadata"), Mapping) else {}
    return ArtifactLink(key, str(item["uri"]), str(title or "system.Artifact"), dict(metadata or {}), io_type,
                        producer)


# --- what KFP's driver and launcher report through the API (CreateArtifact, CreateArtifactTask) ---------------
@dataclass(frozen=True)
class NewArtifact:
    """An artifact a client creates, with the task that produced it (KFP's ``CreateArtifactRequest``)."""

    artifact_id: str
    name: str
    artifact_type: str  # KFP's ArtifactType name
    uri: str
    namespace: str
    description: str
    metadata: Mapping[str, Any]
    number_value: float | None
    run_id: str
    task_id: str
    producer_task: str
    producer_key: str


def created_artifact_rows(new: NewArtifact, now: dt.datetime) -> list[TableRows]:
    """The artifact and its OUTPUT link to the task that produced it (KFP: an artifact is created as an output)."""
    properties: dict[str, Any] = {"description": new.description} if new.description else {}
    if new.number_value is not None:
        properties["number_value"] = new.number_value
    artifact = {"id": new.artifact_id, "mlmd_id": mlmd_id(new.artifact_id),
                "type": schema_of(new.artifact_type), "artifact_type": new.artifact_type,
                "name": new.name, "uri": new.uri, "namespace": new.namespace, "state": "LIVE", "run_id": new.run_id,
                "properties": properties, "custom_properties": {**new.metadata, "display_name": new.name},
                "created_at": now, "updated_at": now}
    return [TableRows(ARTIFACTS, [artifact], "ignore"),
            link_rows(new.artifact_id, new.task_id, new.run_id, "OUTPUT", new.producer_key, new.producer_task, now)]


def link_rows(artifact: str, task_id: str, run_id: str, io_type: str, key: str, producer_task: str,
              now: dt.datetime) -> TableRows:
    """One artifact-task link (an event) as a client reports it; reporting it again changes nothing."""
    kind = OUTPUT if io_type in OUTPUT_IO_TYPES else INPUT
    return TableRows(EVENTS, [{
        "id": derived_id("event", task_id, kind, key, artifact), "artifact_id": artifact, "execution_id": task_id,
        "type": kind, "path": key, "io_type": io_type, "producer_task": producer_task, "run_id": run_id,
        "created_at": now}], "ignore")

"""Lineage rows (``store.lineage_tables``) as ML Metadata's messages, with KFP's types and property names.

- Ids: a node's ``mlmd_id`` column (``store.lineage.mlmd_id``); a type's id is made the same way from its kind and
  name (MLMD numbers types in a table; here a type is only its name, so its id is derived and stays the same).
- Types: KFP's (``system.Model``, ``system.ContainerExecution``, ``system.PipelineRun``...), every one KFP's
  backend declares plus any other name a row carries (an IR schema title such as ``google.VertexModel``). KFP
  declares them without properties (``backend/src/v2/metadata/client.go``: everything is a custom property), and
  so are they here.
- Properties: the rows' JSON values as MLMD's ``Value``: text ``string_value``, an integer ``int_value``, a number
  ``double_value``, a boolean ``bool_value``, an object ``struct_value`` (as KFP writes its metadata); a list,
  which a ``Struct`` cannot be, is its JSON text. Two custom properties name other executions, which the rows
  keep by their text ids and KFP by MLMD ids: ``cached_execution_id`` (the execution a cache hit reused: its MLMD
  id as text, as KFP's driver writes it) and ``parent_dag_id`` (the enclosing DAG's execution: an ``int_value``).
- Times: milliseconds since the epoch; a context has no update time of its own, its creation time stands for it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from google.protobuf import struct_pb2

from millpond.mlmd.proto import metadata_store_pb2 as mlmd
from millpond.store import lineage
from millpond.store.lineage_reads import EventRow, Kind, Link
from millpond.store.lineage_tables import LineageArtifact, LineageContext, LineageExecution

# The types KFP's backend declares (and millpond's executions outside pipelines), known even before a row has one.
KNOWN_TYPES: dict[Kind, tuple[str, ...]] = {
    "artifact": tuple(dict.fromkeys(lineage.schema_of(name) for name in lineage.ARTIFACT_TYPES[1:])),
    "execution": (lineage.CONTAINER_EXECUTION, lineage.DAG_EXECUTION, lineage.IMPORTER_EXECUTION,
                  lineage.DEPLOYMENT_EXECUTION, lineage.TRAINING_EXECUTION),
    "context": (lineage.PIPELINE_RUN, lineage.PIPELINE),
}
_REFERENCES_AS_TEXT = ("cached_execution_id",)  # custom properties naming an execution by its MLMD id, as text
_REFERENCES_AS_INT = ("parent_dag_id",)  # ... as an int_value


def type_id(kind: Kind, name: str) -> int:
    """The MLMD id of the type ``name`` of ``kind`` (the same on every server and after every restart)."""
    return lineage.mlmd_id(lineage.derived_id("mlmd-type", kind, name))


def type_names(kind: Kind, in_use: Iterable[str]) -> list[str]:
    """KFP's types of ``kind`` and every other name in use, KFP's first."""
    return list(dict.fromkeys((*KNOWN_TYPES[kind], *sorted(in_use))))


def type_message(kind: Kind, name: str) -> Any:
    """An ``ArtifactType``, ``ExecutionType`` or ``ContextType`` (as ``kind`` says) named ``name``."""
    message: Any = {"artifact": mlmd.ArtifactType, "execution": mlmd.ExecutionType, "context": mlmd.ContextType}[kind]
    return message(id=type_id(kind, name), name=name)


def milliseconds(moment: dt.datetime | None) -> int:
    if moment is None:
        return 0
    if moment.tzinfo is None:  # SQLite gives back naive times; they were written in UTC
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return int(moment.timestamp() * 1000)


def value(given: Any) -> mlmd.Value | None:
    """A JSON value as MLMD's ``Value`` (None for a null, which MLMD has no value for)."""
    if given is None:
        return None
    if isinstance(given, bool):
        return mlmd.Value(bool_value=given)
    if isinstance(given, int):
        return mlmd.Value(int_value=given) if -(2**63) <= given < 2**63 else mlmd.Value(string_value=str(given))
    if isinstance(given, float):
        return mlmd.Value(double_value=given)
    if isinstance(given, str):
        return mlmd.Value(string_value=given)
    if isinstance(given, Mapping):
        struct = struct_pb2.Struct()
        struct.update(json.loads(json.dumps(given, default=str)))
        return mlmd.Value(struct_value=struct)
    return mlmd.Value(string_value=json.dumps(given, default=str))


def _fill(target: Any, properties: Mapping[str, Any] | None) -> None:
    for key, given in (properties or {}).items():
        converted = value(given)
        if converted is not None:
            target[str(key)].CopyFrom(converted)


def _custom(properties: Mapping[str, Any] | None) -> dict[str, Any]:
    """Custom properties with the execution references turned into MLMD ids (see the module's docstring)."""
    custom = dict(properties or {})
    for key in _REFERENCES_AS_TEXT:
        if isinstance(custom.get(key), str) and custom[key]:
            custom[key] = str(lineage.mlmd_id(custom[key]))
    for key in _REFERENCES_AS_INT:
        if isinstance(custom.get(key), str) and custom[key]:
            custom[key] = lineage.mlmd_id(custom[key])
    return custom


def artifact(row: LineageArtifact) -> mlmd.Artifact:
    message = mlmd.Artifact(
        id=row.mlmd_id, type_id=type_id("artifact", row.type), type=row.type, uri=row.uri, name=row.name,
        state=row.state if row.state in mlmd.Artifact.State.keys() else "UNKNOWN",
        create_time_since_epoch=milliseconds(row.created_at),
        last_update_time_since_epoch=milliseconds(row.updated_at))
    _fill(message.properties, row.properties)
    _fill(message.custom_properties, row.custom_properties)
    return message


def execution(row: LineageExecution) -> mlmd.Execution:
    state = row.state if row.state in mlmd.Execution.State.keys() else "UNKNOWN"
    message = mlmd.Execution(
        id=row.mlmd_id, type_id=type_id("execution", row.type), type=row.type, name=row.name,
        last_known_state=state,
        create_time_since_epoch=milliseconds(row.created_at),
        last_update_time_since_epoch=milliseconds(row.updated_at))
    _fill(message.properties, row.properties)
    _fill(message.custom_properties, _custom(row.custom_properties))
    return message


def context(row: LineageContext) -> mlmd.Context:
    """A context; a run's carries its ``namespace`` as KFP's run context does (multi-user mode only)."""
    created = milliseconds(row.created_at)
    message = mlmd.Context(id=row.mlmd_id, type_id=type_id("context", row.type), type=row.type, name=row.name,
                           create_time_since_epoch=created, last_update_time_since_epoch=created)
    custom = dict(row.custom_properties or {})
    if row.namespace:
        custom.setdefault("namespace", row.namespace)
    _fill(message.properties, row.properties)
    _fill(message.custom_properties, custom)
    return message


def node(kind: Kind, row: Any) -> Any:
    """The message of a row of ``kind``."""
    convert: dict[str, Callable[[Any], Any]] = {"artifact": artifact, "execution": execution, "context": context}
    return convert[kind](row)


def event(found: EventRow) -> mlmd.Event:
    """An event: its path is the one step KFP writes, the input's or output's name."""
    row = found.event
    message = mlmd.Event(artifact_id=found.artifact_mlmd_id, execution_id=found.execution_mlmd_id,
                         type=row.type if row.type in mlmd.Event.Type.keys() else "UNKNOWN",
                         milliseconds_since_epoch=milliseconds(row.created_at))
    message.path.steps.add(key=row.path)
    return message


def attribution(link: Link) -> mlmd.Attribution:
    return mlmd.Attribution(artifact_id=link.node_mlmd_id, context_id=link.context_mlmd_id)


def association(link: Link) -> mlmd.Association:
    return mlmd.Association(execution_id=link.node_mlmd_id, context_id=link.context_mlmd_id)

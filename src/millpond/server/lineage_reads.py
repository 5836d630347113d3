"""What the UI's lineage pages show (``server.lineage_routes``), read from the lineage tables: an execution as KFP's
Executions list and ExecutionDetails page show it, an execution's declared and actual inputs and outputs, and one
artifact's lineage neighbourhood (the executions that wrote and read it, with their other artifacts), which the
Lineage Explorer draws and expands a step at a time, as KFP's ``LineageView`` does from MLMD's events.

KFP's UI reads these from ML Metadata (``getExecutionsByID``, ``getEventsByArtifactIDs``, ``getEventsByExecutionIDs``);
here one call answers what it asks in several. Declared inputs and outputs are what the task's component declares in
the run's pipeline spec (its ``inputDefinitions``/``outputDefinitions``: artifacts with their schema, parameters with
their type and the value the task was given or wrote), and the actual ones are its events. KFP's page splits MLMD's
``DECLARED_INPUT``/``DECLARED_OUTPUT`` events from ``INPUT``/``OUTPUT``; KFP v2's launcher writes only the latter,
so the component's declarations stand in for the former (simplified: a sub-DAG's or a kfp 1.x step's declare none).

Every id and name goes out as data; the page puts it in as text. ``visible(namespace)`` says whether the caller may see
a neighbour of another namespace (multi-user): one it may not is left out, never shown as a stub.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from millpond.errors import NotFoundError
from millpond.server.artifact_routes import artifact_view
from millpond.store.lineage import INPUT, OUTPUT
from millpond.store.lineage_store import LineageStore
from millpond.store.lineage_tables import LineageArtifact, LineageEvent, LineageExecution
from millpond.store.runs import RunStore
from millpond.store.timestamps import iso

Visible = Callable[[str], bool]  # may the caller see lineage records of this namespace
MAX_NEIGHBOURS = 200  # executions on one side of an artifact (a dataset read by every run: its first 200 readers)


def execution_view(execution: LineageExecution) -> dict[str, Any]:
    """One execution: MLMD's fields and KFP's custom properties, with the ones the pages show picked out."""
    custom = dict(execution.custom_properties or {})
    return {
        "execution_id": execution.id, "name": execution.name, "type": execution.type, "state": execution.state,
        "display_name": _text(custom.get("display_name")) or execution.name,
        "task_name": _text(custom.get("task_name")), "namespace": execution.namespace,
        "run_id": execution.run_id or "", "cached_execution_id": _text(custom.get("cached_execution_id")),
        "created_at": iso(execution.created_at), "updated_at": iso(execution.updated_at),
        "properties": dict(execution.properties or {}), "custom_properties": custom,
    }


def artifact_summary(artifact: LineageArtifact) -> dict[str, Any]:
    """KFP's ``Artifact`` (``artifact_routes.artifact_view``) with the run whose task produced it."""
    return {**artifact_view(artifact), "run_id": artifact.run_id or ""}


@dataclass(frozen=True)
class Links:
    """An execution's events with their artifacts, as read for one answer."""

    events: list[LineageEvent]
    artifacts: dict[str, LineageArtifact]

    def of(self, execution_id: str, kind: str, visible: Visible) -> list[dict[str, Any]]:
        """The execution's INPUT or OUTPUT links: the input's or output's name, KFP's IOType and the artifact."""
        found = []
        for event in self.events:
            artifact = self.artifacts.get(event.artifact_id)
            if event.execution_id != execution_id or event.type != kind or artifact is None:
                continue
            if visible(artifact.namespace):
                found.append({"key": event.path, "io_type": event.io_type, "producer_task": event.producer_task,
                              "artifact": artifact_summary(artifact)})
        return found


def _links(lineage: LineageStore, execution_ids: Iterable[str]) -> Links:
    events = lineage.events_of(execution_ids=set(execution_ids))
    return Links(events, lineage.artifacts_by_id({event.artifact_id for event in events}))


def execution_detail(lineage: LineageStore, runs: RunStore, execution: LineageExecution,
                     visible: Visible) -> dict[str, Any]:
    """The execution page: the execution, its declared inputs and outputs and its actual ones (its events)."""
    links = _links(lineage, [execution.id])
    declared = _declared(runs, execution)
    return {"execution": execution_view(execution),
            "declared_inputs": declared[0], "declared_outputs": declared[1],
            "inputs": links.of(execution.id, INPUT, visible), "outputs": links.of(execution.id, OUTPUT, visible)}


def artifact_lineage(lineage: LineageStore, artifact: LineageArtifact, visible: Visible) -> dict[str, Any]:
    """The artifact, the executions that wrote it (producers: a cache hit's reuse is one too) and read it
    (consumers), each with all its inputs and outputs: one step of the Lineage Explorer either way."""
    events = lineage.events_of(artifact_ids=[artifact.id], limit=2 * MAX_NEIGHBOURS)
    executions = lineage.executions_by_id({event.execution_id for event in events})
    shown = {key: value for key, value in executions.items() if visible(value.namespace)}
    links = _links(lineage, shown)

    def side(kind: str) -> list[dict[str, Any]]:
        ids = list(dict.fromkeys(e.execution_id for e in events if e.type == kind and e.execution_id in shown))
        return [{"execution": execution_view(shown[i]), "inputs": links.of(i, INPUT, visible),
                 "outputs": links.of(i, OUTPUT, visible)} for i in ids[:MAX_NEIGHBOURS]]

    return {"artifact": artifact_summary(artifact), "producers": side(OUTPUT), "consumers": side(INPUT)}


# --- declared inputs and outputs: the task's component in its run's pipeline spec ----------------------------

def _declared(runs: RunStore, execution: LineageExecution) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(inputs, outputs) the component declares, each parameter with the value the task had; none for an
    execution of no run, a run deleted, a task not found or a spec without the component."""
    component_name = _text((execution.custom_properties or {}).get("component_name"))
    if not execution.run_id or not component_name:
        return [], []
    try:
        run = runs.find_run(execution.run_id)
        task = runs.get_task(execution.run_id, execution.id)
    except NotFoundError:
        return [], []
    components = (run.pipeline_spec or {}).get("components")
    component = components.get(component_name) if isinstance(components, Mapping) else None
    if not isinstance(component, Mapping):
        return [], []
    return (_definitions(component.get("inputDefinitions"), task.inputs),
            _definitions(component.get("outputDefinitions"), task.outputs))


def _definitions(definitions: Any, values: Any) -> list[dict[str, Any]]:
    """Artifacts (name, schema title) then parameters (name, type, the value given or written, when known)."""
    if not isinstance(definitions, Mapping):
        return []
    given = _mapping(_mapping(values).get("parameters"))
    found: list[dict[str, Any]] = []
    for name, spec in _mapping(definitions.get("artifacts")).items():
        schema = _mapping(_mapping(spec).get("artifactType"))
        found.append({"name": str(name), "kind": "artifact", "type": _text(schema.get("schemaTitle")),
                      "is_list": bool(_mapping(spec).get("isArtifactList"))})
    for name, spec in _mapping(definitions.get("parameters")).items():
        entry: dict[str, Any] = {"name": str(name), "kind": "parameter",
                                 "type": _text(_mapping(spec).get("parameterType")), "is_list": False}
        if name in given:
            entry["value"] = given[name]
        found.append(entry)
    return found


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""

"""Where a task's inputs come from, and what a DAG hands back as its outputs.

Mirrors the KFP driver's resolution: a DAG's own inputs, an upstream task's outputs,
constants (with run-time placeholders), an exit handler's ``taskFinalStatus``, CEL
selectors, and a DAG's outputs picked from its tasks (``OneOf`` takes the branch that ran).
"""

from __future__ import annotations

import json
import re
from typing import Any

from millpond.pipelines.conditions import select
from millpond.pipelines.graph import Artifacts, Node, Outputs, Scope
from millpond.pipelines.launcher import TaskError
from millpond.pipelines.values import coerce
from millpond.pipelines.views import ComponentSpec

WORKSPACE_PATH = "/kfp-workspace"  # kfp.dsl.constants.WORKSPACE_MOUNT_PATH
# The KFP backend reports a task's final state in ML Metadata's words.
_TASK_INPUT_TEXT = "{{$.inputs.parameters["
_INPUT_PLACEHOLDER = re.compile(r"\{\{\$\.inputs\.parameters\[(?P<quote>['\"])(?P<name>[^'\"\]]+)(?P=quote)\]\}\}")
_STATUS_STATES = {"SUCCEEDED": "COMPLETE", "FAILED": "FAILED", "CANCELED": "CANCELED", "SKIPPED": "CANCELED"}


def resolve_parameter(scope: Scope, binding: dict[str, Any], context: dict[str, str]) -> tuple[bool, Any]:
    """(found, value) of one parameter binding in ``scope``."""
    found, value = False, None
    if "componentInputParameter" in binding:
        key = binding["componentInputParameter"]
        found, value = key in scope.parameters, scope.parameters.get(key)
    elif "taskOutputParameter" in binding:
        ref = binding["taskOutputParameter"]
        produced = scope.nodes[ref["producerTask"]].outputs.parameters
        found, value = ref["outputParameterKey"] in produced, produced.get(ref["outputParameterKey"])
    elif "runtimeValue" in binding:
        found, value = True, binding["runtimeValue"].get("constant")
        if isinstance(value, str):
            value = value.replace("{{$.workspace_path}}", WORKSPACE_PATH)
            for key, text in context.items():
                value = value.replace("{{$." + key + "}}", text)
    elif "taskFinalStatus" in binding:
        producer = scope.nodes[binding["taskFinalStatus"]["producerTask"]]
        found, value = True, final_status(producer, context.get("pipeline_job_resource_name", ""))
    else:
        raise TaskError(f"parameter binding {sorted(binding)} is not supported")
    selector = binding.get("parameterExpressionSelector")
    if found and selector:
        value = select(selector, value)
    return found, value


def final_status(producer: Node, job_name: str) -> dict[str, object]:
    """The PipelineTaskFinalStatus an exit handler receives."""
    status: dict[str, object] = {
        "state": _STATUS_STATES.get(producer.state, "FAILED"),
        "pipelineJobResourceName": job_name,
        "pipelineTaskName": producer.display_name,
    }
    if producer.error:
        status["error"] = {"code": 2, "message": producer.error}
    return status


def resolve_artifact(scope: Scope, binding: dict[str, Any]) -> tuple[bool, list[dict[str, Any]]]:
    if "componentInputArtifact" in binding:
        key = binding["componentInputArtifact"]
        return key in scope.artifacts, scope.artifacts.get(key, [])
    if "taskOutputArtifact" in binding:
        ref = binding["taskOutputArtifact"]
        produced = scope.nodes[ref["producerTask"]].outputs.artifacts
        return ref["outputArtifactKey"] in produced, produced.get(ref["outputArtifactKey"], [])
    raise TaskError(f"artifact binding {sorted(binding)} is not supported")


def task_inputs(node: Node, component: dict[str, Any], context: dict[str, str]) -> tuple[dict[str, Any], Artifacts]:
    """A task's input values, with the component's defaults and types applied."""
    bindings = node.spec.get("inputs", {})
    parameters: dict[str, Any] = {}
    formatted: list[str] = []
    for name, binding in bindings.get("parameters", {}).items():
        found, value = resolve_parameter(node.scope, binding, context)
        if found:
            parameters[name] = value
            if "runtimeValue" in binding and isinstance(value, str) and _TASK_INPUT_TEXT in value:
                formatted.append(name)
    for name in formatted:
        parameters[name] = _format(name, parameters[name], parameters)
    artifacts: Artifacts = {}
    for name, binding in bindings.get("artifacts", {}).items():
        found, items = resolve_artifact(node.scope, binding)
        if found:
            artifacts[name] = items
    item_input = (node.spec.get("parameterIterator") or node.spec.get("artifactIterator") or {}).get("itemInput")
    view = ComponentSpec(node.component_name, component)
    for name, definition in view.input_parameters.items():
        if name == item_input:
            continue  # each iteration gets its own
        if name not in parameters or parameters[name] is None and not definition.is_optional:
            if definition.has_default:
                parameters[name] = definition.default
            elif not definition.is_optional:
                raise TaskError(f"input parameter {name!r} has no value")
        if name in parameters:
            parameters[name] = coerce(parameters[name], definition.type)
    for name, artifact in view.input_artifacts.items():
        if name not in artifacts and name != item_input and not artifact.is_optional:
            raise TaskError(f"input artifact {name!r} has no value")
    return parameters, artifacts


def _format(name: str, text: str, parameters: dict[str, Any]) -> str:
    """A constant holding the task's other inputs, as the KFP driver fills it: kfp 2's f-string arguments
    (``f"{a.output}-x"`` compiles to ``"{{$.inputs.parameters['pipelinechannel--a-Output']}}-x"`` plus that
    input), and kfp 1.x arguments that mix tags with text (``argo.to_ir``)."""

    def value(match: re.Match[str]) -> str:
        key = match.group("name")
        if key not in parameters or key == name:
            raise TaskError(f"input parameter {name!r}: {match.group(0)} names no input of the task")
        found = parameters[key]
        if isinstance(found, str):
            return found
        return json.dumps(found) if not isinstance(found, float) or not found.is_integer() else str(int(found))

    return _INPUT_PLACEHOLDER.sub(value, text)


def dag_outputs(scope: Scope) -> Outputs:
    """A DAG's outputs from its tasks; a selector over several tasks takes the first that produced one."""
    outputs = Outputs()
    spec = scope.component["dag"].get("outputs", {})
    for name, selector in spec.get("parameters", {}).items():
        refs = [selector["valueFromParameter"]] if "valueFromParameter" in selector else (
            selector.get("valueFromOneof", {}).get("parameterSelectors", [])
        )
        for ref in refs:
            produced = scope.nodes[ref["producerSubtask"]].outputs.parameters
            if ref["outputParameterKey"] in produced:
                outputs.parameters[name] = produced[ref["outputParameterKey"]]
                break
    for name, selector in spec.get("artifacts", {}).items():
        for ref in selector.get("artifactSelectors", []):
            produced = scope.nodes[ref["producerSubtask"]].outputs.artifacts
            if ref["outputArtifactKey"] in produced:
                outputs.artifacts[name] = produced[ref["outputArtifactKey"]]
                break
    return outputs


def loop_items(node: Node, parameters: dict[str, Any], artifacts: Artifacts) -> tuple[str, list[Any]]:
    """(item input name, items) of a ParallelFor task; an artifact loop's items are one-artifact lists."""
    if "artifactIterator" in node.spec:
        iterator = node.spec["artifactIterator"]
        source = iterator["items"]["inputArtifact"]
        return iterator["itemInput"], [[item] for item in artifacts.get(source, [])]
    iterator = node.spec["parameterIterator"]
    items_spec = iterator["items"]
    if "raw" in items_spec:
        raw, where = items_spec["raw"], "its raw items"
    else:
        raw, where = parameters.get(items_spec["inputParameter"]), f"input {items_spec['inputParameter']!r}"
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            raise TaskError(
                f"loop {node.display_name!r}: {where} is not a list (got the string {raw[:60]!r})"
            ) from None
    if not isinstance(value, list):
        raise TaskError(
            f"loop {node.display_name!r}: {where} is not a list "
            f"(got {type(value).__name__}: {json.dumps(value)[:60]})"
        )
    return iterator["itemInput"], value


def collect_iterations(node: Node) -> Outputs:
    """A loop's outputs: each output gathered across iterations, in order (dsl.Collected)."""
    outputs = Outputs()
    for index in sorted(node.iterations):
        produced = dag_outputs(node.iterations[index])
        for name, value in produced.parameters.items():
            outputs.parameters.setdefault(name, []).append(value)
        for name, items in produced.artifacts.items():
            outputs.artifacts.setdefault(name, []).extend(items)
    return outputs

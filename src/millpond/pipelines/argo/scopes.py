"""The values Argo's tags resolve from, built as Argo builds them: a run's, a task's inputs, a task's outputs.

Pure functions over the model (no engine, no store), so the mapping onto millpond's engine
only gathers what a run produced and asks here what Argo would make of it:

- ``workflow_values``: ``workflow.name``/``uid``/``namespace`` and ``workflow.parameters.X``
  (given values over the workflow's defaults; a missing required one is the user's error);
- ``bind_inputs``: a template's input parameters as Argo's ``ProcessArgs`` binds them (the
  template's ``value`` or ``default``, overridden by the task's argument; none of these: fails);
- ``output_parameter``: a ``valueFrom.path`` file's text with one trailing newline trimmed, as
  Argo's executor saves it (``SaveParameters``), or the ``default`` when the file is missing;
- ``json_path_value``: a resource template's ``jsonPath`` output read from the created object;
- ``task_values``: ``tasks.T.outputs.parameters.P`` (or ``steps.``) for the tasks after T.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from millpond.errors import TaskFailure, UserError
from millpond.pipelines.argo.model import OutputParameter, Template, Workflow
from millpond.pipelines.argo.templating import value_text


class BindingError(TaskFailure):
    """An input a task cannot get, or an output it did not leave: the task fails with this line."""


def workflow_values(
    workflow: Workflow, run_name: str, run_uid: str, given: Mapping[str, object], namespace: str = "default"
) -> dict[str, str]:
    """The run-wide tags. ``given`` are the submitted parameters; an unknown or missing one is a UserError."""
    declared = {p.name for p in workflow.parameters}
    unknown = sorted(set(given) - declared)
    if unknown:
        raise UserError(f"{workflow.source}: no pipeline parameter named {unknown[0]!r} "
                        f"(it has: {', '.join(sorted(declared)) or 'none'})")
    missing = workflow.missing_parameters(given)
    if missing:
        raise UserError(f"{workflow.source}: pipeline parameter {missing[0]!r} is required and was not given")
    values = {"workflow.name": run_name, "workflow.uid": run_uid, "workflow.namespace": namespace}
    for parameter in workflow.parameters:
        value = given[parameter.name] if parameter.name in given else parameter.value
        values[f"workflow.parameters.{parameter.name}"] = value_text(value)
    return values


def bind_inputs(template: Template, arguments: Mapping[str, str]) -> dict[str, str]:
    """``inputs.parameters.X`` → text for one task of ``template`` given its (resolved) arguments."""
    values: dict[str, str] = {}
    for parameter in template.inputs.parameters:
        value = parameter.value if parameter.value is not None else parameter.default
        if parameter.name in arguments:
            value = arguments[parameter.name]
        if value is None:
            raise BindingError(f"inputs.parameters.{parameter.name} was not supplied")
        values[f"inputs.parameters.{parameter.name}"] = value
    return values


def output_parameter(parameter: OutputParameter, file_text: str | None) -> str:
    """A ``valueFrom.path`` output: the file's text less one trailing newline; its default when there is no file."""
    if file_text is None:
        if parameter.default is not None:
            return parameter.default
        raise BindingError(f"output parameter {parameter.name!r}: the step left no file at {parameter.path}")
    return file_text[:-1] if file_text.endswith("\n") else file_text


def json_path_value(document: object, path: tuple[str, ...], name: str) -> str:
    """A ``jsonPath`` output of a created object: ``()`` is the whole object as JSON, a string field its text.

    Other values are their compact JSON, as kubectl's jsonpath prints maps and lists. A field the
    object lacks fails the task, naming it (a VolumeSnapshot's ``status.restoreSize`` is filled by
    whoever emulates the snapshot, so it must be there).
    """
    value = document
    for depth, key in enumerate(path):
        if not isinstance(value, dict) or key not in value:
            raise BindingError(f"output parameter {name!r}: the object has no .{'.'.join(path[:depth + 1])}")
        value = value[key]
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def task_values(task: str, parameters: Mapping[str, str], artifacts: Mapping[str, str] | None = None,
                prefix: str = "tasks") -> dict[str, str]:
    """The tags a finished task defines for its siblings: its output parameters, its artifacts (by name)."""
    values = {f"{prefix}.{task}.outputs.parameters.{name}": text for name, text in parameters.items()}
    values.update({f"{prefix}.{task}.outputs.artifacts.{name}": ref for name, ref in (artifacts or {}).items()})
    return values

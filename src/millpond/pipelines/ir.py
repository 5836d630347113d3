"""Validation of, and small typed accessors over, KFP IR (PipelineSpec) dictionaries.

The IR stays a plain dict (it is stored as JSON and sent over the API as such); this module
is the one place that knows its field names, so the engine reads like the KFP driver.
"""

from __future__ import annotations

import json
import re
from typing import Any

from millpond.durations import DurationError, parse_protobuf_duration
from millpond.errors import UserError
from millpond.pipelines.conditions import check_expression
from millpond.pipelines.names import check_io_names, check_pipeline_name, check_task_name
from millpond.pipelines.protos import kubernetes_executor_config_pb2, pipeline_spec_pb2
from millpond.pipelines.retries import DURATION_FIELDS
from millpond.pipelines.workflow_limits import workflow_limits

_PARSE_PREFIX = re.compile(r"^(Failed to parse \w+ field: )+")


def _proto_error(exc: Exception) -> str:
    """Shorten protobuf's nested ParseError to its innermost sentence."""
    first = str(exc).splitlines()[0]
    first = _PARSE_PREFIX.sub("", first).rstrip(".")
    unknown = re.search(r'has no field named "([^"]+)" at "([^"]+)"', first)
    if unknown:
        field, where = unknown.groups()
        where = where.split(".", 1)[1] if "." in where else where
        return f"unknown field {field!r} at {where}"
    return first


def validate_pipeline_spec(spec: object, source: str) -> None:
    """Reject what the KFP backend would reject: not IR, unknown fields, dangling references."""
    if not isinstance(spec, dict):
        raise UserError(f"{source}: not a KFP pipeline spec (expected a mapping, got {type(spec).__name__})")
    missing = [key for key in ("root", "pipelineInfo") if key not in spec]
    if missing:
        raise UserError(f"{source}: not a KFP pipeline spec (missing {', '.join(missing)})")
    _check_retry_durations(spec, source)
    from google.protobuf import json_format  # noqa: PLC0415 - protobuf (~40 ms) with the first spec checked

    try:
        json_format.ParseDict(spec, pipeline_spec_pb2().PipelineSpec())
    except json_format.ParseError as exc:
        raise UserError(f"{source}: invalid pipeline spec: {_proto_error(exc)}") from None
    check_pipeline_name(spec["pipelineInfo"].get("name"), source)
    components = spec.get("components", {})
    executors = spec.get("deploymentSpec", {}).get("executors", {})
    if not isinstance(executors, dict):
        raise UserError(f"{source}: deploymentSpec.executors must be a mapping, got {type(executors).__name__}")
    for label, executor_spec in executors.items():
        check_executor(label, executor_spec, source)
    root = spec["root"]
    if "dag" not in root:
        raise UserError(f"{source}: root has no dag")
    check_io_names("root", root, source)
    _check_dag("root", root, components, source)
    for name, component in components.items():
        check_io_names(name, component, source)
        label = component.get("executorLabel")
        if label and label not in executors:
            raise UserError(
                f"{source}: component {name!r} names executor {label!r}, which deploymentSpec.executors lacks"
            )
        if "dag" in component:
            _check_dag(name, component, components, source)
        if not label and "dag" not in component:
            raise UserError(f"{source}: component {name!r} has neither an executorLabel nor a dag")


def _check_retry_durations(spec: dict[str, Any], source: str) -> None:
    """Each task's retryPolicy durations in protobuf's JSON form, as the KFP backend (Go protojson) reads them.

    Checked before protobuf's Python parser, which is laxer (it takes ``" 1s"`` and ``"1_0s"``) and,
    for ``"1m30s"``, answers with a line about ``int()``. Shapes protobuf refuses are left to it.
    """
    components = spec.get("components")
    owners = [("root", spec.get("root")), *(components.items() if isinstance(components, dict) else ())]
    for owner, component in owners:
        dag = component.get("dag") if isinstance(component, dict) else None
        tasks = dag.get("tasks") if isinstance(dag, dict) else None
        for task_name, task in tasks.items() if isinstance(tasks, dict) else ():
            policy = task.get("retryPolicy") if isinstance(task, dict) else None
            if not isinstance(policy, dict):
                continue
            for field in DURATION_FIELDS:
                value = policy.get(field)
                if isinstance(value, str):
                    try:
                        parse_protobuf_duration(value, f"{owner}.dag.tasks[{task_name}].retryPolicy.{field}")
                    except DurationError as exc:
                        raise UserError(f"{source}: {exc}") from None


def _check_dag(owner: str, component: dict[str, Any], components: dict[str, Any], source: str) -> None:
    tasks = component["dag"].get("tasks", {})
    for task_name, task in tasks.items():
        check_task_name(task_name, owner, source)
        where = f"{owner}.dag.tasks[{task_name}]"
        ref = task.get("componentRef", {}).get("name")
        if not ref:
            raise UserError(f"{source}: {where} has no componentRef")
        if ref not in components:
            raise UserError(f"{source}: {where} references component {ref!r}, which is not defined")
        raw = task.get("parameterIterator", {}).get("items", {}).get("raw")
        if raw is not None:
            try:
                items = json.loads(raw)
            except json.JSONDecodeError:
                items = None
            if not isinstance(items, list):
                raise UserError(f"{source}: {where} loops over {raw!r}, which is not a JSON list")
        condition = task.get("triggerPolicy", {}).get("condition")
        if condition:
            check_expression(condition, f"{source}: {where}.triggerPolicy.condition")
        for kind in ("parameters",):
            for input_name, binding in task.get("inputs", {}).get(kind, {}).items():
                if binding.get("parameterExpressionSelector"):
                    check_expression(binding["parameterExpressionSelector"], f"{source}: {where} input {input_name!r}")
        for dep in task.get("dependentTasks", []):
            if dep not in tasks:
                raise UserError(f"{source}: {where} depends on task {dep!r}, which {owner} does not have")
        inputs = task.get("inputs", {})
        for kind in ("parameters", "artifacts"):
            for input_name, binding in inputs.get(kind, {}).items():
                producer = _producer(binding)
                if producer is not None and producer not in tasks:
                    raise UserError(
                        f"{source}: {where} input {input_name!r} comes from task {producer!r}, "
                        f"which {owner} does not have"
                    )
    cycle = find_cycle({name: task_dependencies(task) for name, task in tasks.items()})
    if cycle:
        dag = "root DAG" if owner == "root" else f"DAG of component {owner!r}"
        raise UserError(f"{source}: {dag} has a cycle: {' → '.join(cycle)} (each task waits for the next)")


def _producer(binding: dict[str, Any]) -> str | None:
    """The task whose output (or final status) an input binding takes, if any."""
    reference = (
        binding.get("taskOutputParameter") or binding.get("taskOutputArtifact") or binding.get("taskFinalStatus")
    )
    if not reference:
        return None
    return str(reference.get("producerTask", ""))


def task_dependencies(task: dict[str, Any]) -> set[str]:
    """The tasks of the same DAG that ``task`` waits for: its dependentTasks and the producers of its inputs."""
    deps = {str(dep) for dep in task.get("dependentTasks", [])}
    for kind in ("parameters", "artifacts"):
        for binding in task.get("inputs", {}).get(kind, {}).values():
            producer = _producer(binding)
            if producer is not None:
                deps.add(producer)
    return deps


def find_cycle(dependencies: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph ``task -> the tasks it waits for``, as ``[a, b, a]`` (a runs after b after a), or None.

    Iterative depth-first search, so a 10,000-task chain cannot exhaust Python's recursion limit.
    """
    done: set[str] = set()
    for start in dependencies:
        if start in done:
            continue
        path: list[str] = [start]
        on_path = {start}
        stack = [iter(sorted(dependencies.get(start, ())))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                continue
            if nxt in on_path:
                return path[path.index(nxt):] + [nxt]
            if nxt in done or nxt not in dependencies:
                continue
            path.append(nxt)
            on_path.add(nxt)
            stack.append(iter(sorted(dependencies.get(nxt, ()))))
    return None


def check_executor(label: str, executor_spec: object, source: str) -> None:
    """What the KFP driver would reject only at run time: a container whose command or args are not lists of strings."""
    if not isinstance(executor_spec, dict):
        raise UserError(
            f"{source}: deploymentSpec.executors[{label}] must be a mapping, got {type(executor_spec).__name__}"
        )
    container = executor_spec.get("container")
    if container is None:
        return
    if not isinstance(container, dict):
        raise UserError(f"{source}: executor {label!r}: container must be a mapping, got {type(container).__name__}")
    for field_name in ("command", "args"):
        value = container.get(field_name)
        if value is None:
            continue
        if not isinstance(value, list):
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            raise UserError(
                f"{source}: executor {label!r}: container {field_name} must be a list of strings, "
                f"got {type(value).__name__} {shown}"
            )
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise UserError(
                    f"{source}: executor {label!r}: container {field_name}[{index}] must be a string, "
                    f"got {type(item).__name__}"
                )


def validate_platform_spec(platform: dict[str, Any], spec: dict[str, Any], source: str) -> None:
    """Check the kfp-kubernetes document: known fields, and only executors the IR has; and a translated
    Argo workflow's run-wide limits (``platforms.argo``, ``pipelines.workflow_limits``)."""
    workflow_limits(platform, source)
    kubernetes = (platform.get("platforms") or {}).get("kubernetes") or {}
    executors = (kubernetes.get("deploymentSpec") or {}).get("executors") or {}
    known = spec.get("deploymentSpec", {}).get("executors", {})
    from google.protobuf import json_format  # noqa: PLC0415 - protobuf (~40 ms) with the first spec checked

    k8s = kubernetes_executor_config_pb2()
    for label, config in executors.items():
        if label not in known:
            raise UserError(f"{source}: platform spec configures executor {label!r}, which the pipeline does not have")
        try:
            json_format.ParseDict(config, k8s.KubernetesExecutorConfig())
        except json_format.ParseError as exc:
            raise UserError(f"{source}: invalid kubernetes config of {label}: {_proto_error(exc)}") from None


# --- accessors -----------------------------------------------------------------------------


def kubernetes_config(platform: dict[str, Any] | None, executor_label: str) -> dict[str, Any]:
    if not platform:
        return {}
    executors = platform.get("platforms", {}).get("kubernetes", {}).get("deploymentSpec", {}).get("executors", {})
    return executors.get(executor_label) or {}

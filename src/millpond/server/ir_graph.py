"""A KFP v2 (IR) pipeline's graph for the UI, as KFP v2's UI draws it (``frontend/src/lib/v2/StaticFlow.ts``,
``DynamicFlow.ts``): a node per task (sub-DAGs and recorded loop iterations included), and a node per
output artifact between its producer and its consumers.

- **Artifact nodes.** Each output artifact a task's component declares (``outputDefinitions.artifacts``)
  is a node of kind ``artifact`` named by its key (KFP's label), in the producer's DAG, depending on
  the producer; a task that takes it (``taskOutputArtifact``) depends on the artifact node instead of
  on the producer, unless a parameter or ``.after()`` ties the two as well (KFP then draws both edges;
  here the producer edge is left out when ``dependentTasks`` is the only other tie, as kfp's compiler
  writes the artifact's producer there too: the artifact path already says the order). In a run the
  node carries what the producer recorded (``outputs.artifacts[KEY]``, its URI and metadata) and
  ``state`` ``LIVE`` once recorded (MLMD's Artifact state, as KFP colours it), else no state.
  Simplified: a pipeline's (or sub-DAG's) input artifacts are not drawn as nodes of their own.
- **Condition nodes.** A ``dsl.If`` / ``dsl.Condition`` / ``dsl.Elif`` group is a sub-DAG task with
  ``triggerPolicy.condition``; its node keeps kind ``dag`` and gets ``condition``, the expression as
  the user wrote it (``exists == False``), read back from the CEL kfp compiles
  (``inputs.parameter_values['pipelinechannel--exists'] == false``).

Node paths: a task's is its IR path (``condition-1/train``); an artifact's is ``PRODUCER@KEY``
(a task key never holds ``@``).
"""

from __future__ import annotations

import re
from typing import Any

from millpond.server.workflow_graph import task_node
from millpond.store.models import Task

_CHANNEL = re.compile(r"""inputs\.parameter_values\[\s*['"]pipelinechannel--([^'"]+)['"]\s*\]""")
_QUOTED = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
_CEL_WORDS = {"true": "True", "false": "False", "null": "None", "&&": "and", "||": "or"}
_CEL_WORD = re.compile(r"\btrue\b|\bfalse\b|\bnull\b|&&|\|\|")


def ir_nodes(spec: dict[str, Any], tasks: dict[str, Task]) -> list[dict[str, Any]]:
    """Every task of an IR pipeline (sub-DAGs and recorded loop iterations) and output artifact, with records."""
    nodes: list[dict[str, Any]] = []
    _walk(spec.get("root") or {}, "", None, spec.get("components") or {}, tasks, nodes)
    known = {node["path"] for node in nodes}
    for path, task in tasks.items():  # recorded but not found in the spec: still show it
        if path not in known:
            parent = path.rsplit("/", 1)[0] if "/" in path else None
            nodes.append(task_node(path, task.name, parent, [], task.kind, tasks))
            known.add(path)
    return nodes


def condition_text(cel: str) -> str:
    """kfp's compiled condition as the user wrote it: channels by name, CEL's words as Python's."""
    parts = _QUOTED.split(_CHANNEL.sub(lambda m: m.group(1), cel))
    # outside quotes only ('true' as a string stays as it is); split keeps the quoted pieces at odd places
    return "".join(part if index % 2 else _CEL_WORD.sub(lambda m: _CEL_WORDS[m.group(0)], part)
                   for index, part in enumerate(parts))


def artifact_path(producer: str, key: str) -> str:
    return f"{producer}@{key}"


def _walk(component: dict[str, Any], scope: str, parent: str | None, components: dict[str, Any],
          tasks: dict[str, Task], nodes: list[dict[str, Any]]) -> None:
    specs = (component.get("dag") or {}).get("tasks") or {}

    def full(key: str) -> str:
        return f"{scope}/{key}" if scope else key

    for key, task_spec in specs.items():
        path = full(key)
        child = components.get((task_spec.get("componentRef") or {}).get("name", "")) or {}
        is_loop = "parameterIterator" in task_spec or "artifactIterator" in task_spec
        if is_loop:
            kind = "loop"
        elif "dag" in child:
            kind = "dag"
        else:
            kind = "importer" if "importer" in task_spec else "container"
        name = (task_spec.get("taskInfo") or {}).get("name") or key
        task_deps, artifact_deps = _dependencies(task_spec, set(specs))
        deps = [full(d) for d in sorted(task_deps)] + [artifact_path(full(p), k) for p, k in artifact_deps]
        node = task_node(path, name, parent, deps, kind, tasks)
        condition = (task_spec.get("triggerPolicy") or {}).get("condition")
        if isinstance(condition, str) and condition:
            node["condition"] = condition_text(condition)
        nodes.append(node)
        nodes.extend(_artifact_nodes(path, parent, child, tasks))
        if is_loop:
            prefix = f"{path}/iteration-"
            iterations = sorted((p for p in tasks if p.startswith(prefix) and "/" not in p[len(prefix):]),
                                key=lambda p: int(p[len(prefix):]) if p[len(prefix):].isdigit() else 0)
            for iteration in iterations:
                nodes.append(task_node(iteration, tasks[iteration].name, path, [], "iteration", tasks))
                _walk(child, iteration, iteration, components, tasks, nodes)
        elif "dag" in child:
            _walk(child, path, path, components, tasks, nodes)


def _artifact_nodes(producer: str, parent: str | None, component: dict[str, Any],
                    tasks: dict[str, Task]) -> list[dict[str, Any]]:
    """The producer's output artifacts as nodes beside it (what it recorded, once it did)."""
    declared = (component.get("outputDefinitions") or {}).get("artifacts") or {}
    record = tasks.get(producer)
    recorded = ((record.outputs or {}).get("artifacts") or {}) if record is not None else {}
    out: list[dict[str, Any]] = []
    for key, definition in declared.items():
        artifact_type = ((definition or {}).get("artifactType") or {}).get("schemaTitle") or ""
        node: dict[str, Any] = {"path": artifact_path(producer, key), "name": key, "parent": parent,
                                "deps": [producer], "kind": "artifact", "artifact_type": artifact_type,
                                "producer": producer, "state": None}
        entries = recorded.get(key)
        if entries:
            node.update(state="LIVE", outputs={"artifacts": {key: entries}},
                        producer_state=record.state if record is not None else None)
        out.append(node)
    return out


def _dependencies(task_spec: dict[str, Any], siblings: set[str]) -> tuple[set[str], list[tuple[str, str]]]:
    """(the sibling tasks it waits for directly, the (producer, key) artifacts of siblings it takes)."""
    direct: set[str] = set()
    artifacts: list[tuple[str, str]] = []
    inputs = task_spec.get("inputs") or {}
    for binding in (inputs.get("parameters") or {}).values():
        ref = binding.get("taskOutputParameter") or binding.get("taskFinalStatus")
        if isinstance(ref, dict) and ref.get("producerTask"):
            direct.add(ref["producerTask"])
    for binding in (inputs.get("artifacts") or {}).values():
        ref = binding.get("taskOutputArtifact")
        if isinstance(ref, dict) and ref.get("producerTask") in siblings and ref.get("outputArtifactKey"):
            pair = (ref["producerTask"], ref["outputArtifactKey"])
            if pair not in artifacts:
                artifacts.append(pair)
        elif isinstance(ref, dict) and ref.get("producerTask"):
            direct.add(ref["producerTask"])
    through_artifact = {producer for producer, _ in artifacts}
    # dependentTasks: kfp lists an artifact's producer there too; drawn through the artifact node only
    direct |= {d for d in task_spec.get("dependentTasks") or [] if d not in through_artifact}
    return direct & siblings, sorted(artifacts)

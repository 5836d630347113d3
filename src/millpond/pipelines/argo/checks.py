"""The references between a workflow's templates, checked as Argo's validator checks them before a run.

The entrypoint and every task's template exist; dependencies, ``depends`` and ``{{tasks.T...}}``
tags name tasks of the same DAG; ``{{inputs.parameters.X}}`` names a declared input and
``{{workflow.parameters.X}}`` a workflow parameter; every required input gets an argument;
mounts name volumes; DAG dependencies have no cycle.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

from millpond.pipelines.argo import templating, when
from millpond.pipelines.argo.fields import Fields
from millpond.pipelines.argo.model import Container, Task, Template, Workflow

_DEPENDS_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z]+)?")
_DEPENDS_RESULTS = frozenset({
    "Succeeded", "Failed", "Errored", "Skipped", "Omitted", "Daemoned", "AnySucceeded", "AllFailed",
})


def check_workflow(fields: Fields, workflow: Workflow) -> None:
    """Refuse (UserError, naming where) a workflow whose templates do not fit together."""
    _Checker(fields, workflow).check()


class _Checker:
    """The references between templates, as Argo's validator checks them before a workflow runs."""

    def __init__(self, reader: Fields, workflow: Workflow) -> None:
        self.reader, self.workflow = reader, workflow

    def fail(self, where: str, problem: str) -> NoReturn:
        self.reader.fail(where, problem)

    def check(self) -> None:
        workflow = self.workflow
        for role, name in (("spec.entrypoint", workflow.entrypoint), ("spec.onExit", workflow.on_exit)):
            if name and name not in workflow.templates:
                self.fail(role, f"no template named {name[:60]!r}")
        declared = {p.name for p in workflow.parameters}
        for template in workflow.templates.values():
            self.check_template(template, declared)
        entry = workflow.templates[workflow.entrypoint]
        missing = [p.name for p in entry.inputs.parameters
                   if p.value is None and p.default is None and p.name not in declared]
        if missing:
            self.fail("spec.arguments.parameters", f"the entrypoint's input {missing[0]!r} is not a workflow parameter")
        given = {a.name for a in workflow.artifacts}
        for artifact in entry.inputs.artifacts:
            if artifact.raw is None and not artifact.optional and artifact.name not in given:
                self.fail("spec.arguments.artifacts", f"the entrypoint's artifact {artifact.name!r} gets no argument")
        for index, argument in enumerate(workflow.artifacts):
            for tag in templating.tags(argument.raw or argument.from_ or ""):
                where = f"spec.arguments.artifacts[{index}]"
                templating.check_tag(tag, f"{self.reader.source}: {where}")
                if not tag.startswith("workflow.parameters.") or tag.split(".", 2)[2] not in declared:
                    self.fail(where, f"{{{{{tag[:80]}}}}} is not a workflow parameter")

    def check_template(self, template: Template, declared: set[str]) -> None:
        where = f"template {template.name[:60]!r}"
        inputs = {p.name for p in template.inputs.parameters}
        artifacts = {a.name for a in template.inputs.artifacts}
        tasks = {task.name for task in template.dag} | {s.name for group in template.steps for s in group}
        for at, text in _strings_of(template):
            for tag in templating.tags(text):
                templating.check_tag(tag, f"{self.reader.source}: {where}{at}")
                self.check_reference(tag, f"{where}{at}", inputs, artifacts, tasks, declared)
        volumes = {v.name for v in (*template.volumes, *self.workflow.volumes)}
        for container in _containers(template):
            for mount in container.volume_mounts:
                if mount.name not in volumes:
                    self.fail(where, f"volume mount {mount.name[:60]!r} names no volume of the template or workflow")
        if template.kind == "dag":
            self.check_dag(template, where)
        for task in (*template.dag, *(s for group in template.steps for s in group)):
            self.check_task(task, where)

    def check_reference(self, tag: str, where: str, inputs: set[str], artifacts: set[str], tasks: set[str],
                        declared: set[str]) -> None:
        parts = tag.split(".")
        if tag.startswith("inputs.parameters.") and tag[len("inputs.parameters."):] not in inputs:
            self.fail(where, f"{{{{{tag[:80]}}}}} names no input parameter of the template")
        artifact = tag[len("inputs.artifacts."):].removesuffix(".path")
        if tag.startswith("inputs.artifacts.") and artifact not in artifacts:
            self.fail(where, f"{{{{{tag[:80]}}}}} names no input artifact of the template")
        if tag.startswith(("tasks.", "steps.")) and parts[1] not in tasks:
            self.fail(where, f"{{{{{tag[:80]}}}}} names no task of this template")
        if tag.startswith("workflow.parameters.") and tag[len("workflow.parameters."):] not in declared:
            self.fail(where, f"{{{{{tag[:80]}}}}} names no workflow parameter")

    def check_task(self, task: Task, where: str) -> None:
        at = f"{where}, task {task.name[:60]!r}"
        target = self.workflow.templates.get(task.template)
        if target is None:
            self.fail(at, f"no template named {task.template[:60]!r}")
        if task.on_exit and task.on_exit not in self.workflow.templates:
            self.fail(at, f"onExit names no template {task.on_exit[:60]!r}")
        given = {p.name for p in task.arguments.parameters}
        for parameter in target.inputs.parameters:
            if parameter.value is None and parameter.default is None and parameter.name not in given:
                self.fail(at, f"input parameter {parameter.name!r} of template {target.name!r} gets no argument")
        given_artifacts = {a.name for a in task.arguments.artifacts}
        for artifact in target.inputs.artifacts:
            if artifact.raw is None and not artifact.optional and artifact.name not in given_artifacts:
                self.fail(at, f"input artifact {artifact.name!r} of template {target.name!r} gets no argument")

    def check_dag(self, template: Template, where: str) -> None:
        names = [task.name for task in template.dag]
        if len(set(names)) != len(names):
            self.fail(where, "two tasks of the same name")
        edges: dict[str, set[str]] = {}
        for task in template.dag:
            upstream = set(task.dependencies)
            for word in _DEPENDS_WORD.findall(task.depends):
                base, _, result = word.partition(".")
                if result and result not in _DEPENDS_RESULTS:
                    self.fail(f"{where}, task {task.name!r}", f"depends: {word!r} is not a task result")
                upstream.add(base)
            if task.depends:  # its syntax is a when's (&&, ||, !, parentheses) over task results as booleans
                when.check(_DEPENDS_WORD.sub("true", task.depends), f"{self.reader.source}: {where}, task "
                                                                     f"{task.name!r}.depends")
            for name in upstream:
                if name not in names:
                    self.fail(f"{where}, task {task.name!r}", f"depends on {name[:60]!r}, which is no task of this DAG")
            edges[task.name] = upstream
        cycle = _cycle(edges)
        if cycle:
            self.fail(where, f"dependency cycle: {' -> '.join(cycle)}")


def _cycle(edges: dict[str, set[str]]) -> list[str]:
    """One dependency cycle (as a path back to its start), or [] when the graph is acyclic. Iterative."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in edges:
        if start in state:
            continue
        path: list[str] = [start]
        iterators = [iter(sorted(edges[start]))]
        state[start] = 1
        while iterators:
            following = next(iterators[-1], None)
            if following is None:
                state[path.pop()] = 2
                iterators.pop()
            elif state.get(following) == 1:
                return [*path[path.index(following):], following]
            elif following not in state:
                state[following] = 1
                path.append(following)
                iterators.append(iter(sorted(edges.get(following, ()))))
    return []


def _containers(template: Template) -> list[Container]:
    found = [s.container for s in template.sidecars]
    if template.container is not None:
        found.append(template.container)
    if template.script is not None:
        found.append(template.script.container)
    return found


def _strings_of(template: Template) -> list[tuple[str, str]]:
    """(where, text) for every string of a template where Argo resolves tags (not its metadata)."""
    found: list[tuple[str, str]] = []
    for container in _containers(template):
        found += [(".image", container.image)]  # kfp 1.x writes a pipeline parameter there (image=param)
        found += [(".command", t) for t in container.command] + [(".args", t) for t in container.args]
        found += [(f".env {e.name}", e.value) for e in container.env if e.value]
        found += [(".volumeMounts", m.sub_path) for m in container.volume_mounts]
        found += [(".resources", q) for _, q in (*container.resources.requests, *container.resources.limits)]
        found += [(".workingDir", container.working_dir)]
    if template.script is not None:
        found.append((".script.source", template.script.source))
    if template.resource is not None:
        found += [(".resource.manifest", text) for text in _texts(template.resource.manifest)]
    if template.pod_spec_patch is not None:
        found += [(".podSpecPatch", text) for text in _texts(template.pod_spec_patch)]
    found += [(".volumes", v.source) for v in template.volumes]
    found += [(".outputs", p.value or p.parameter or "") for p in template.outputs.parameters]
    found += [(".outputs", a.from_ or "") for a in template.outputs.artifacts]
    for task in (*template.dag, *(s for group in template.steps for s in group)):
        at = f", task {task.name[:60]!r}"
        found += [(f"{at}.arguments", p.value) for p in task.arguments.parameters]
        found += [(f"{at}.arguments", a.from_ or "") for a in task.arguments.artifacts]
        found += [(f"{at}.when", task.when), (f"{at}.withParam", task.with_param)]
        found += [(f"{at}.withItems", text) for text in _texts(list(task.with_items or ()))]
    return found


def _texts(value: Any) -> list[str]:
    """Every string (keys too) inside a JSON value, iteratively."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            found += [str(k) for k in item]
            stack += list(item.values())
        elif isinstance(item, list):
            stack += item
    return found


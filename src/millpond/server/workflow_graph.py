"""A kfp 1.x run's graph drawn from its Argo workflow, as Kubeflow's v1 UI drew it.

The engine runs the workflow's translation (``pipelines.argo.to_ir``), whose DAG has more than
the user wrote: the entrypoint as a task of its own, ``for-loop-T-N`` DAGs around looped tasks,
render tasks (``argo-items-T``) and the workflow's raw artifacts (``argo-artifact-N``). A v1 user
knows the workflow's steps, so the graph is drawn from the workflow: one node per DAG task or
step under the names the workflow gives them, a looped task once per item (``echo(0:alpha)``,
Argo's node names), a DAG template (a ``dsl.Condition``, a sub-graph) as a group node its tasks
hang from (a task's ``when`` as its ``condition``, which v1's UI showed as "Run when"), and the
``onExit`` step after everything. Each node carries the IR task path the
engine records it under (``ENTRY/T``, ``ENTRY/T/iteration-K/T``, ``exit-X``), so its record
(state, inputs, outputs, log) is found by path. The graph is flat (every node's ``parent`` is
None), as v1's runtime graph was: a task inside a DAG node depends on that node, a task after
it on its last tasks.

Before a run (a pipeline version) there are no records: a looped task is one node. In a run,
a node with no record is PENDING while the run goes on and SKIPPED once it ended (its branch
never ran). Recursive templates are expanded only as deep as the run recorded them.
"""

from __future__ import annotations

import copy
import json
from collections import deque
from typing import Any

from millpond.errors import UserError
from millpond.pipelines.argo.model import Task as ArgoTask
from millpond.pipelines.argo.model import Template, Workflow
from millpond.pipelines.argo.reader import read_workflow
from millpond.pipelines.argo.to_ir import LOOP_ITEM
from millpond.runners.containers.policy import RAN_IN
from millpond.store.models import Task
from millpond.store.timestamps import iso

MAX_NODES = 5000  # nodes past this are left out: the page must stay drawable
_GROUPS = ("dag", "steps")


def task_node(
    path: str, name: str, parent: str | None, deps: list[str], kind: str, tasks: dict[str, Task]
) -> dict[str, Any]:
    """One node of a run's graph: where it is drawn, merged with what the store recorded for its task."""
    node: dict[str, Any] = {
        "path": path, "name": name, "parent": parent, "deps": deps, "kind": kind, "state": "PENDING"
    }
    task = tasks.get(path)
    if task is not None:
        node.update(
            task_id=task.id, state=task.state, cached=bool(task.cached), component=task.component, image=task.image,
            inputs=task.inputs or {}, outputs=task.outputs or {}, error=task.error, attempts=task.attempts,
            exit_code=task.exit_code, started_at=iso(task.started_at), finished_at=iso(task.finished_at),
            has_log=bool(task.log_path),
            ran_in=((task.pod_metadata or {}).get("annotations") or {}).get(RAN_IN),
        )
    return node


def parsed_workflow(document: dict[str, Any]) -> Workflow | None:
    """The stored workflow read again (it was checked at upload); None if it no longer reads."""
    try:
        return read_workflow(copy.deepcopy(document), "workflow")
    except UserError:
        return None


def workflow_nodes(workflow: Workflow, tasks: dict[str, Task], *, ended: bool = False) -> list[dict[str, Any]]:
    """The workflow's nodes with their records (``tasks`` by IR path; empty before any run)."""
    return _Walk(workflow, tasks, ended).nodes()


class _Walk:
    def __init__(self, workflow: Workflow, tasks: dict[str, Task], ended: bool) -> None:
        self.workflow = workflow
        self.tasks = tasks
        self.ended = ended
        self.out: list[dict[str, Any]] = []
        self.stack: list[str] = []
        self.iterations: dict[str, list[int]] = {}  # a loop's path -> the iterations the run recorded
        for path in tasks:
            loop, _, index = path.rpartition("/iteration-")
            if loop and index.isdigit():
                self.iterations.setdefault(loop, []).append(int(index))

    def nodes(self) -> list[dict[str, Any]]:
        wf = self.workflow
        entry = wf.template(wf.entrypoint)
        if entry.kind in _GROUPS:
            last = self._group(entry, wf.entrypoint, [])
        else:
            last = self._add(wf.entrypoint, wf.entrypoint, [], entry)
        if wf.on_exit:
            self._step(wf.template(wf.on_exit), f"exit-{wf.on_exit}", wf.on_exit, last)
        return self.out

    # --- one template ---------------------------------------------------------------------------
    def _group(self, template: Template, scope: str, incoming: list[str]) -> list[str]:
        """Draw a dag/steps template's tasks (each under ``scope/NAME``); return its last nodes' paths."""
        ordered: list[tuple[ArgoTask, list[str]]] = []
        if template.steps:
            previous: list[str] = []
            for group in template.steps:
                ordered += [(step, previous) for step in group]
                previous = [step.name for step in group]
        ordered += _in_order([(task, list(task.dependencies)) for task in template.dag])
        ends: dict[str, list[str]] = {}
        needed: set[str] = set()
        for task, after in ordered:
            deps = [path for name in after for path in ends.get(name, [])] or incoming
            needed.update(after)
            ends[task.name] = self._task(task, f"{scope}/{task.name}", deps)
        leaves = [path for task, _ in ordered if task.name not in needed for path in ends[task.name]]
        return leaves or incoming

    def _task(self, task: ArgoTask, path: str, deps: list[str]) -> list[str]:
        template = self.workflow.template(task.template)
        if task.with_items is None and not task.with_param:
            first = len(self.out)
            last = self._step(template, path, task.name, deps)
            if task.when and first < len(self.out) and self.out[first]["path"] == path:
                self.out[first]["condition"] = task.when  # as KFP v1's UI shows it: "Run when: ..."
            return last
        prefix = f"{path}/iteration-"
        recorded = sorted(self.iterations.get(path, ()))
        if not recorded:  # before the run fans out (or a pipeline version): the loop is one node
            return self._step(template, path, task.name, deps, looped=True)
        ends: list[str] = []
        for index in recorded:
            label = f"{task.name}({index}{_item_label(self._item(f'{prefix}{index}', task.with_items, index))})"
            ends += self._step(template, f"{prefix}{index}/{task.name}", label, deps)
        return ends

    def _item(self, iteration: str, items: tuple[Any, ...] | None, index: int) -> Any:
        """The iteration's item: as the engine recorded it (withParam, rendered withItems), else the written one."""
        record = self.tasks.get(iteration)
        recorded = ((record.inputs or {}).get("parameters") or {}).get(LOOP_ITEM) if record is not None else None
        if isinstance(recorded, str):
            try:
                value = json.loads(recorded)
            except ValueError:
                return recorded
            return value if isinstance(value, (dict, list)) else recorded
        if recorded is not None:  # a number or a mapping, as the engine bound it
            return recorded
        return items[index] if items is not None and index < len(items) else None

    def _step(self, template: Template, path: str, name: str, deps: list[str], looped: bool = False) -> list[str]:
        if template.kind not in _GROUPS:
            return self._add(path, name, deps, template, "loop" if looped else None)
        self._add(path, name, deps, template, "loop" if looped else "group")
        if looped or (template.name in self.stack and path not in self.tasks):
            return [path]  # a loop not fanned out yet, or recursion deeper than the run went
        self.stack.append(template.name)
        try:
            return self._group(template, path, [path])
        finally:
            self.stack.pop()

    def _add(self, path: str, name: str, deps: list[str], template: Template, kind: str | None = None) -> list[str]:
        if len(self.out) >= MAX_NODES:
            return []
        node = task_node(path, name, None, deps, kind or template.kind, self.tasks)
        node["template"] = template.name
        if "task_id" not in node and self.ended:
            node["state"] = "SKIPPED"  # the run is over and this never ran: a branch not taken
        self.out.append(node)
        return [path]


def _in_order(tasks: list[tuple[ArgoTask, list[str]]]) -> list[tuple[ArgoTask, list[str]]]:
    """DAG tasks with each after those it depends on (kfp writes them by name, not in order): Kahn's order,
    linear in tasks and edges (a workflow of thousands of tasks is drawn every second while it runs)."""
    names = {task.name for task, _ in tasks}
    waiting = {task.name: len({d for d in after if d in names and d != task.name}) for task, after in tasks}
    dependents: dict[str, list[tuple[ArgoTask, list[str]]]] = {}
    for entry in tasks:
        for dep in {d for d in entry[1] if d in names and d != entry[0].name}:
            dependents.setdefault(dep, []).append(entry)
    ready = deque(entry for entry in tasks if not waiting[entry[0].name])
    ordered: list[tuple[ArgoTask, list[str]]] = []
    while ready:
        entry = ready.popleft()
        ordered.append(entry)
        for later in dependents.get(entry[0].name, ()):
            waiting[later[0].name] -= 1
            if not waiting[later[0].name]:
                ready.append(later)
    placed = {task.name for task, _ in ordered}
    return ordered + [entry for entry in tasks if entry[0].name not in placed]  # a cycle (checked at upload)


def _item_label(item: Any) -> str:
    """Argo's ``:VALUE`` in ``(INDEX:VALUE)``: the item's text, a mapping's ``key:value`` pairs."""
    if item is None:
        return ""
    if isinstance(item, dict):
        text = ",".join(f"{key}:{value}" for key, value in item.items())
    elif isinstance(item, str):
        text = item
    else:
        text = json.dumps(item)
    return ":" + (text if len(text) <= 40 else text[:39] + "…")


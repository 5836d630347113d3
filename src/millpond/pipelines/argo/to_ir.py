"""Translate a kfp 1.x Argo workflow (the checked ``model``) into v2 pipeline IR, so the engine runs it.

Why IR rather than a second engine: runs, store, UI, retries, caching and cancellation already
work on IR; a v1 workflow only needs its Argo spellings said in IR's words:

- a container or script template is a component with an executor; ``{{inputs.parameters.X}}``
  in its command becomes ``{{$.inputs.parameters['X']}}``, ``{{workflow.name}}`` and friends the
  job placeholders; each path kfp 1.x fixes (``/tmp/outputs/Output/data``, a ``file_outputs``
  path, ``/tmp/inputs/X/data``, the UI's ``/mlpipeline-ui-metadata.json``) goes on the executor
  as ``argoPaths`` (``argo.paths``), which the launcher makes real in the task's sandbox: the
  command stays as written, so a path it builds at run time works too;
- a dag (or steps) template is a DAG component; arguments become bindings (a constant, a
  component input, a task output: saved already trimmed of one newline, as Argo saves it);
- ``when`` becomes a trigger condition calling ``argoWhen`` (Argo's govaluate, ``argo.when``)
  over the task's hidden ``argo-when-N`` inputs;
- ``withItems``/``withParam`` become a one-task loop DAG whose item reaches the task through
  ``argoItem`` (the text Argo substitutes for ``{{item}}``/``{{item.key}}``);
- ``onExit`` becomes an exit task after the whole pipeline (ALL_UPSTREAM_TASKS_COMPLETED),
  ``retryStrategy`` a retryPolicy, kfp's caching label and ``P0D`` staleness ``enableCache``;
- a step's ``activeDeadlineSeconds`` its kfp-kubernetes timeout; the workflow's
  ``parallelism`` and ``activeDeadlineSeconds`` and each step's ``max_cache_staleness``, which
  neither IR nor kfp-kubernetes can say, go into ``platforms.argo`` (``pipelines.workflow_limits``).

Anything else is refused here in one line (a ``UserError``), before a run is recorded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from millpond.durations import parse_iso8601_duration
from millpond.errors import UserError
from millpond.pipelines.argo.model import Resource, Task, Template, Workflow
from millpond.pipelines.argo.paths import FIELD as ARGO_PATHS
from millpond.pipelines.argo.paths import SIDECARS_FIELD as ARGO_SIDECARS
from millpond.pipelines.argo.paths import UI_OUTPUTS, ArgoPaths, InputPath, OutputPath, check_path
from millpond.pipelines.argo.step_config import (
    INPUT,
    JOB_TAGS,
    TAG_TEXT,
    executor_text,
    patched_resources,
    platform_config,
    resources,
    sidecar_script,
)
from millpond.pipelines.argo.templating import tags
from millpond.pipelines.builtin_images import CREATE_PVC_IMAGE, RAW_ARTIFACT_IMAGE, RENDER_ITEMS_IMAGE, SNAPSHOT_IMAGE
from millpond.pipelines.workflow_limits import PLATFORM as LIMITS_PLATFORM
from millpond.pipelines.workflow_limits import WorkflowLimits

_TASK_OUTPUT = re.compile(r"(tasks|steps)\.(?P<task>[^.]+)\.outputs\.parameters\.(?P<name>.+)")
_TASK_ARTIFACT = re.compile(r"(tasks|steps)\.(?P<task>[^.]+)\.outputs\.artifacts\.(?P<name>.+)")
_ARTIFACT = {"schemaTitle": "system.Artifact", "schemaVersion": "0.0.1"}
# Renders a withItems list: argv[1] the items (JSON), argv[2] the output file, then (tag, value) pairs.
_RENDER_ITEMS = """import json, re, sys
values = dict(zip(sys.argv[3::2], sys.argv[4::2]))
def text(s):
    return re.sub(r"\\{\\{(.*?)\\}\\}", lambda m: values.get(m.group(1).strip(), m.group(0)), s, flags=re.S)
def render(v):
    if isinstance(v, str):
        return text(v)
    if isinstance(v, list):
        return [render(c) for c in v]
    if isinstance(v, dict):
        return {text(str(k)): render(c) for k, c in v.items()}
    return v
open(sys.argv[2], "w").write(json.dumps(render(json.loads(sys.argv[1])), separators=(",", ":")))
"""
# A resource template's jsonPath outputs the builtins produce: the object's name; a snapshot's restoreSize.
_RESOURCE_OUTPUTS: dict[tuple[str, ...], str] = {("metadata", "name"): "name", ("status", "restoreSize"): "size"}
LOOP_ITEM = "argo-loop-item"
LOOP_ITEMS = "argo-loop-items"


def translate(workflow: Workflow) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The v2 PipelineSpec that runs ``workflow`` and its kfp-kubernetes platform spec (None when empty).

    UserError for what it cannot express.
    """
    translator = _Translator(workflow)
    spec = translator.spec()
    platforms: dict[str, Any] = {}
    if translator.platform:
        platforms["kubernetes"] = {"deploymentSpec": {"executors": translator.platform}}
    limits = WorkflowLimits(parallelism=workflow.parallelism or None,
                            deadline_s=workflow.active_deadline_seconds or None,
                            cache_staleness_s=translator.cache_staleness)
    if limits:
        platforms[LIMITS_PLATFORM] = {"config": limits.config()}
    return spec, ({"platforms": platforms} if platforms else None)


def _mixed(value: str) -> bool:
    """Whether ``value`` holds tags and anything else (text, or a second tag)."""
    found = list(tags(value))
    return bool(found) and not (len(found) == 1 and value.strip() == "{{" + found[0] + "}}")


def _is_item(tag: str) -> bool:
    return tag == "item" or tag.startswith("item.")


def _item_binding(tag: str) -> dict[str, Any]:
    """A loop's item, or one field of it, as the text Argo substitutes (``argoItem``)."""
    key = tag[5:] if tag != "item" else ""
    return {"componentInputParameter": LOOP_ITEM,
            "parameterExpressionSelector": f"argoItem(string_value, {json.dumps(key)})"}


def _string_input(default: str | None) -> dict[str, Any]:
    definition: dict[str, Any] = {"parameterType": "STRING"}
    if default is not None:
        definition["defaultValue"] = default
    return definition


class _Translator:
    def __init__(self, workflow: Workflow) -> None:
        self.workflow = workflow
        self.components: dict[str, Any] = {}
        self.executors: dict[str, Any] = {}
        self.when_count = 0
        self.text_count = 0
        self.loop_count = 0
        self.platform: dict[str, Any] = {}  # executor label -> its KubernetesExecutorConfig
        self.dags: list[Template] = []  # the dag templates being translated, innermost last
        # executor label -> (pvcMount entry, input name): a claim named by the step's input parameter
        self.pvc_inputs: dict[str, list[tuple[dict[str, Any], str]]] = {}
        self.pvc_bound: set[str] = set()
        self.cache_staleness: dict[str, float] = {}  # component name -> kfp 1.x's max_cache_staleness, seconds
        self.extra_tasks: dict[str, Any] = {}  # tasks a task needs beside it in its DAG (withItems rendering)
        # ``{{workflow.parameters.X}}`` reads a run-wide value anywhere; IR scopes are nested, so
        # every DAG component takes each as a hidden ``argo-wf-X`` input its parent hands down.
        self.wf_inputs = {f"argo-wf-{p.name}": p.name for p in workflow.parameters}

    def spec(self) -> dict[str, Any]:
        wf = self.workflow
        entry = self._component(wf.entrypoint)
        root_inputs = {p.name: _string_input(p.value) for p in wf.parameters}
        entry_template = wf.template(wf.entrypoint)
        entry_task: dict[str, Any] = {
            "taskInfo": {"name": wf.entrypoint},
            "componentRef": {"name": entry},
            "inputs": {"parameters": {
                p.name: self._entry_binding(p.name, p.value) for p in entry_template.inputs.parameters
            }},
        }
        if entry_template.kind in ("dag", "steps"):
            for hidden, name in self.wf_inputs.items():
                entry_task["inputs"]["parameters"][hidden] = {"componentInputParameter": name}
        tasks = {wf.entrypoint: entry_task}
        if wf.on_exit:
            exit_name = f"exit-{wf.on_exit}"
            tasks[exit_name] = {
                "taskInfo": {"name": wf.on_exit},
                "componentRef": {"name": self._component(wf.on_exit)},
                "dependentTasks": [wf.entrypoint],
                "triggerPolicy": {"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"},
            }
            # Argo hands the onExit template the workflow's arguments: each input takes the one of its name.
            exit_inputs = {}
            workflow_parameters = {p.name for p in wf.parameters}
            for parameter in wf.template(wf.on_exit).inputs.parameters:
                if parameter.name in workflow_parameters:
                    exit_inputs[parameter.name] = {"componentInputParameter": parameter.name}
                elif parameter.value is None and parameter.default is None:
                    raise UserError(f"{wf.source}: onExit template {wf.on_exit!r} takes parameter "
                                    f"{parameter.name!r}, which the workflow's arguments do not give")
            if exit_inputs:
                tasks[exit_name]["inputs"] = {"parameters": exit_inputs}
        for argument in wf.artifacts:
            self._workflow_artifact(argument.name, argument.raw, argument.from_, tasks)
        for task in tasks.values():
            if not task.get("inputs", {}).get("parameters"):
                task.pop("inputs", None)
        return {
            "pipelineInfo": {"name": _pipeline_name(wf.name), "description": wf.description},
            "schemaVersion": "2.1.0",
            "sdkVersion": f"kfp-{wf.sdk_version or '1.8'}",
            "root": {"inputDefinitions": {"parameters": root_inputs}, "dag": {"tasks": tasks}} if root_inputs
            else {"dag": {"tasks": tasks}},
            "components": self.components,
            "deploymentSpec": {"executors": self.executors},
        }

    def _workflow_artifact(self, name: str, raw: str | None, source: str | None, tasks: dict[str, Any]) -> None:
        """An entrypoint input artifact given by the workflow (kfp: raw text, often a pipeline parameter).

        IR has no constant artifacts, so a small root task writes the text as its output artifact.
        """
        where = f"{self.workflow.source}: workflow artifact {name!r}"
        if raw is None:
            raise UserError(f"{where}: only raw artifacts are supported, got from {str(source)[:60]!r}")
        found = list(tags(raw))
        value: dict[str, Any] = {"runtimeValue": {"constant": raw}}
        if found:
            parameter = found[0][len("workflow.parameters."):]
            if len(found) != 1 or raw.strip() != "{{" + found[0] + "}}" or parameter not in self.wf_inputs.values():
                raise UserError(f"{where}: raw text {raw[:60]!r} is not supported yet")
            value = {"componentInputParameter": parameter}
        task_name = f"argo-artifact-{len(tasks)}-{re.sub(r'[^a-z0-9-]+', '-', name.lower()).strip('-')}"
        label = f"exec-{task_name}"
        self.executors[label] = {"container": {
            "image": RAW_ARTIFACT_IMAGE, "command": ["sh", "-c", 'printf "%s" "$0" > "$1"'],
            "args": ["{{$.inputs.parameters['text']}}", "{{$.outputs.artifacts['data'].path}}"]}}
        self.components[f"comp-{task_name}"] = {
            "executorLabel": label,
            "inputDefinitions": {"parameters": {"text": {"parameterType": "STRING"}}},
            "outputDefinitions": {"artifacts": {"data": {"artifactType": dict(_ARTIFACT)}}},
        }
        tasks[task_name] = {"taskInfo": {"name": task_name}, "componentRef": {"name": f"comp-{task_name}"},
                            "inputs": {"parameters": {"text": value}}}
        entry = tasks[self.workflow.entrypoint]
        entry.setdefault("inputs", {}).setdefault("artifacts", {})[name] = {
            "taskOutputArtifact": {"producerTask": task_name, "outputArtifactKey": "data"}}
        entry.setdefault("dependentTasks", []).append(task_name)

    def _entry_binding(self, name: str, value: str | None) -> dict[str, Any]:
        if any(p.name == name for p in self.workflow.parameters):
            return {"componentInputParameter": name}
        if value is None:
            raise UserError(f"{self.workflow.source}: entrypoint input {name!r} is not a pipeline parameter")
        return {"runtimeValue": {"constant": value}}

    # --- components ---------------------------------------------------------------------
    def _component(self, name: str) -> str:
        key = f"comp-{name}"
        if key in self.components:
            return key
        template = self.workflow.template(name)
        self.components[key] = {}  # claimed first: a recursive template would loop for ever
        if template.kind in ("container", "script"):
            self.components[key] = self._container_component(template)
        elif template.kind in ("dag", "steps"):
            self.dags.append(template)
            try:
                self.components[key] = self._dag_component(template)
            finally:
                self.dags.pop()
        elif template.resource is not None and template.resource.claim and not template.resource.claim.snapshot:
            self.components[key] = self._volume_op_component(template, CREATE_PVC_IMAGE, ("pvc_name",))
        elif template.resource is not None and (template.resource.snapshot is not None or template.resource.claim):
            # a VolumeSnapshotOp, or a VolumeOp restoring one (data_source): a copy of the source volume
            self.components[key] = self._volume_op_component(template, SNAPSHOT_IMAGE,
                                                             ("snapshot_name", "source_volume"))
        else:
            raise UserError(f"{self._where(template)}: {template.kind} templates are not supported yet")
        return key

    def _where(self, template: Template) -> str:
        return f"{self.workflow.source}: template {template.name!r}"

    def _container_component(self, t: Template) -> dict[str, Any]:
        where = self._where(t)
        if t.container is not None:
            container = t.container
        else:
            assert t.script is not None  # a container or script template: the reader gives it its part
            container = t.script.container
        if container.env_from or container.working_dir:
            raise UserError(f"{where}: envFrom and workingDir are not supported yet")
        platform = platform_config(t, container, where, self.workflow.volumes, self.pvc_inputs,
                                   self.workflow.image_pull_secrets)
        if t.active_deadline_seconds:  # kfp 1.x's op.set_timeout: each attempt's pod may run this long
            platform["activeDeadlineSeconds"] = t.active_deadline_seconds
        words = [*container.command, *container.args]
        if t.script is not None:
            # Argo writes the source to a file and appends its path to the command.
            words = ["sh", "-ec", 'p=$(mktemp)\nprintf "%s" "$0" > "$p"\nexec "$@" "$p"\n',
                     t.script.source, *container.command]
        outputs: dict[str, Any] = {"parameters": {}, "artifacts": {}}
        inputs_artifacts: dict[str, Any] = {}
        paths = self._paths(t, where, inputs_artifacts, outputs)
        text = [executor_text(word, where) for word in words]
        if t.sidecars:
            text = ["sh", "-c", sidecar_script(t, where), "argo-sidecars", *text]
        env = []
        for variable in container.env:
            if variable.source is not None or variable.value is None:
                continue  # from a secret, config map or the pod: the platform spec's entries
            env.append({"name": variable.name, "value": executor_text(variable.value, where)})
        # an image from a pipeline parameter (seed 002's ``image=image``) is a placeholder, filled as the task starts
        image = executor_text(container.image, f"{where}.image")
        executor: dict[str, Any] = {"image": image, "command": text[:1], "args": text[1:]}
        if env:
            executor["env"] = env
        quantities = resources(container, patched_resources(t, where), where)
        if quantities:
            executor["resources"] = quantities
        if paths.outputs or paths.inputs:
            executor[ARGO_PATHS] = paths.to_ir()
        if t.sidecars:
            executor[ARGO_SIDECARS] = [{
                "name": sidecar.name, "image": executor_text(sidecar.container.image, f"{where}.sidecars"),
                "command": list(sidecar.container.command), "args": list(sidecar.container.args),
                "env": [{"name": v.name, "value": v.value} for v in sidecar.container.env
                        if v.source is None and v.value is not None],
                "mirrorVolumeMounts": sidecar.mirror_volume_mounts,
            } for sidecar in t.sidecars]
        label = f"exec-{t.name}"
        self.executors[label] = {"container": executor}
        if platform:
            self.platform[label] = platform
        component: dict[str, Any] = {"executorLabel": label}
        inputs = {p.name: _string_input(p.value if p.value is not None else p.default) for p in t.inputs.parameters}
        definitions = {k: v for k, v in (("parameters", inputs), ("artifacts", inputs_artifacts)) if v}
        if definitions:
            component["inputDefinitions"] = definitions
        outputs = {k: v for k, v in outputs.items() if v}
        if outputs:
            component["outputDefinitions"] = outputs
        return component

    def _paths(self, t: Template, where: str, inputs: dict[str, Any], outputs: dict[str, Any]) -> ArgoPaths:
        """The step's Argo paths (``argo.paths``), declaring each as an IR input or output of the component.

        The launcher makes them real in the task's sandbox (``argo.placement``), so the step's own
        words stay as written: a path it builds at run time works as one it names.
        """
        placed: list[InputPath] = []
        for given in t.inputs.artifacts:
            path = check_path(given.path, f"{where}: input artifact {given.name!r}")
            if given.raw is not None:
                placed.append(InputPath(path=path, raw=executor_text(given.raw, where)))
                continue
            inputs[given.name] = {"artifactType": dict(_ARTIFACT)}
            placed.append(InputPath(path=path, name=given.name))
        saved: list[OutputPath] = []
        for artifact in t.outputs.artifacts:
            path = check_path(artifact.path, f"{where}: output artifact {artifact.name!r}")
            outputs["artifacts"][artifact.name] = {"artifactType": dict(_ARTIFACT)}
            # kfp 1.x's UI outputs are optional: a step that shows nothing writes neither.
            optional = artifact.optional or artifact.name in UI_OUTPUTS
            saved.append(OutputPath(name=artifact.name, kind="artifact", path=path, optional=optional))
        for name, path in UI_OUTPUTS.items():
            if name not in outputs["artifacts"]:  # a ContainerOp writes them at the root without declaring them
                outputs["artifacts"][name] = {"artifactType": dict(_ARTIFACT)}
                saved.append(OutputPath(name=name, kind="artifact", path=path, optional=True, implicit=True))
        for parameter in t.outputs.parameters:
            at = f"{where}: output parameter {parameter.name!r}"
            outputs["parameters"][parameter.name] = {"parameterType": "STRING"}
            if parameter.path is not None:
                saved.append(OutputPath(name=parameter.name, kind="parameter", path=check_path(parameter.path, at),
                                        default=parameter.default))
            elif parameter.value is not None:
                saved.append(OutputPath(name=parameter.name, kind="parameter",
                                        value=executor_text(parameter.value, at)))
            else:
                raise UserError(f"{at} is not read from a file or a value (not supported yet)")
        return ArgoPaths(outputs=tuple(saved), inputs=tuple(placed))

    def _snapshot_source(self, source: str, parameters: dict[str, Any], where: str) -> dict[str, Any]:
        """The volume a snapshot copies (or a restored claim starts from): a constant, or the task's argument
        for the input naming it."""
        found = list(tags(source))
        if not found:
            return {"runtimeValue": {"constant": source}}
        name = found[0][len("inputs.parameters."):]
        if len(found) != 1 or source.strip() != "{{" + found[0] + "}}" or name not in parameters:
            raise UserError(f"{where}: a snapshot of {source[:60]!r} is not supported yet")
        return parameters[name]

    def _bind_claims(self, template: Template, parameters: dict[str, Any], where: str) -> None:
        """A step mounting a claim named by its input: the mount takes the task's argument for that input.

        kfp-kubernetes resolves a pvcMount's name in the enclosing DAG, not from the step's own
        inputs, so the binding moves onto the executor; one executor per template, so one task.
        """
        label = f"exec-{template.name}"
        if label not in self.pvc_inputs:
            return
        if label in self.pvc_bound:
            raise UserError(f"{where}: template {template.name!r} mounts a claim from its input and is used "
                            "by more than one task (not supported yet)")
        self.pvc_bound.add(label)
        declared = {p.name: p.value if p.value is not None else p.default for p in template.inputs.parameters}
        for entry, name in self.pvc_inputs[label]:
            if name in parameters:
                entry["pvcNameParameter"] = parameters[name]
            elif declared.get(name) is not None:
                entry["constant"] = declared[name]
            else:
                raise UserError(f"{where}: the claim's name {name!r} has no value")

    def _volume_op_component(self, t: Template, image: str, extra: tuple[str, ...]) -> dict[str, Any]:
        """A VolumeOp (kfp-kubernetes' CreatePVC), a VolumeSnapshotOp or a VolumeOp restoring a snapshot: the
        engine runs them itself.

        A claim is a named local volume folder, a snapshot (and a restored claim) a copy of one. The
        ``NAME-name`` output is the builtin's ``name``; a snapshot's ``NAME-size`` (its restoreSize, which
        kfp 1.x code passes to the VolumeOp restoring it) the data it holds. A VolumeOp's size and any
        manifest output are not produced, so a task reading them is refused (``_binding``).
        """
        label = f"exec-{t.name}"
        self.executors[label] = {"container": {"image": image}}
        inputs = {p.name: _string_input(p.value if p.value is not None else p.default) for p in t.inputs.parameters}
        inputs.update({name: {"parameterType": "STRING"} for name in extra})
        outputs = {"name": {"parameterType": "STRING"}}
        if image == SNAPSHOT_IMAGE:
            outputs["size"] = {"parameterType": "STRING"}
        return {"executorLabel": label, "inputDefinitions": {"parameters": inputs},
                "outputDefinitions": {"parameters": outputs}}

    def _volume_op_name(self, t: Template, where: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The claim's (or snapshot's) name as a constant the engine renders: ``{{workflow.name}}`` the run's,
        ``{{inputs.parameters.X}}`` (``VolumeOp(resource_name=f"{param}-pvc")``) the task's argument X."""
        made = (t.resource.claim or t.resource.snapshot) if t.resource is not None else None
        assert made is not None  # a VolumeOp's or VolumeSnapshotOp's template: the reader checks it is one
        name = made.name + ("{{pod.name}}" if made.generate_name else "")

        def argument(tag: str) -> dict[str, Any]:
            match = INPUT.fullmatch(tag)
            if match is None or match.group("name") not in arguments:
                raise UserError(f"{where}: a VolumeOp name with {{{{{tag[:60]}}}}} is not supported "
                                "(only the workflow's name and the step's inputs)")
            return arguments[match.group("name")]

        return self._formatted(name, arguments, argument)

    def _dag_component(self, t: Template) -> dict[str, Any]:
        where = self._where(t)
        tasks: dict[str, Any] = {}
        if t.steps:
            previous: list[str] = []
            for group in t.steps:
                for step in group:
                    tasks[step.name] = self._task(step, previous, where)
                    tasks.update(self.extra_tasks)
                    self.extra_tasks.clear()
                previous = [step.name for step in group]
        for task in t.dag:
            if task.depends:
                raise UserError(f"{where}: task {task.name!r}: 'depends' is not supported yet")
            tasks[task.name] = self._task(task, list(task.dependencies), where)
            tasks.update(self.extra_tasks)
            self.extra_tasks.clear()
        component: dict[str, Any] = {"dag": {"tasks": tasks}}
        inputs = {p.name: _string_input(p.value if p.value is not None else p.default) for p in t.inputs.parameters}
        inputs.update({hidden: {"parameterType": "STRING"} for hidden in self.wf_inputs})
        if inputs:
            component["inputDefinitions"] = {"parameters": inputs}
        if t.inputs.artifacts:
            component.setdefault("inputDefinitions", {})["artifacts"] = {
                a.name: {"artifactType": dict(_ARTIFACT)} for a in t.inputs.artifacts}
        if t.outputs.parameters or t.outputs.artifacts:
            raise UserError(f"{where}: outputs of a dag template are not supported yet")
        return component

    # --- tasks --------------------------------------------------------------------------
    def _task(self, task: Task, after: list[str], where: str) -> dict[str, Any]:
        where = f"{where} task {task.name!r}"
        if task.on_exit or task.continue_on_failed or task.continue_on_error:
            raise UserError(f"{where}: onExit/continueOn on a task is not supported yet")
        template = self.workflow.template(task.template)
        looped = task.with_items is not None or bool(task.with_param)
        spec: dict[str, Any] = {"taskInfo": {"name": task.name}}
        dependencies = set(after)
        parameters: dict[str, Any] = {}
        if looped:
            self._loop_task(task, template, where, spec, parameters, dependencies)
        else:
            self._call_task(task, template, where, spec, parameters, dependencies)
        artifacts = {}
        for argument in task.arguments.artifacts:
            if looped:
                raise UserError(f"{where}: artifact arguments of a looped task are not supported yet")
            artifacts[argument.name] = self._artifact_binding(argument.from_, argument.raw, where, dependencies)
        if task.when:
            spec["triggerPolicy"] = {"condition": self._when(task.when, where, parameters, dependencies)}
        self._template_options(template, spec)
        if looped or template.kind in ("dag", "steps"):
            parameters.update({hidden: {"componentInputParameter": hidden} for hidden in self.wf_inputs})
        if parameters:
            spec["inputs"] = {"parameters": parameters}
        if artifacts:
            spec.setdefault("inputs", {})["artifacts"] = artifacts
        if dependencies:
            spec["dependentTasks"] = sorted(dependencies)
        return spec

    def _loop_task(self, task: Task, template: Template, where: str, spec: dict[str, Any],
                   parameters: dict[str, Any], dependencies: set[str]) -> None:
        """A withItems/withParam task: a loop over a component of its own, its items a parameter or raw JSON."""
        spec["componentRef"] = {"name": self._loop_component(task, template, where)}
        for argument in task.arguments.parameters:
            if not any(t == "item" or t.startswith("item.") for t in tags(argument.value)):
                parameters[f"argo-arg-{argument.name}"] = self._binding(argument.value, where, dependencies)
        if task.with_items is not None:
            if any(list(tags(text)) for text in _strings(task.with_items)):
                # Argo renders each item's tags first: a task before the loop renders them.
                render = self._render_items(task, task.with_items, where, dependencies)
                parameters[LOOP_ITEMS] = {"taskOutputParameter": {"producerTask": render,
                                                                  "outputParameterKey": "items"}}
                dependencies.add(render)
                spec["parameterIterator"] = {"itemInput": LOOP_ITEM, "items": {"inputParameter": LOOP_ITEMS}}
            else:
                spec["parameterIterator"] = {"itemInput": LOOP_ITEM,
                                             "items": {"raw": json.dumps(list(task.with_items))}}
        else:
            parameters[LOOP_ITEMS] = self._binding(task.with_param, where, dependencies, trim=True)
            spec["parameterIterator"] = {"itemInput": LOOP_ITEM, "items": {"inputParameter": LOOP_ITEMS}}
        if template.parallelism:
            spec["iteratorPolicy"] = {"parallelismLimit": template.parallelism}

    def _call_task(self, task: Task, template: Template, where: str, spec: dict[str, Any],
                   parameters: dict[str, Any], dependencies: set[str]) -> None:
        """A task calling its template's component once: its arguments bound; a volume op's names passed."""
        spec["componentRef"] = {"name": self._component(task.template)}
        for argument in task.arguments.parameters:
            if _mixed(argument.value):
                parameters[argument.name] = self._formatted(
                    argument.value, parameters, lambda tag: self._binding("{{" + tag + "}}", where, dependencies))
            else:
                parameters[argument.name] = self._binding(argument.value, where, dependencies)
        source = _copied_volume(template.resource)
        if source is not None:
            parameters["snapshot_name"] = self._volume_op_name(template, where, parameters)
            parameters["source_volume"] = self._snapshot_source(source, parameters, where)
        elif template.kind == "resource":
            parameters["pvc_name"] = self._volume_op_name(template, where, parameters)
        self._bind_claims(template, parameters, where)

    def _template_options(self, template: Template, spec: dict[str, Any]) -> None:
        caching = template.caching
        enabled = caching.enabled
        if enabled and caching.max_staleness and template.kind in ("container", "script"):
            # kfp 1.x: a cached result older than this is not reused; P0D: never reused.
            staleness = parse_iso8601_duration(caching.max_staleness,
                                               f"{self._where(template)}: max_cache_staleness").seconds
            enabled = staleness > 0
            if enabled:
                self.cache_staleness[self._component(template.name)] = staleness
        if template.kind in ("container", "script"):
            spec["cachingOptions"] = {"enableCache": True} if enabled else {}
        if template.retry is not None:
            if template.retry.limit is None:
                raise UserError(f"{self._where(template)}: retryStrategy without a limit is not supported")
            spec["retryPolicy"] = {"maxRetryCount": template.retry.limit}
        if template.active_deadline_seconds is not None and template.kind not in ("container", "script"):
            raise UserError(f"{self._where(template)}: activeDeadlineSeconds of a {template.kind} template "
                            "is not supported (a step's is)")

    def _render_items(self, task: Task, items: tuple[Any, ...], where: str, dependencies: set[str]) -> str:
        """A task rendering the tags of ``task``'s withItems ``items`` (as Argo does before fanning out); its
        output: the JSON list."""
        name = f"argo-items-{task.name}"
        inputs: dict[str, Any] = {}
        words: list[str] = []
        for text in _strings(items):
            for tag in tags(text):
                if tag not in words[::2]:
                    key = f"tag-{len(inputs)}"
                    inputs[key] = self._binding("{{" + tag + "}}", where, dependencies)
                    words += [tag, f"{{{{$.inputs.parameters['{key}']}}}}"]
        label = f"exec-{name}"
        self.executors[label] = {"container": {
            "image": RENDER_ITEMS_IMAGE, "command": ["python3", "-c", _RENDER_ITEMS],
            "args": [json.dumps(list(items)), "{{$.outputs.parameters['items'].output_file}}", *words]}}
        self.components[f"comp-{name}"] = {
            "executorLabel": label,
            "inputDefinitions": {"parameters": {key: {"parameterType": "STRING"} for key in inputs}},
            "outputDefinitions": {"parameters": {"items": {"parameterType": "STRING"}}},
        }
        self.extra_tasks[name] = {"taskInfo": {"name": name}, "componentRef": {"name": f"comp-{name}"},
                                  "inputs": {"parameters": inputs},
                                  **({"dependentTasks": sorted(dependencies)} if dependencies else {})}
        return name

    def _loop_component(self, task: Task, template: Template, where: str) -> str:
        """A DAG component holding ``task`` once per item: its arguments come in as ``argo-arg-NAME``."""
        self.loop_count += 1
        name = f"comp-for-loop-{task.name}-{self.loop_count}"
        inner: dict[str, Any] = {"taskInfo": {"name": task.name},
                                 "componentRef": {"name": self._component(task.template)}}
        bindings: dict[str, Any] = {}
        inputs: dict[str, Any] = {LOOP_ITEM: {"parameterType": "STRING"}}
        for argument in task.arguments.parameters:
            found = list(tags(argument.value))
            if any(_is_item(t) for t in found):
                if not _mixed(argument.value):
                    bindings[argument.name] = _item_binding(found[0])
                    continue
                if not all(_is_item(t) or t in JOB_TAGS for t in found):
                    raise UserError(f"{where}: argument {argument.name!r} mixes a loop item with other tags "
                                    "(not supported yet)")
                bindings[argument.name] = self._formatted(argument.value, bindings, _item_binding)
            else:
                inputs[f"argo-arg-{argument.name}"] = {"parameterType": "STRING"}
                bindings[argument.name] = {"componentInputParameter": f"argo-arg-{argument.name}"}
        if task.with_param:
            inputs[LOOP_ITEMS] = {"parameterType": "STRING"}
        inputs.update({hidden: {"parameterType": "STRING"} for hidden in self.wf_inputs})
        if template.kind in ("dag", "steps"):
            bindings.update({hidden: {"componentInputParameter": hidden} for hidden in self.wf_inputs})
        if bindings:
            inner["inputs"] = {"parameters": bindings}
        if task.when:
            raise UserError(f"{where}: a when on a looped task is not supported yet")
        self._template_options(template, inner)
        self.components[name] = {"inputDefinitions": {"parameters": inputs}, "dag": {"tasks": {task.name: inner}}}
        return name

    def _formatted(self, value: str, hidden: dict[str, Any], bind: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
        """An argument mixing tags with text (``gs://{{inputs.parameters.bucket}}/x``): a constant whose tags
        become placeholders of hidden ``argo-text-N`` inputs bound by ``bind``, filled in by the engine as
        kfp 2's f-string arguments are (``bindings._format``); job tags become job placeholders."""

        def placeholder(match: re.Match[str]) -> str:
            tag = match.group(1).strip()
            if tag in JOB_TAGS:
                return JOB_TAGS[tag]
            self.text_count += 1
            key = f"argo-text-{self.text_count}"
            hidden[key] = bind(tag)
            return f"{{{{$.inputs.parameters['{key}']}}}}"

        return {"runtimeValue": {"constant": TAG_TEXT.sub(placeholder, value)}}

    def _binding(self, value: str, where: str, dependencies: set[str], trim: bool = False) -> dict[str, Any]:
        """The IR binding of one Argo argument: a constant, a component input, or a task's output."""
        found = list(tags(value))
        if all(t in JOB_TAGS for t in found):
            text = TAG_TEXT.sub(lambda m: JOB_TAGS.get(m.group(1).strip(), m.group(0)), value)
            return {"runtimeValue": {"constant": text}}
        if _mixed(value):
            raise UserError(f"{where}: {value[:60]!r} mixes tags with text here (not supported yet)")
        tag = found[0]
        match = INPUT.fullmatch(tag)
        if match:
            return {"componentInputParameter": match.group("name")}
        match = _TASK_OUTPUT.fullmatch(tag)
        if match:
            dependencies.add(match.group("task"))
            output = {"producerTask": match.group("task"), "outputParameterKey": match.group("name")}
            producer = self.dags[-1].task(match.group("task")) if self.dags else None
            made = self.workflow.templates.get(producer.template) if producer is not None else None
            if made is not None and made.kind == "resource":
                declared = next((p for p in made.outputs.parameters if p.name == match.group("name")), None)
                field = _RESOURCE_OUTPUTS.get(declared.json_path or ()) if declared is not None else None
                if field is None or (field == "size" and (made.resource is None or made.resource.snapshot is None)):
                    raise UserError(f"{where}: {{{{{tag[:60]}}}}}: only a VolumeOp's name and a VolumeSnapshotOp's "
                                    "name and size are supported yet")
                output["outputParameterKey"] = field
            return {"taskOutputParameter": output}  # saved trimmed, as Argo saves it (``argo.placement``)
        if tag.startswith("workflow.parameters.") and f"argo-wf-{tag[20:]}" in self.wf_inputs:
            return {"componentInputParameter": f"argo-wf-{tag[20:]}"}
        raise UserError(f"{where}: argument tag {{{{{tag[:60]}}}}} is not supported yet")

    def _artifact_binding(self, source: str | None, raw: str | None, where: str,
                          dependencies: set[str]) -> dict[str, Any]:
        """An artifact argument: another task's output artifact, or the enclosing dag's input artifact."""
        found = list(tags(source or ""))
        if raw is not None or len(found) != 1:
            raise UserError(f"{where}: artifact argument {str(source or raw)[:60]!r} is not supported yet")
        match = _TASK_ARTIFACT.fullmatch(found[0])
        if match:
            dependencies.add(match.group("task"))
            output = {"producerTask": match.group("task"), "outputArtifactKey": match.group("name")}
            return {"taskOutputArtifact": output}
        if found[0].startswith("inputs.artifacts."):
            return {"componentInputArtifact": found[0][len("inputs.artifacts."):]}
        raise UserError(f"{where}: artifact argument {{{{{found[0][:60]}}}}} is not supported yet")

    def _when(self, expression: str, where: str, parameters: dict[str, Any], dependencies: set[str]) -> str:
        """``argoWhen("<expr with its tags renamed>", inputs.parameter_values)``, binding each tag as an input."""
        names: dict[str, str] = {}

        def rename(match: re.Match[str]) -> str:
            tag = match.group(1).strip()
            if tag not in names:
                self.when_count += 1
                names[tag] = f"argo-when-{self.when_count}"
                parameters[names[tag]] = self._binding("{{" + tag + "}}", where, dependencies)
            return "{{inputs.parameters." + names[tag] + "}}"

        rewritten = TAG_TEXT.sub(rename, expression)
        return f"argoWhen({json.dumps(rewritten)}, inputs.parameter_values)"


def _copied_volume(resource: Resource | None) -> str | None:
    """The volume a VolumeSnapshotOp copies, or that a VolumeOp's claim starts from (``data_source``); else None."""
    if resource is None:
        return None
    if resource.snapshot is not None:
        return resource.snapshot.source
    return resource.claim.snapshot if resource.claim is not None and resource.claim.snapshot else None


def _strings(value: Any) -> list[str]:
    """Every string in a withItems value (keys too), where Argo's tags may sit."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [text for child in value for text in _strings(child)]
    if isinstance(value, dict):
        return [text for key, child in value.items() for text in (str(key), *_strings(child))]
    return []


def _pipeline_name(name: str) -> str:
    cleaned = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    return cleaned[:128] or "pipeline"

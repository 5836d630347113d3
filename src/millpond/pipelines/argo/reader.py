"""Read a kfp 1.x compiled Argo Workflow into the checked ``model``, or refuse it in one line.

Recognition: a YAML document with ``apiVersion: argoproj.io/v1alpha1``, ``kind: Workflow`` and
kfp's ``pipelines.kubeflow.org/...`` labels or annotations is a KFP v1 pipeline (the v2 IR has
``pipelineInfo`` and ``root`` instead). Text is parsed by ``millpond.documents`` (bounded).

Every field is either read into the model, knowingly ignored (it only matters on a cluster:
``serviceAccountName``, ``imagePullSecrets``, ``nodeSelector``, ``tolerations``, ``image``
pull policies, security contexts), or refused with a ``UserError`` naming the field and why: an
Argo feature millpond cannot honour is refused before anything is recorded, never dropped in
silence. A resource template is honoured only for what KFP's VolumeOp and VolumeSnapshotOp
create (a PersistentVolumeClaim, a VolumeSnapshot); any other object (``dsl.ResourceOp`` of a
Job, say) is refused. The parts live beside it: ``fields`` (typed accessors), ``pods`` (containers, volumes),
``volume_ops`` (resource templates); ``checks`` then checks the references between templates as
Argo's validator does, and every ``when`` is parsed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from millpond.documents import DocumentError, load_json, load_yaml_documents
from millpond.errors import UserError
from millpond.pipelines.argo import when
from millpond.pipelines.argo.checks import check_workflow
from millpond.pipelines.argo.fields import kind_of
from millpond.pipelines.argo.model import (
    COMPONENT_SPEC,
    ENABLE_CACHING_LABEL,
    MAX_CACHE_STALENESS,
    PIPELINE_SPEC,
    SDK_VERSION,
    TEMPLATE_KINDS,
    Arguments,
    ArtifactArgument,
    Caching,
    InputArtifact,
    InputParameter,
    Inputs,
    OutputArtifact,
    OutputParameter,
    Outputs,
    ParameterArgument,
    RetryStrategy,
    Task,
    Template,
    TemplateKind,
    Workflow,
    WorkflowParameter,
)
from millpond.pipelines.argo.package import read_package
from millpond.pipelines.argo.pods import PodFields
from millpond.pipelines.argo.volume_ops import ResourceFields

ARGO_API = "argoproj.io/v1alpha1"
KFP_PREFIX = "pipelines.kubeflow.org/"
MAX_TEMPLATES = 10_000
RETRY_POLICIES = ("Always", "OnFailure", "OnError", "OnTransientError")
# Fields that only matter to a cluster's scheduler or kubelet: read past, knowingly.
_CLUSTER_ONLY = frozenset({
    "serviceAccountName", "automountServiceAccountToken", "nodeSelector", "tolerations",
    "affinity", "securityContext", "priorityClassName", "priority", "schedulerName", "hostAliases",
    "dnsPolicy", "dnsConfig", "podGC", "ttlStrategy", "ttlSecondsAfterFinished", "podDisruptionBudget",
    "archiveLocation", "executor", "podPriorityClassName", "podPriority", "artifactRepositoryRef",
})


def is_argo_workflow(document: object) -> bool:
    """Whether a parsed YAML document is an Argo Workflow (what kfp 1.x compiles), not v2 IR."""
    return (
        isinstance(document, dict)
        and str(document.get("apiVersion", "")).startswith("argoproj.io/")
        and document.get("kind") == "Workflow"
    )


def load_workflow(path: str | Path) -> Workflow:
    """The workflow of a ``.yaml`` file or a ``.tar.gz``/``.tgz``/``.zip`` holding ``pipeline.yaml``."""
    return load_workflow_text(read_package(path), str(path))


def load_workflow_text(text: str, source: str) -> Workflow:
    documents = [doc for doc in load_yaml_documents(text, source) if doc is not None]
    if not documents:
        raise UserError(f"{source}: empty file, expected a compiled KFP v1 pipeline (an Argo Workflow)")
    if len(documents) > 1:
        raise UserError(f"{source}: {len(documents)} YAML documents; a compiled KFP v1 pipeline is one Workflow")
    return read_workflow(documents[0], source)


# Template fields of Argo that millpond does not run, and why (the error names both).
_REFUSED_TEMPLATE_FIELDS = (
    ("initContainers", "init containers are not run"),
    ("daemon", "daemon steps are not run"),
    ("suspend", "suspend templates (waiting for a person) are not run"),
    ("synchronization", "semaphores and mutexes are not honoured"),
    ("memoize", "Argo's memoization is not honoured (kfp's caching is)"),
    ("http", "http templates are not run"),
    ("plugin", "plugin templates are not run"),
    ("containerSet", "container sets are not run"),
    ("data", "data templates are not run"),
    ("timeout", "a template timeout is not honoured (activeDeadlineSeconds is)"),
)


def read_workflow(document: object, source: str) -> Workflow:
    """The checked model of one parsed Workflow document (``UserError`` naming the problem otherwise)."""
    return _Reader(source).workflow(document)


class _Reader(PodFields, ResourceFields):
    """One workflow's reading: its parts into the model, then the checks that need every template."""

    # ---- the workflow --------------------------------------------------------------------------

    def workflow(self, document: object) -> Workflow:
        document = self.check_kind(document)
        metadata = self.mapping(document.get("metadata"), "metadata")
        labels = self.labels(metadata.get("labels"), "metadata.labels")
        annotations = self.labels(metadata.get("annotations"), "metadata.annotations")
        if not any(key.startswith(KFP_PREFIX) for key in (*labels, *annotations)):
            self.fail("metadata", "an Argo Workflow without kfp's pipelines.kubeflow.org/ labels or annotations: "
                                  "millpond runs the workflows kfp 1.x compiles, not hand-written Argo")
        self.fields(document, "", ("apiVersion", "kind", "metadata", "spec"), ("status",))
        spec = self.mapping(document.get("spec"), "spec")
        self.fields(spec, "spec", (
            "entrypoint", "templates", "arguments", "onExit", "volumes", "parallelism", "activeDeadlineSeconds",
            "imagePullSecrets",
        ), _CLUSTER_ONLY | {"hostNetwork"})
        pipeline = self.pipeline_spec(annotations.get(PIPELINE_SPEC))
        prefix = self.text(metadata.get("generateName") or metadata.get("name"), "metadata.generateName")
        named = self.text(pipeline.get("name"), f"metadata.annotations[{PIPELINE_SPEC}].name")
        name = named or prefix.rstrip("-") or "pipeline"
        templates = self.templates(spec.get("templates"))
        arguments = self.mapping(spec.get("arguments"), "spec.arguments")
        self.fields(arguments, "spec.arguments", ("parameters", "artifacts"))
        parameters = self.workflow_parameters(arguments.get("parameters"))
        workflow = Workflow(
            name=name,
            run_name_prefix=prefix,
            description=self.text(pipeline.get("description"), f"metadata.annotations[{PIPELINE_SPEC}].description"),
            entrypoint=self.text(spec.get("entrypoint"), "spec.entrypoint", required=True),
            templates=templates,
            parameters=tuple(parameters),
            artifacts=self.arguments({"artifacts": arguments.get("artifacts")}, "spec.arguments").artifacts,
            on_exit=self.text(spec.get("onExit"), "spec.onExit"),
            volumes=self.volumes(spec.get("volumes"), "spec.volumes"),
            parallelism=self.integer(spec.get("parallelism"), "spec.parallelism"),
            active_deadline_seconds=self.integer(spec.get("activeDeadlineSeconds"), "spec.activeDeadlineSeconds"),
            sdk_version=annotations.get(SDK_VERSION) or labels.get(SDK_VERSION, ""),
            source=self.source,
            image_pull_secrets=self.pull_secrets(spec.get("imagePullSecrets"), "spec.imagePullSecrets"),
        )
        check_workflow(self, workflow)
        return workflow

    def check_kind(self, document: object) -> dict[str, Any]:
        """``document`` is an Argo Workflow of the one API version read (UserError naming what it is otherwise)."""
        if not isinstance(document, dict):
            self.fail("", f"not a KFP pipeline (expected a mapping, got {kind_of(document)})")
        kind, api = document.get("kind"), document.get("apiVersion")
        if not is_argo_workflow(document):
            if str(api or "").startswith("argoproj.io/"):
                self.fail("kind", f"an Argo {str(kind)[:40]} is not a compiled KFP v1 pipeline (expected a Workflow)")
            self.fail("", "not a compiled KFP v1 pipeline (expected apiVersion argoproj.io/v1alpha1, kind Workflow)")
        if api != ARGO_API:
            self.fail("apiVersion", f"{str(api)[:40]!r}: only {ARGO_API} is read")
        return document

    def templates(self, raw: object) -> dict[str, Template]:
        """``spec.templates`` by name: at least one, at most ``MAX_TEMPLATES``, each name once."""
        templates: dict[str, Template] = {}
        raw_templates = self.items(raw, "spec.templates")
        if not raw_templates:
            self.fail("spec.templates", "no templates")
        if len(raw_templates) > MAX_TEMPLATES:
            self.fail("spec.templates", f"more than {MAX_TEMPLATES:,} templates")
        for index, item in enumerate(raw_templates):
            template = self.template(item, f"spec.templates[{index}]")
            if template.name in templates:
                self.fail(f"spec.templates[{index}]", f"a second template named {template.name!r}")
            templates[template.name] = template
        return templates

    def workflow_parameters(self, raw: object) -> list[WorkflowParameter]:
        """``spec.arguments.parameters``: the run's inputs, each named once."""
        parameters = []
        for index, item in enumerate(self.items(raw, "spec.arguments.parameters")):
            where = f"spec.arguments.parameters[{index}]"
            entry = self.mapping(item, where)
            self.fields(entry, where, ("name", "value"), ("description", "enum"))
            parameters.append(WorkflowParameter(
                self.text(entry.get("name"), f"{where}.name", required=True),
                self.optional_text(entry.get("value"), where),
            ))
        if len({p.name for p in parameters}) != len(parameters):
            self.fail("spec.arguments.parameters", "a parameter named twice")
        return parameters

    def pipeline_spec(self, text: str | None) -> dict[str, Any]:
        """kfp's ``pipeline_spec`` annotation: the pipeline's name, description and typed inputs (JSON)."""
        return self.json_annotation(text, f"metadata.annotations[{PIPELINE_SPEC}]") if text else {}

    # ---- templates -----------------------------------------------------------------------------

    def template(self, raw: object, where: str) -> Template:
        raw = self.mapping(raw, where)
        name = self.text(raw.get("name"), f"{where}.name", required=True)
        where = f"template {name[:60]!r}"
        kind = self.template_kind(raw, where)
        metadata = self.mapping(raw.get("metadata"), f"{where}.metadata")
        self.fields(metadata, f"{where}.metadata", ("labels", "annotations"))
        labels = self.labels(metadata.get("labels"), f"{where}.metadata.labels")
        annotations = self.labels(metadata.get("annotations"), f"{where}.metadata.annotations")
        caching = Caching(
            enabled=labels.get(ENABLE_CACHING_LABEL, "true").strip().lower() != "false",
            max_staleness=annotations.get(MAX_CACHE_STALENESS, ""),
        )
        component_spec = None
        if annotations.get(COMPONENT_SPEC):
            component_spec = self.json_annotation(annotations[COMPONENT_SPEC], f"{where}.metadata.annotations")
        container = self.container(raw["container"], f"{where}.container") if kind == "container" else None
        script = self.script(raw["script"], f"{where}.script") if kind == "script" else None
        resource = self.resource(raw["resource"], f"{where}.resource") if kind == "resource" else None
        outputs = self.outputs(raw.get("outputs"), f"{where}.outputs", kind)
        template = Template(
            name=name,
            kind=kind,
            inputs=self.inputs(raw.get("inputs"), f"{where}.inputs"),
            outputs=outputs,
            container=container,
            script=script,
            resource=resource,
            dag=self.dag(raw["dag"], f"{where}.dag") if kind == "dag" else (),
            steps=self.steps(raw["steps"], f"{where}.steps") if kind == "steps" else (),
            volumes=self.volumes(raw.get("volumes"), f"{where}.volumes"),
            sidecars=tuple(
                self.sidecar(item, f"{where}.sidecars[{i}]")
                for i, item in enumerate(self.items(raw.get("sidecars"), f"{where}.sidecars"))
            ),
            retry=self.retry(raw.get("retryStrategy"), f"{where}.retryStrategy"),
            active_deadline_seconds=self.integer(raw.get("activeDeadlineSeconds"), f"{where}.activeDeadlineSeconds"),
            parallelism=self.integer(raw.get("parallelism"), f"{where}.parallelism"),
            pod_spec_patch=self.pod_spec_patch(raw.get("podSpecPatch"), f"{where}.podSpecPatch"),
            labels=tuple(labels.items()),
            annotations=tuple(annotations.items()),
            caching=caching,
            component_spec=component_spec,
        )
        self.check_template(template, where)
        return template

    def template_kind(self, raw: Mapping[str, object], where: str) -> TemplateKind:
        """The one kind of a template (container, script, resource, dag, steps); what is not run is refused."""
        for refused, why in _REFUSED_TEMPLATE_FIELDS:
            if refused in raw:
                self.fail(where, f"{refused}: {why}")
        self.fields(raw, where, (
            "name", "container", "script", "resource", "dag", "steps", "inputs", "outputs", "metadata", "volumes",
            "sidecars", "retryStrategy", "activeDeadlineSeconds", "parallelism", "podSpecPatch",
        ), _CLUSTER_ONLY)
        kinds = [kind for kind in TEMPLATE_KINDS if kind in raw]
        if len(kinds) != 1:
            found = ", ".join(kinds) or "none"
            self.fail(where, f"a template needs exactly one of container, script, resource, dag, steps (found {found})")
        return kinds[0]

    def check_template(self, template: Template, where: str) -> None:
        """A process's input artifacts need a path; a resource template's outputs are jsonPath."""
        if template.kind in ("container", "script"):
            for artifact in template.inputs.artifacts:
                if not artifact.path:
                    self.fail(f"{where}.inputs", f"input artifact {artifact.name!r} has no path to be placed at")
        if template.resource is not None:
            for output in template.outputs.parameters:
                if output.json_path is None and output.value is None:
                    self.fail(f"{where}.outputs", f"{output.name!r}: a resource template's outputs are jsonPath")

    def json_annotation(self, text: str, where: str) -> dict[str, Any]:
        """A kfp annotation holding a JSON object (the pipeline's or a component's spec)."""
        try:
            return self.mapping(load_json(text, where), where)
        except DocumentError as exc:
            self.fail("", f"{exc}")

    def inputs(self, raw: object, where: str) -> Inputs:
        raw = self.mapping(raw, where)
        self.fields(raw, where, ("parameters", "artifacts"))
        parameters = []
        for i, item in enumerate(self.items(raw.get("parameters"), f"{where}.parameters")):
            at = f"{where}.parameters[{i}]"
            item = self.mapping(item, at)
            self.fields(item, at, ("name", "value", "default"), ("description", "enum", "globalName"))
            parameters.append(InputParameter(
                self.text(item.get("name"), f"{at}.name", required=True),
                self.optional_text(item.get("value"), f"{at}.value"),
                self.optional_text(item.get("default"), f"{at}.default"),
            ))
        artifacts = []
        for i, item in enumerate(self.items(raw.get("artifacts"), f"{where}.artifacts")):
            at = f"{where}.artifacts[{i}]"
            item = self.mapping(item, at)
            self.refuse_remote(item, at)
            self.fields(item, at, ("name", "path", "raw", "optional"), ("mode", "archive", "globalName"))
            name = self.text(item.get("name"), f"{at}.name", required=True)
            artifacts.append(InputArtifact(
                name, self.text(item.get("path"), f"{at}.path"),
                self.raw_data(item.get("raw"), f"{at}.raw"), self.flag(item.get("optional"), f"{at}.optional"),
            ))
        return Inputs(tuple(parameters), tuple(artifacts))

    def raw_data(self, raw: object, where: str) -> str | None:
        if raw is None:
            return None
        raw = self.mapping(raw, where)
        self.fields(raw, where, ("data",))
        return self.text(raw.get("data"), f"{where}.data")

    def refuse_remote(self, item: Mapping[str, object], where: str) -> None:
        for store in ("s3", "gcs", "http", "git", "artifactory", "hdfs", "oss", "azure"):
            if store in item:
                self.fail(where, f"an artifact in {store}: nothing is fetched from or stored to remote stores here")

    def outputs(self, raw: object, where: str, kind: str) -> Outputs:
        raw = self.mapping(raw, where)
        self.fields(raw, where, ("parameters", "artifacts"), ("result", "exitCode"))
        parameters = []
        for i, item in enumerate(self.items(raw.get("parameters"), f"{where}.parameters")):
            at = f"{where}.parameters[{i}]"
            item = self.mapping(item, at)
            self.fields(item, at, ("name", "value", "valueFrom"), ("description", "globalName", "enum"))
            source = self.mapping(item.get("valueFrom"), f"{at}.valueFrom")
            self.fields(source, f"{at}.valueFrom", ("path", "jsonPath", "default", "parameter"))
            json_path = None
            if "jsonPath" in source:
                if kind != "resource":
                    self.fail(f"{at}.valueFrom", "jsonPath outputs belong to resource templates")
                json_path = self.json_path(self.text(source["jsonPath"], f"{at}.valueFrom.jsonPath"), at)
            if "parameter" in source and kind not in ("dag", "steps"):
                self.fail(f"{at}.valueFrom", "parameter outputs belong to dag and steps templates")
            parameter = OutputParameter(
                name=self.text(item.get("name"), f"{at}.name", required=True),
                path=self.optional_text(source.get("path"), f"{at}.valueFrom.path"),
                json_path=json_path,
                value=self.optional_text(item.get("value"), f"{at}.value"),
                default=self.optional_text(source.get("default"), f"{at}.valueFrom.default"),
                parameter=self.optional_text(source.get("parameter"), f"{at}.valueFrom.parameter"),
            )
            sources = (parameter.path, parameter.json_path, parameter.value, parameter.parameter)
            given = [x for x in sources if x is not None]
            if len(given) != 1:
                self.fail(at, "an output parameter needs exactly one of value, valueFrom.path, jsonPath, parameter")
            parameters.append(parameter)
        artifacts = []
        for i, item in enumerate(self.items(raw.get("artifacts"), f"{where}.artifacts")):
            at = f"{where}.artifacts[{i}]"
            item = self.mapping(item, at)
            self.refuse_remote(item, at)
            ignored = ("archive", "globalName", "mode", "archiveLogs")
            self.fields(item, at, ("name", "path", "optional", "from"), ignored)
            artifact = OutputArtifact(
                self.text(item.get("name"), f"{at}.name", required=True),
                self.text(item.get("path"), f"{at}.path"),
                self.flag(item.get("optional"), f"{at}.optional"),
                self.optional_text(item.get("from"), f"{at}.from"),
            )
            if bool(artifact.path) == (artifact.from_ is not None):
                self.fail(at, "an output artifact needs exactly one of path and from")
            artifacts.append(artifact)
        return Outputs(tuple(parameters), tuple(artifacts))

    def retry(self, raw: object, where: str) -> RetryStrategy | None:
        if raw is None:
            return None
        raw = self.mapping(raw, where)
        if "expression" in raw:
            self.fail(where, "retry expressions are not supported")
        self.fields(raw, where, ("limit", "retryPolicy", "backoff"), ("affinity",))
        policy = self.text(raw.get("retryPolicy"), f"{where}.retryPolicy") or "OnFailure"
        if policy not in RETRY_POLICIES:
            self.fail(f"{where}.retryPolicy", f"{policy[:40]!r} is not one of {', '.join(RETRY_POLICIES)}")
        backoff = self.mapping(raw.get("backoff"), f"{where}.backoff")
        self.fields(backoff, f"{where}.backoff", ("duration", "factor", "maxDuration"))
        factor = backoff.get("factor")
        if factor is not None:
            factor_text = self.text(factor, f"{where}.backoff.factor")
            try:
                factor = float(factor_text)
            except ValueError:
                self.fail(f"{where}.backoff.factor", f"{factor_text[:40]!r} is not a number")
        return RetryStrategy(
            limit=self.integer(raw.get("limit"), f"{where}.limit"),
            policy=policy,
            backoff_duration=self.text(backoff.get("duration"), f"{where}.backoff.duration"),
            backoff_factor=factor,
            backoff_max_duration=self.text(backoff.get("maxDuration"), f"{where}.backoff.maxDuration"),
        )

    # ---- dag and steps -------------------------------------------------------------------------

    def dag(self, raw: object, where: str) -> tuple[Task, ...]:
        raw = self.mapping(raw, where)
        if "target" in raw:
            self.fail(where, "target (running part of a DAG) is not supported")
        self.fields(raw, where, ("tasks",), ("failFast",))
        tasks = tuple(self.task(item, f"{where}.tasks[{i}]", dag=True)
                      for i, item in enumerate(self.items(raw.get("tasks"), f"{where}.tasks")))
        if not tasks:
            self.fail(where, "no tasks")
        return tasks

    def steps(self, raw: object, where: str) -> tuple[tuple[Task, ...], ...]:
        groups = []
        for i, group in enumerate(self.items(raw, where)):
            groups.append(tuple(self.task(item, f"{where}[{i}][{j}]", dag=False)
                                for j, item in enumerate(self.items(group, f"{where}[{i}]"))))
        return tuple(groups)

    def task(self, raw: object, where: str, dag: bool) -> Task:
        raw = self.mapping(raw, where)
        name = self.text(raw.get("name"), f"{where}.name", required=True)
        where = f"{where.rsplit('.', 1)[0]}.{'task' if dag else 'step'} {name[:60]!r}"
        for refused in ("templateRef", "inline", "withSequence", "hooks"):
            if refused in raw:
                self.fail(where, f"{refused} is not supported")
        known = ["name", "template", "arguments", "when", "withItems", "withParam", "onExit", "continueOn"]
        if dag:
            known += ["dependencies", "depends"]
        self.fields(raw, where, known)
        continue_on = self.mapping(raw.get("continueOn"), f"{where}.continueOn")
        self.fields(continue_on, f"{where}.continueOn", ("failed", "error"))
        with_items = None
        if "withItems" in raw:
            with_items = tuple(self.items(raw["withItems"], f"{where}.withItems"))
        task = Task(
            name=name,
            template=self.text(raw.get("template"), f"{where}.template", required=True),
            arguments=self.arguments(raw.get("arguments"), f"{where}.arguments"),
            dependencies=self.strings(raw.get("dependencies"), f"{where}.dependencies"),
            depends=self.text(raw.get("depends"), f"{where}.depends"),
            when=self.text(raw.get("when"), f"{where}.when"),
            with_items=with_items,
            with_param=self.text(raw.get("withParam"), f"{where}.withParam"),
            on_exit=self.text(raw.get("onExit"), f"{where}.onExit"),
            continue_on_failed=self.flag(continue_on.get("failed"), f"{where}.continueOn.failed"),
            continue_on_error=self.flag(continue_on.get("error"), f"{where}.continueOn.error"),
        )
        if task.dependencies and task.depends:
            self.fail(where, "dependencies and depends cannot both be given")
        if task.with_items is not None and task.with_param:
            self.fail(where, "withItems and withParam cannot both be given")
        if task.when:
            when.check(task.when, f"{self.source}: {where}.when")
        return task

    def arguments(self, raw: object, where: str) -> Arguments:
        raw = self.mapping(raw, where)
        self.fields(raw, where, ("parameters", "artifacts"))
        parameters = []
        for i, item in enumerate(self.items(raw.get("parameters"), f"{where}.parameters")):
            at = f"{where}.parameters[{i}]"
            item = self.mapping(item, at)
            if "valueFrom" in item:
                self.fail(at, "an argument's valueFrom is not supported")
            self.fields(item, at, ("name", "value"))
            parameters.append(ParameterArgument(
                self.text(item.get("name"), f"{at}.name", required=True), self.text(item.get("value"), f"{at}.value")
            ))
        artifacts = []
        for i, item in enumerate(self.items(raw.get("artifacts"), f"{where}.artifacts")):
            at = f"{where}.artifacts[{i}]"
            item = self.mapping(item, at)
            self.refuse_remote(item, at)
            self.fields(item, at, ("name", "from", "raw"), ("archive", "mode", "optional"))
            artifact = ArtifactArgument(
                self.text(item.get("name"), f"{at}.name", required=True),
                self.optional_text(item.get("from"), f"{at}.from"), self.raw_data(item.get("raw"), f"{at}.raw"),
            )
            if (artifact.from_ is None) == (artifact.raw is None):
                self.fail(at, "an artifact argument needs exactly one of from and raw")
            artifacts.append(artifact)
        return Arguments(tuple(parameters), tuple(artifacts))



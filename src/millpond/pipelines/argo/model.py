"""The typed model of a KFP v1 (Argo) workflow: what kfp 1.x emits, and nothing millpond cannot honour.

Every record is frozen: the reader builds it once from the checked YAML, and whoever maps it
onto the engine may share it between runs and threads. Strings keep their Argo ``{{...}}`` tags
unresolved (``templating`` resolves them at run time, when task outputs exist); everything else
is already the type it means (ints, tuples, parsed manifests), so no later step parses YAML again.

Field names follow Argo's (snake_case), so a reader of Argo's documentation finds them.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal

# KFP v1's labels and annotations on a template's metadata (kfp.compiler._op_to_template).
ENABLE_CACHING_LABEL = "pipelines.kubeflow.org/enable_caching"
MAX_CACHE_STALENESS = "pipelines.kubeflow.org/max_cache_staleness"
COMPONENT_SPEC = "pipelines.kubeflow.org/component_spec"
COMPONENT_REF = "pipelines.kubeflow.org/component_ref"
ARGUMENTS_PARAMETERS = "pipelines.kubeflow.org/arguments.parameters"
PIPELINE_SPEC = "pipelines.kubeflow.org/pipeline_spec"
SDK_VERSION = "pipelines.kubeflow.org/kfp_sdk_version"


@dataclass(frozen=True)
class InputParameter:
    """A template's input parameter; ``value`` is fixed by the template, ``default`` used when no argument."""

    name: str
    value: str | None = None
    default: str | None = None


@dataclass(frozen=True)
class OutputParameter:
    """How a task's output parameter is read: a file it wrote, a JSONPath of a created object, or a literal.

    ``path`` is kfp's ``file_outputs`` (and a lightweight component's outputs); ``json_path``
    the fields a VolumeOp/VolumeSnapshotOp reads from the object it created; ``value`` a
    literal with tags (kfp's ``*-subpath`` parameters); ``default`` when the file is missing.
    """

    name: str
    path: str | None = None
    json_path: tuple[str, ...] | None = None  # ("metadata", "name"); () for the whole object ('{}')
    value: str | None = None
    default: str | None = None
    parameter: str | None = None  # a dag/steps template's output: a tag naming one of its tasks' outputs


@dataclass(frozen=True)
class InputArtifact:
    """A file or directory placed at ``path`` before the step: from an argument or ``raw`` text.

    A dag or steps template's input artifacts have no path: they are handed on to its tasks.
    """

    name: str
    path: str
    raw: str | None = None
    optional: bool = False


@dataclass(frozen=True)
class OutputArtifact:
    """A file or directory the step leaves at ``path``, kept as the task's artifact (``from_``: a dag's)."""

    name: str
    path: str = ""
    optional: bool = False
    from_: str | None = None  # a dag/steps template's output: a tag naming one of its tasks' artifacts


@dataclass(frozen=True)
class Inputs:
    parameters: tuple[InputParameter, ...] = ()
    artifacts: tuple[InputArtifact, ...] = ()


@dataclass(frozen=True)
class Outputs:
    parameters: tuple[OutputParameter, ...] = ()
    artifacts: tuple[OutputArtifact, ...] = ()


@dataclass(frozen=True)
class ParameterArgument:
    """A task's argument for an input parameter (a string with tags)."""

    name: str
    value: str


@dataclass(frozen=True)
class ArtifactArgument:
    """A task's argument for an input artifact: ``from`` a tag naming another task's artifact, or raw text."""

    name: str
    from_: str | None = None
    raw: str | None = None


@dataclass(frozen=True)
class Arguments:
    parameters: tuple[ParameterArgument, ...] = ()
    artifacts: tuple[ArtifactArgument, ...] = ()


EnvSourceKind = Literal["fieldRef", "secretKeyRef", "configMapKeyRef", "resourceFieldRef"]


@dataclass(frozen=True)
class EnvVar:
    """One environment variable: a literal ``value`` (tags allowed) or one taken from elsewhere.

    ``fieldRef`` is Kubernetes' downward API (``metadata.name`` is the pod's name, KFP's
    ``add_pod_env`` reads labels); ``secretKeyRef``/``configMapKeyRef`` name a key of a
    millpond secret or config map.
    """

    name: str
    value: str | None = None
    source: EnvSourceKind | None = None
    source_name: str = ""  # the secret's or config map's name
    key: str = ""  # the key, the fieldPath, or the resource ('limits.cpu')
    optional: bool = False


@dataclass(frozen=True)
class EnvFrom:
    """Every key of a secret or config map as an environment variable (``envFrom``)."""

    kind: Literal["secretRef", "configMapRef"]
    name: str
    prefix: str = ""
    optional: bool = False


@dataclass(frozen=True)
class VolumeMount:
    name: str
    mount_path: str
    sub_path: str = ""
    read_only: bool = False


@dataclass(frozen=True)
class Resources:
    """Requests and limits as written (quantities: '500m', '1Gi'; tags allowed, resolved at run time)."""

    requests: tuple[tuple[str, str], ...] = ()
    limits: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Container:
    """A container as a step runs it: in its image, or on the host (the runtime policy decides)."""

    image: str
    image_pull_policy: str = ""
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[EnvVar, ...] = ()
    env_from: tuple[EnvFrom, ...] = ()
    volume_mounts: tuple[VolumeMount, ...] = ()
    resources: Resources = field(default_factory=Resources)
    working_dir: str = ""


@dataclass(frozen=True)
class Script:
    """A ``script`` template: ``source`` written to a file and run by ``container.command``."""

    container: Container
    source: str


@dataclass(frozen=True)
class Sidecar:
    """A process started beside the main step and stopped when it ends (``dsl.Sidecar``)."""

    name: str
    container: Container
    mirror_volume_mounts: bool = False


VolumeKind = Literal["secret", "configMap", "persistentVolumeClaim", "emptyDir"]
TemplateKind = Literal["container", "script", "resource", "dag", "steps"]
TEMPLATE_KINDS: tuple[TemplateKind, ...] = ("container", "script", "resource", "dag", "steps")


@dataclass(frozen=True)
class Volume:
    """A named volume a step mounts: a secret's or config map's keys as files, a claim, or scratch.

    ``source`` is the secret's name, the config map's, or the claim's (tags allowed: a
    VolumeOp's claim is ``{{inputs.parameters.<op>-name}}``); empty for ``emptyDir``.
    ``items`` pick keys of a secret or config map as (key, path) pairs.
    """

    name: str
    kind: VolumeKind
    source: str = ""
    items: tuple[tuple[str, str], ...] = ()
    optional: bool = False
    read_only: bool = False


@dataclass(frozen=True)
class ClaimRequest:
    """The PersistentVolumeClaim a VolumeOp creates: a named local volume.

    ``name`` is the manifest's ``metadata.name`` with tags (``{{workflow.name}}-my-pvc``), or
    its ``generateName`` prefix; ``snapshot`` names a VolumeSnapshot the claim starts from
    (``dsl.VolumeOp(data_source=...)``).
    """

    name: str
    generate_name: bool
    size: str
    access_modes: tuple[str, ...] = ()
    storage_class: str = ""
    snapshot: str = ""


@dataclass(frozen=True)
class SnapshotRequest:
    """The VolumeSnapshot a VolumeSnapshotOp creates: locally, a copy of the claim ``source``."""

    name: str
    generate_name: bool
    source: str


@dataclass(frozen=True)
class Resource:
    """A ``resource`` template, as KFP's VolumeOp and VolumeSnapshotOp write it (``action: create``).

    ``manifest`` is the object as written (tags unresolved, parsed once); its ``jsonPath``
    outputs read it after creation. Any other object or action is refused by the reader.
    """

    action: str
    manifest: dict[str, Any]
    claim: ClaimRequest | None = None
    snapshot: SnapshotRequest | None = None
    success_condition: str = ""
    failure_condition: str = ""


@dataclass(frozen=True)
class RetryStrategy:
    """``retryStrategy``: at most ``limit`` retries (None: Argo's unlimited), on which failures, with backoff.

    ``policy`` is Argo's retryPolicy (Always, OnFailure, OnError, OnTransientError; Argo's
    default is OnFailure). Backoff durations are Go durations or seconds, kept as written.
    """

    limit: int | None
    policy: str = "OnFailure"
    backoff_duration: str = ""
    backoff_factor: float | None = None
    backoff_max_duration: str = ""


@dataclass(frozen=True)
class Task:
    """A task of a ``dag`` template, or a step of a ``steps`` template (which has no dependencies).

    ``dependencies`` and ``depends`` (Argo's boolean form, ``a.Succeeded && b``) order tasks;
    ``when`` (tags, then govaluate) decides whether it runs; ``with_items`` (JSON values, tags
    in strings) or ``with_param`` (a tag giving a JSON list) fan it out; ``on_exit`` names a
    template run after it whatever happened.
    """

    name: str
    template: str
    arguments: Arguments = field(default_factory=Arguments)
    dependencies: tuple[str, ...] = ()
    depends: str = ""
    when: str = ""
    with_items: tuple[Any, ...] | None = None
    with_param: str = ""
    on_exit: str = ""
    continue_on_failed: bool = False
    continue_on_error: bool = False


@dataclass(frozen=True)
class Caching:
    """KFP v1's caching of a step: its ``enable_caching`` label and ``max_cache_staleness`` (ISO 8601, 'P0D')."""

    enabled: bool = True
    max_staleness: str = ""


@dataclass(frozen=True)
class Template:
    """One Argo template: exactly one of container, script, resource, dag or steps.

    ``kind`` says which. ``component_spec`` is the KFP component spec kfp 1.x annotated the
    template with (parsed JSON, or None); ``pod_spec_patch`` is the JSON patch of the pod kfp
    writes for run-time resources (``set_cpu_limit`` with a pipeline parameter), parsed, tags kept.
    """

    name: str
    kind: TemplateKind
    inputs: Inputs = field(default_factory=Inputs)
    outputs: Outputs = field(default_factory=Outputs)
    container: Container | None = None
    script: Script | None = None
    resource: Resource | None = None
    dag: tuple[Task, ...] = ()
    steps: tuple[tuple[Task, ...], ...] = ()
    volumes: tuple[Volume, ...] = ()
    sidecars: tuple[Sidecar, ...] = ()
    retry: RetryStrategy | None = None
    active_deadline_seconds: int | None = None
    parallelism: int | None = None  # None or 0: no limit (Argo reads 0 as unset)
    pod_spec_patch: dict[str, Any] | None = None
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    caching: Caching = field(default_factory=Caching)
    component_spec: dict[str, Any] | None = None

    def task(self, name: str) -> Task | None:
        """The DAG task or step called ``name``, if this template has one."""
        for task in (*self.dag, *(step for group in self.steps for step in group)):
            if task.name == name:
                return task
        return None


@dataclass(frozen=True)
class WorkflowParameter:
    """A pipeline parameter (``spec.arguments.parameters``); ``value`` None means required."""

    name: str
    value: str | None


@dataclass(frozen=True)
class Workflow:
    """A compiled KFP v1 pipeline: its templates by name, where it starts, its parameters.

    ``name`` is the pipeline's name from kfp's ``pipeline_spec`` annotation (or the
    ``generateName`` without its dash); ``run_name_prefix`` is the ``generateName`` Argo
    starts run names with. ``volumes`` are the workflow-wide volumes every template may mount.
    """

    name: str
    run_name_prefix: str
    description: str
    entrypoint: str
    templates: dict[str, Template]
    parameters: tuple[WorkflowParameter, ...] = ()
    artifacts: tuple[ArtifactArgument, ...] = ()  # the entrypoint's input artifacts (kfp: raw, from parameters)
    on_exit: str = ""
    volumes: tuple[Volume, ...] = ()
    parallelism: int | None = None
    active_deadline_seconds: int | None = None
    sdk_version: str = ""
    source: str = ""
    image_pull_secrets: tuple[str, ...] = ()  # spec.imagePullSecrets: every step's image is pulled with them

    def template(self, name: str) -> Template:
        return self.templates[name]

    def missing_parameters(self, given: Collection[str]) -> list[str]:
        """The required parameters (no default) that ``given`` lacks, in the workflow's order."""
        return [p.name for p in self.parameters if p.value is None and p.name not in given]

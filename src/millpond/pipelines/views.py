"""Typed views over the IR's JSON: what the engine and its task policies read, by name.

The pipeline spec stays the JSON document it was submitted as (it is stored, hashed for the
cache and handed to the launcher as is); these frozen wrappers give the parts that cross module
boundaries — a component, an executor, its container, a DAG task and a task's inputs — typed
accessors, so a module says what it reads instead of passing ``dict[str, Any]`` along and
reaching into it. Each view keeps its JSON in ``raw`` for the code that hands it on unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from millpond.pipelines.retries import RetryPolicy

JsonObject = dict[str, Any]  # one object of the IR's JSON, as json.loads gives it
ArtifactLists = dict[str, list[JsonObject]]  # an input or output name → its artifacts (RuntimeArtifact JSON)


@dataclass(frozen=True)
class ContainerSpec:
    """A ``PipelineContainerSpec``: the image, its command and arguments, its resource requests."""

    raw: JsonObject

    @property
    def image(self) -> str:
        return str(self.raw.get("image", ""))

    @property
    def image_or_none(self) -> str | None:
        """The image as recorded on a task's row (absent stays absent)."""
        image = self.raw.get("image")
        return None if image is None else str(image)

    @property
    def command(self) -> list[str]:
        return [str(part) for part in self.raw.get("command") or []]

    @property
    def is_lightweight(self) -> bool:
        """A kfp lightweight component: its command runs ``kfp.dsl.executor_main``."""
        return "kfp.dsl.executor_main" in " ".join(self.command)


@dataclass(frozen=True)
class ImporterSpec:
    """A ``dsl.importer``'s executor: the URI it imports (constant or a runtime parameter), its type and metadata."""

    raw: JsonObject

    @property
    def download_to_workspace(self) -> bool:
        return bool(self.raw.get("downloadToWorkspace"))


@dataclass(frozen=True)
class ExecutorSpec:
    """One entry of ``deploymentSpec.executors``: a container, an importer, or a kind millpond refuses."""

    label: str
    raw: JsonObject

    @property
    def kind(self) -> str:
        """``container``, ``importer``, or the unsupported kind's own key (``unknown`` for an empty one)."""
        return next(iter(self.raw), "unknown")

    @property
    def container(self) -> ContainerSpec | None:
        container = self.raw.get("container")
        return ContainerSpec(container) if container is not None else None

    @property
    def importer(self) -> ImporterSpec | None:
        importer = self.raw.get("importer")
        return ImporterSpec(importer) if importer is not None else None


@dataclass(frozen=True)
class ParameterDefinition:
    """An input or output parameter's definition: its type, whether it is optional, its default."""

    raw: JsonObject

    @property
    def type(self) -> str:
        """The IR's parameterType (STRING when undeclared): NUMBER_INTEGER, BOOLEAN, LIST, STRUCT, …"""
        return str(self.raw.get("parameterType", "STRING"))

    @property
    def is_optional(self) -> bool:
        return bool(self.raw.get("isOptional"))

    @property
    def has_default(self) -> bool:
        return "defaultValue" in self.raw

    @property
    def default(self) -> object:
        """The default value, as JSON (check it with ``values.check_json`` before trusting its type)."""
        return self.raw.get("defaultValue")


@dataclass(frozen=True)
class ArtifactDefinition:
    """An input or output artifact's definition: its type schema, whether it is optional."""

    raw: JsonObject

    @property
    def is_optional(self) -> bool:
        return bool(self.raw.get("isOptional"))

    @property
    def type_schema(self) -> dict[str, str]:
        """``{schemaTitle, schemaVersion}``, system.Artifact 0.0.1 when undeclared."""
        type_ = self.raw.get("artifactType", {})
        return {
            "schemaTitle": type_.get("schemaTitle", "system.Artifact"),
            "schemaVersion": type_.get("schemaVersion", "0.0.1"),
        }


@dataclass(frozen=True)
class ComponentSpec:
    """A ``ComponentSpec``: a DAG or an executor's interface (its input and output definitions)."""

    name: str
    raw: JsonObject

    @property
    def is_dag(self) -> bool:
        return "dag" in self.raw

    @property
    def executor_label(self) -> str:
        return str(self.raw["executorLabel"])

    @property
    def input_parameters(self) -> dict[str, ParameterDefinition]:
        return self._parameters("inputDefinitions")

    @property
    def output_parameters(self) -> dict[str, ParameterDefinition]:
        return self._parameters("outputDefinitions")

    @property
    def input_artifacts(self) -> dict[str, ArtifactDefinition]:
        return self._artifacts("inputDefinitions")

    @property
    def output_artifacts(self) -> dict[str, ArtifactDefinition]:
        return self._artifacts("outputDefinitions")

    def input_type(self, name: str) -> str:
        """The declared parameter type of input ``name`` (STRING when undeclared)."""
        return ParameterDefinition(self.raw.get("inputDefinitions", {}).get("parameters", {}).get(name, {})).type

    def _parameters(self, side: str) -> dict[str, ParameterDefinition]:
        found = self.raw.get(side, {}).get("parameters", {})
        return {name: ParameterDefinition(definition) for name, definition in found.items()}

    def _artifacts(self, side: str) -> dict[str, ArtifactDefinition]:
        found = self.raw.get(side, {}).get("artifacts", {})
        return {name: ArtifactDefinition(definition) for name, definition in found.items()}


@dataclass(frozen=True)
class TaskSpec:
    """A ``PipelineTaskSpec``: one task of a DAG, with its policies (trigger, retry, caching, iteration)."""

    raw: JsonObject

    @property
    def component_ref(self) -> str:
        return str(self.raw.get("componentRef", {}).get("name"))

    @property
    def condition(self) -> str | None:
        return self.raw.get("triggerPolicy", {}).get("condition") or None

    @property
    def is_exit_task(self) -> bool:
        """An exit handler's task (ALL_UPSTREAM_TASKS_COMPLETED): it runs after failures and deadlines."""
        return self.raw.get("triggerPolicy", {}).get("strategy") == "ALL_UPSTREAM_TASKS_COMPLETED"

    def retry_policy(self) -> RetryPolicy:
        """The task's retryPolicy; DurationError (a UserError) for a duration not in protobuf's JSON form."""
        return RetryPolicy.from_spec(self.raw.get("retryPolicy"))

    @property
    def caching_enabled(self) -> bool:
        return bool(self.raw.get("cachingOptions", {}).get("enableCache", False))

    @property
    def parallelism_limit(self) -> int:
        """A loop's most iterations at once (0: no limit)."""
        return int(self.raw.get("iteratorPolicy", {}).get("parallelismLimit") or 0)

    @property
    def iterates_artifacts(self) -> bool:
        return "artifactIterator" in self.raw


@dataclass(frozen=True)
class TaskInputs:
    """A task's resolved inputs: parameter values by name and artifact lists by name."""

    parameters: JsonObject = field(default_factory=dict)
    artifacts: ArtifactLists = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """As recorded on the task's row."""
        return {"parameters": self.parameters, "artifacts": self.artifacts}


@dataclass(frozen=True)
class PipelineSpec:
    """A whole ``PipelineSpec``: its root DAG, its components by name, its executors by label."""

    raw: JsonObject

    @property
    def root(self) -> ComponentSpec:
        return ComponentSpec("root", self.raw["root"])

    def component(self, name: str) -> ComponentSpec:
        return ComponentSpec(name, self.raw.get("components", {})[name])

    def executor(self, label: str) -> ExecutorSpec:
        return ExecutorSpec(label, self.raw["deploymentSpec"]["executors"][label])

    @property
    def executor_labels(self) -> list[str]:
        return list(self.raw.get("deploymentSpec", {}).get("executors", {}))

    @property
    def has_lightweight_tasks(self) -> bool:
        """Whether any container runs a kfp lightweight component (the runner may warm up its fork server)."""
        containers = (self.executor(label).container for label in self.executor_labels)
        return any(container is not None and container.is_lightweight for container in containers)

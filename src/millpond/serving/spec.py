"""An InferenceService's predictor as a typed record: what a supervisor needs to start its model server.

KServe's predictor names its model server one of three ways, exactly one per predictor:

- a shorthand field per framework (``sklearn``, ``pytorch``, ``xgboost``, ``lightgbm``, ``onnx``,
  ``tensorflow``, ``triton``, ``huggingface``, ``paddle``, ``pmml``), each a container with a
  ``storageUri``;
- ``model``, with ``modelFormat.name``/``version`` and an optional ``runtime`` (a ServingRuntime's
  name; otherwise KServe picks the default runtime that lists the format with ``autoSelect``);
- ``containers``: a custom model server (the container named ``kserve-container``, or the first).

millpond serves *here*: sklearn models (a joblib or pickle file, whatever runtime was named:
millpond's own server speaks KServe v1 and the Open Inference Protocol v2 as both KServe's
sklearnserver and MLServer do), pytorch models (TorchScript, or a state dict with its module:
not TorchServe's ``.mar`` archives, which only TorchServe reads), and custom containers: in their
image where the runtime policy says so (``serving.placement``: ``millpond.io/runtime`` annotation over
``settings.runtime``), else their ``command`` on this host. Every other format is accepted, as
KServe accepts it, and :attr:`PredictorSpec.unservable` says why it cannot start here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from millpond.datasets.fields import field_path
from millpond.errors import TaskFailure, UserError
from millpond.quantities import parse_bytes, parse_quantity
from millpond.runners.containers.images import parse as parse_image
from millpond.runners.containers.policy import ANNOTATION, POLICIES
from millpond.scheduling.ledger import GpuShare, Request
from millpond.serving.formats import SERVED_FORMATS
from millpond.serving.storage_uri import StorageUri, parse_storage_uri
from millpond.settings import load_settings

SHORTHANDS = ("sklearn", "xgboost", "lightgbm", "onnx", "tensorflow", "pytorch", "triton", "huggingface",
              "paddle", "pmml")
IMPLEMENTATIONS = (*SHORTHANDS, "model", "containers")

# KServe's default ClusterServingRuntimes (config/runtimes): the one picked for a format when the
# predictor names none (autoSelect, highest priority), by protocol.
_DEFAULT_RUNTIMES: dict[str, dict[str, str]] = {
    "sklearn": {"v1": "kserve-sklearnserver", "v2": "kserve-sklearnserver"},
    "xgboost": {"v1": "kserve-xgbserver", "v2": "kserve-xgbserver"},
    "lightgbm": {"v1": "kserve-lgbserver", "v2": "kserve-lgbserver"},
    "tensorflow": {"v1": "kserve-tensorflow-serving", "grpc-v2": "kserve-tritonserver", "v2": "kserve-tritonserver"},
    "pytorch": {"v1": "kserve-torchserve", "v2": "kserve-torchserve", "grpc-v2": "kserve-torchserve"},
    "onnx": {"v1": "kserve-tritonserver", "v2": "kserve-tritonserver", "grpc-v2": "kserve-tritonserver"},
    "triton": {"v1": "kserve-tritonserver", "v2": "kserve-tritonserver", "grpc-v2": "kserve-tritonserver"},
    "tensorrt": {"v1": "kserve-tritonserver", "v2": "kserve-tritonserver", "grpc-v2": "kserve-tritonserver"},
    "huggingface": {"v1": "kserve-huggingfaceserver", "v2": "kserve-huggingfaceserver"},
    "mlflow": {"v2": "kserve-mlserver"},
    "paddle": {"v1": "kserve-paddleserver", "v2": "kserve-paddleserver"},
    "pmml": {"v1": "kserve-pmmlserver", "v2": "kserve-pmmlserver"},
    "autogluon": {"v1": "kserve-autogluonserver", "v2": "kserve-autogluonserver"},
    "vllm": {"v1": "kserve-vllmserver", "v2": "kserve-vllmserver"},
}
_SERVER_OF = {"kserve-tritonserver": "NVIDIA Triton", "kserve-torchserve": "TorchServe",
              "kserve-tensorflow-serving": "TensorFlow Serving", "kserve-mlserver": "MLServer",
              "kserve-huggingfaceserver": "KServe's huggingfaceserver", "kserve-vllmserver": "vLLM"}
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
STORAGE_URI_VAR = "STORAGE_URI"  # a custom container's storageUri (KServe's CustomSpecStorageUriEnvVarKey)
DEFAULT_PORT = 8080  # KServe's model servers and custom containers listen here unless a port is declared

GPU = "nvidia.com/gpu"
GPU_MEM = "aliyun.com/gpu-mem"  # GiB of one GPU (Arena's --gpumemory), as training's pod templates read it
_UNCOUNTED = frozenset({"ephemeral-storage"})


@dataclass(frozen=True)
class EnvVar:
    """One ``env`` entry: a value, or a reference (``valueFrom``: a Secret's or ConfigMap's key) kept as written."""

    name: str
    value: str | None = None
    value_from: dict[str, Any] | None = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class Container:
    """The predictor's container: a shorthand's or ``model``'s fields, or a custom server's."""

    name: str
    image: str | None
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: tuple[EnvVar, ...]
    port: int  # the containerPort the server listens on (KServe: the first declared, else 8080)
    working_dir: str | None
    port_declared: bool = False  # ``ports`` named it (Knative then sets PORT to it), not KServe's default
    image_pull_policy: str | None = None
    memory_limit: int | None = None  # ``resources.limits.memory`` in bytes: what the runtime enforces in the image
    cpu_limit: float | None = None  # ``resources.limits.cpu`` in cores


@dataclass(frozen=True)
class PredictorSpec:
    """One InferenceService's predictor, checked; what the supervisor of model processes reads.

    ``implementation`` is the predictor's field (``sklearn``…, ``model`` or ``containers``);
    ``model_format`` the format served (a shorthand's own name, ``modelFormat.name`` in lower
    case, None for a custom container); ``runtime`` the ServingRuntime named, else KServe's
    default for the format and protocol (``runtime_named`` tells which). ``replicas`` is what
    millpond starts (``minReplicas``, at least 1: no scale to zero here); ``max_replicas`` 0 means
    no maximum, as in KServe. ``unservable`` is why millpond cannot start it here, or None, and
    ``failure_reason`` KServe's name for it (``NoSupportingRuntime``, ``InvalidPredictorSpec``,
    ``ModelLoadFailed``).
    """

    name: str
    namespace: str
    implementation: str
    model_format: str | None
    format_version: str | None
    runtime: str | None
    runtime_named: bool
    protocol: str  # "v1", "v2" or "grpc-v2"
    storage: StorageUri | None
    container: Container
    resources: Request
    replicas: int
    max_replicas: int
    canary_traffic_percent: int | None
    transformer: bool
    explainer: bool
    unservable: str | None
    failure_reason: str | None = None  # KServe's FailureReason for ``unservable`` (NoSupportingRuntime…)
    image_pull_secrets: tuple[str, ...] = ()  # ``spec.predictor.imagePullSecrets`` names (Secrets of the home)
    runtime_policy: str = "auto"  # where a custom container runs: its ``millpond.io/runtime``, else the settings'

    @property
    def server(self) -> str:
        """How millpond would run it: ``sklearn`` or ``pytorch`` (its own model server, on this host),
        ``command`` (a custom container: in its image or its command on this host, as ``serving.placement``
        decides per revision) or ``none`` (``unservable`` says why)."""
        if self.unservable is not None:
            return "none"
        return "command" if self.implementation == "containers" else str(self.model_format)


def predictor_spec(body: dict[str, Any]) -> PredictorSpec:
    """The checked InferenceService ``body`` (apiVersion, kind, metadata, spec) as a PredictorSpec.

    UserError (one line, led by the field) for what KServe's webhook refuses: not exactly one
    implementation, replicas out of order, a storageUri it cannot read, a resource that cannot exist.
    """
    spec = body.get("spec") or {}
    predictor = spec.get("predictor") or {}
    present = [key for key in IMPLEMENTATIONS if predictor.get(key) not in (None, [])]
    if len(present) != 1:
        raise UserError(f"spec.predictor: exactly one of {', '.join(IMPLEMENTATIONS)} must be specified"
                        + (f" (found {', '.join(present)})" if present else ""))
    implementation = present[0]
    where: list[str | int] = ["spec", "predictor", implementation]
    if implementation == "containers":
        containers = predictor["containers"]
        index = next((i for i, c in enumerate(containers) if c.get("name") == "kserve-container"), 0)
        raw, where = containers[index], [*where, index]
    else:
        raw = predictor[implementation]
    model_format, version = _format(implementation, raw)
    protocol = str(raw.get("protocolVersion") or "v1")
    runtime_named = bool(raw.get("runtime")) if implementation == "model" else False
    runtime = str(raw["runtime"]) if runtime_named else (
        _DEFAULT_RUNTIMES.get(model_format or "", {}).get(protocol) if model_format else None)
    storage = parse_storage_uri(raw["storageUri"], field_path([*where, "storageUri"])) \
        if raw.get("storageUri") is not None else _custom_storage(implementation, raw, where)
    container = _container(raw, where)
    replicas, max_replicas = _replicas(predictor)
    canary = predictor.get("canaryTrafficPercent")
    if canary is not None and not 0 <= canary <= 100:
        raise UserError(f"spec.predictor.canaryTrafficPercent: {canary} must be between 0 and 100")
    _check_recorded_numbers(predictor)
    metadata = body.get("metadata") or {}
    secrets = tuple(str(ref.get("name") or "") for ref in predictor.get("imagePullSecrets") or []
                    if isinstance(ref, dict) and ref.get("name"))
    record = PredictorSpec(
        name=str(metadata.get("name")), namespace=str(metadata.get("namespace") or "default"),
        implementation=implementation, model_format=model_format, format_version=version, runtime=runtime,
        runtime_named=runtime_named, protocol=protocol, storage=storage, container=container,
        resources=_resources(raw.get("resources"), [*where, "resources"]), replicas=replicas,
        max_replicas=max_replicas, canary_traffic_percent=canary,
        transformer=bool(spec.get("transformer")), explainer=bool(spec.get("explainer")), unservable=None,
        image_pull_secrets=secrets, runtime_policy=_runtime_policy(metadata))
    return _with_reason(record)


def _runtime_policy(metadata: dict[str, Any]) -> str:
    """The object's ``millpond.io/runtime`` annotation, else the settings' runtime (flag, env, config)."""
    value = (metadata.get("annotations") or {}).get(ANNOTATION)
    if value is None:
        return load_settings().runtime
    if value not in POLICIES:
        raise UserError(f"metadata.annotations.{ANNOTATION}: {value!r} takes one of: {', '.join(POLICIES)}")
    return str(value)


def _custom_storage(implementation: str, raw: dict[str, Any], where: list[str | int]) -> StorageUri | None:
    """A custom container's model: its ``STORAGE_URI`` variable, as KServe's custom predictor reads it (the
    storage initializer then puts the model at ``/mnt/models``)."""
    if implementation != "containers":
        return None
    for index, item in enumerate(raw.get("env") or []):
        if item.get("name") == STORAGE_URI_VAR and item.get("value"):
            return parse_storage_uri(str(item["value"]), field_path([*where, "env", index, "value"]))
    return None


def _format(implementation: str, raw: dict[str, Any]) -> tuple[str | None, str | None]:
    if implementation == "containers":
        return None, None
    if implementation != "model":
        return implementation, None
    model_format = raw.get("modelFormat") or {}
    name = str(model_format.get("name") or "").strip().lower()
    if not name:
        raise UserError("spec.predictor.model.modelFormat.name: required field is missing")
    version = model_format.get("version")
    return name, str(version) if version is not None else None


def _container(raw: dict[str, Any], where: list[str | int]) -> Container:
    env = []
    for item in raw.get("env") or []:
        if item.get("value") is not None and item.get("valueFrom") is not None:
            raise UserError(f"{field_path([*where, 'env'])}: {item['name']}: may not have both value and valueFrom")
        env.append(EnvVar(str(item["name"]), None if item.get("value") is None else str(item["value"]),
                          item.get("valueFrom")))
    ports = raw.get("ports") or []
    for index, port in enumerate(ports):
        number = port.get("containerPort")
        if isinstance(number, int) and not 1 <= number <= 65535:
            raise UserError(f"{field_path([*where, 'ports', index, 'containerPort'])}: {number} must be between 1 "
                            "and 65535, inclusive")
    limits = (raw.get("resources") or {}).get("limits") or {}
    return Container(
        name=str(raw.get("name") or "kserve-container"), image=raw.get("image"),
        command=tuple(str(part) for part in raw.get("command") or ()),
        args=tuple(str(part) for part in raw.get("args") or ()), env=tuple(env),
        port=int(ports[0]["containerPort"]) if ports else DEFAULT_PORT, working_dir=raw.get("workingDir"),
        port_declared=bool(ports) and isinstance(ports[0].get("containerPort"), int),
        image_pull_policy=_pull_policy(raw.get("imagePullPolicy"), [*where, "imagePullPolicy"]),
        memory_limit=parse_bytes(limits["memory"], field_path([*where, "resources", "limits", "memory"]))
        if "memory" in limits else None,
        cpu_limit=float(parse_quantity(limits["cpu"], field_path([*where, "resources", "limits", "cpu"])).cores)
        if "cpu" in limits else None)


def _pull_policy(value: Any, where: list[str | int]) -> str | None:
    """``imagePullPolicy`` as Kubernetes takes it (unset: its default, from the tag, when the image is pulled)."""
    if value in (None, ""):
        return None
    if value not in _PULL_POLICIES:
        raise UserError(f"{field_path(where)}: Unsupported value: {value!r}: supported values: "
                        + ", ".join(f'"{p}"' for p in _PULL_POLICIES))
    return str(value)


# Knative's bounds for what KServe hands it (its defaults: container-concurrency-max-limit 1000,
# max-revision-timeout-seconds 600); millpond records these fields, and refuses what Knative would.
_KNATIVE_BOUNDS = {"containerConcurrency": (0, 1000), "timeout": (0, 600), "scaleTarget": (1, None)}


def _check_recorded_numbers(predictor: dict[str, Any]) -> None:
    """The autoscaler's and the batcher's numbers, recorded here, within the bounds Knative and KServe keep."""
    for key, (low, high) in _KNATIVE_BOUNDS.items():
        value = predictor.get(key)
        if value is not None and (value < low or (high is not None and value > high)):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise UserError(f"spec.predictor.{key}: {value} must be {bound} (Knative's bound)")
    if predictor.get("scaleMetric") in ("cpu", "memory") and (predictor.get("scaleTarget") or 0) > 100:
        metric = predictor["scaleMetric"]
        raise UserError(f"spec.predictor.scaleTarget: {predictor['scaleTarget']} is a percentage of the {metric} "
                        f"requested with scaleMetric {metric}: at most 100")
    batcher = predictor.get("batcher") or {}
    for key in ("maxBatchSize", "maxLatency", "timeout"):
        if isinstance(batcher.get(key), int) and batcher[key] < 0:
            raise UserError(f"spec.predictor.batcher.{key}: {batcher[key]} cannot be less than 0")


def _replicas(predictor: dict[str, Any]) -> tuple[int, int]:
    """KServe's rules: neither below 0, min no more than max (max 0: no maximum)."""
    low, high = predictor.get("minReplicas"), predictor.get("maxReplicas")
    for key, value in (("minReplicas", low), ("maxReplicas", high)):
        if value is not None and value < 0:
            raise UserError(f"spec.predictor.{key}: {value} cannot be less than 0")
    if low is not None and high and low > high:
        raise UserError(f"spec.predictor.minReplicas: {low} cannot be greater than maxReplicas ({high})")
    return max(1, low or 0), high or 0


def _resources(spec: Any, where: list[str | int]) -> Request:
    """``requests`` (else ``limits``, as Kubernetes defaults them) of cpu, memory and GPUs, for the ledger."""
    spec = spec or {}
    merged: dict[str, Any] = {**(spec.get("limits") or {}), **(spec.get("requests") or {})}
    for key in ("requests", "limits"):
        for name in spec.get(key) or {}:
            if name not in ("cpu", "memory", GPU, GPU_MEM) and name not in _UNCOUNTED:
                raise UserError(f"{field_path([*where, key, name])}: the resource {name} cannot exist on this "
                                f"machine (millpond counts cpu, memory, {GPU} and {GPU_MEM})")
    cpu = parse_quantity(merged["cpu"], field_path([*where, "cpu"])).milli_value() if "cpu" in merged else 0
    memory = parse_bytes(merged["memory"], field_path([*where, "memory"])) if "memory" in merged else 0
    gpus = 0
    shares: tuple[GpuShare, ...] = ()
    if GPU in merged:
        value = parse_quantity(merged[GPU], field_path([*where, GPU]))
        if value.milli_value() % 1000 or value.value() < 0:
            raise UserError(f"{field_path([*where, GPU])}: {merged[GPU]!r} is not a whole number of GPUs")
        gpus = value.value()
    if GPU_MEM in merged:
        gib = parse_quantity(merged[GPU_MEM], field_path([*where, GPU_MEM]))
        if gib.amount <= 0 or gpus:
            raise UserError(f"{field_path([*where, GPU_MEM])}: {merged[GPU_MEM]!r}: a share is more than 0 GiB, "
                            f"and never asked with {GPU}")
        shares = (GpuShare(int(gib.amount * 2**30) // 2**20 * 2**20, 0),)
    return Request(cpu, memory, gpus, shares)


def _with_reason(record: PredictorSpec) -> PredictorSpec:
    found = unservable_reason(record)
    return replace(record, failure_reason=found[0], unservable=found[1]) if found else record


def unservable_reason(record: PredictorSpec) -> tuple[str, str] | None:
    """(KServe's FailureReason, message) of why millpond cannot start this predictor here, or None."""
    if record.storage is not None and record.storage.unreadable:
        return "ModelLoadFailed", f"storageUri {record.storage.uri}: {record.storage.unreadable}"
    if record.implementation == "containers":
        image = record.container.image
        if record.container.command:
            return None
        if not image:
            return "InvalidPredictorSpec", no_command(image, "it names no image")
        if record.runtime_policy == "host":
            return "InvalidPredictorSpec", no_command(image, "the runtime policy is host")
        if not _is_reference(image):
            return "InvalidPredictorSpec", no_command(image, "that is not a valid image reference")
        return None
    if record.model_format not in SERVED_FORMATS:
        server = _SERVER_OF.get(record.runtime or "") or (f"KServe's {_shown(record.runtime)}" if record.runtime
                                                           else "a serving runtime")
        return "NoSupportingRuntime", (
            f"{_shown(str(record.model_format))} models need {server}, which millpond does not run; millpond serves "
            f"{' and '.join(SERVED_FORMATS)} models, and custom containers with a command")
    if record.storage is None:
        return "InvalidPredictorSpec", f"no storageUri: millpond's {record.model_format} server has no model to load"
    return None


def _is_reference(image: str) -> bool:
    try:
        parse_image(image)
    except TaskFailure:
        return False
    return True


def no_command(image: str | None, why: str) -> str:
    """Why a custom container without ``command`` cannot run on this host: only its image's entrypoint runs it."""
    return (f"the container has no command: image {_shown(image or '(none)')}'s entrypoint is not run here ({why}); "
            "give the container a command that runs on this host, or let it run in its image "
            "(millpond.io/runtime: auto or container, with a container runtime installed)")


def _shown(text: str) -> str:
    """A name from the manifest as a status message shows it: quoted when it holds a line break or the like."""
    return text if text.isprintable() else json.dumps(text)

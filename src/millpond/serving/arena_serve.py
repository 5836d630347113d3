"""``arena serve custom|kserve|sklearn`` as a KServe InferenceService manifest: Arena's flags, typed.

Arena's ``serve kserve`` renders its Helm chart (``charts/kserve``) into one
``serving.kserve.io/v1beta1`` InferenceService; millpond builds the same object from the same
flags here, so that what ``arena serve`` stores is exactly what ``millpond apply -f`` of that
manifest would store, checked by the same code (``serving.objects.check``):

- ``kserve --model-format NAME[:VERSION]`` is a ``model`` predictor (``modelFormat``, ``runtime``,
  ``storageUri``, ``protocolVersion``, ``runtimeVersion``); ``kserve`` without a format, and
  ``custom``, are a custom container (``containers``: the one named ``kserve-container``) whose
  command runs ``sh -c COMMAND`` as Arena's chart writes it (``--shell`` picks another shell).
- ``sklearn`` is millpond's shorthand, not an Arena type: the ``sklearn`` predictor with
  ``--model-uri`` (the name of Arena's seldon flag; ``--storage-uri`` also works).
- ``--model-name``/``--model-version``/``--version`` become the labels Arena sets (``modelName``,
  ``modelVersion``, ``servingVersion``), with ``servingType`` and ``servingName``; ``--label`` and
  ``--annotation`` are added as given.
- ``--data DATASET:PATH`` is a PVC volume (a dataset here) mounted at PATH in the container,
  as Arena's chart mounts it; a custom container's command that runs on this host is run
  through ``serving.with_data``, which binds each dataset at its PATH in a private mount namespace
  (the manifest's command shows that launcher before ``sh -c COMMAND``); one that runs in its
  image gets the same datasets bound by its supervisor. For a predictor with a
  model format, whose model is read from its ``storageUri``, it becomes that URI:
  ``pvc://DATASET`` when no URI is given, and an absolute ``--storage-uri``/``--model-uri``
  under PATH names the same file as ``pvc://DATASET/REST``.

Every flag is checked here, and a bad one is one :class:`~millpond.errors.UserError` naming it,
before anything is stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from millpond.errors import UserError
from millpond.names import check_namespace, subdomain_problem
from millpond.quantities import parse_quantity
from millpond.serving import with_data
from millpond.serving.spec import GPU, GPU_MEM

API_VERSION = "serving.kserve.io/v1beta1"
TYPES = ("custom", "kserve", "sklearn")
# Arena's other serve types: what runs them, for the one line that says millpond does not
ELSEWHERE = {
    "tensorflow": "TensorFlow Serving", "tf": "TensorFlow Serving", "triton": "NVIDIA Triton",
    "kfserving": "KFServing (KServe's predecessor, v1alpha2)", "kfs": "KFServing (KServe's predecessor, v1alpha2)",
    "seldon": "Seldon Core's pre-packaged servers", "distributed": "LeaderWorkerSet (distributed serving)",
    "tensorrt": "TensorRT Inference Server", "trt": "TensorRT Inference Server",
}
PROTOCOLS = ("v1", "v2", "grpc-v1", "grpc-v2")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")
_LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")  # Kubernetes' rule for a container's variable names
_ISVC_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")  # KServe: a DNS-1035 label, led by a letter


@dataclass(frozen=True)
class ServeArgs:
    """Arena's serve flags, as given (strings and numbers; ``-1`` or ``""`` for a flag not given)."""

    type: str  # custom, kserve or sklearn
    name: str
    namespace: str = "default"
    version: str = ""
    model_name: str = ""
    model_version: str = ""
    image: str = ""
    command: str = ""  # --command, or the positional words joined
    shell: str = "sh"
    port: int = 0
    restful_port: int = 0
    replicas: int = 1
    gpus: int = 0
    gpumemory: int = 0
    gpucore: int = 0
    cpu: str = ""
    memory: str = ""
    data: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    annotations: tuple[str, ...] = ()
    # kserve
    model_format: str = ""
    runtime: str = ""
    storage_uri: str = ""
    runtime_version: str = ""
    protocol_version: str = ""
    min_replicas: int = -1
    max_replicas: int = 0
    canary_traffic_percent: int = -1
    scale_target: int = 0
    scale_metric: str = ""
    container_concurrency: int = 0
    timeout: int = 0


@dataclass(frozen=True)
class DataMount:
    """``--data DATASET:PATH``: the dataset (a PVC here) and where the container sees it."""

    dataset: str
    path: str


def refusal(serve_type: str) -> str:
    """The one line for an Arena serve type millpond does not run."""
    what = ELSEWHERE.get(serve_type, "")
    runs = f"it needs {what}, which millpond does not run; " if what else ""
    return (f"arena serve {serve_type}: {runs}millpond serves custom (a command on this host), kserve "
            "(an InferenceService: sklearn and pytorch models, or a command) and sklearn")


def inference_service(args: ServeArgs) -> dict[str, Any]:
    """The InferenceService ``args`` describe; UserError (one line naming the flag) for a bad one."""
    if args.type not in TYPES:
        raise UserError(refusal(args.type))
    _check_name(args.name, args.namespace)
    _check_counts(args)
    mounts = data_mounts(args.data)
    metadata: dict[str, Any] = {"name": args.name, "namespace": args.namespace,
                                "labels": _labels(args), **({"annotations": a} if (a := _annotations(args)) else {})}
    predictor: dict[str, Any] = {}
    replicas = args.min_replicas if args.min_replicas >= 0 else args.replicas
    if replicas != 1 or args.min_replicas >= 0:
        predictor["minReplicas"] = replicas
    if args.max_replicas:
        predictor["maxReplicas"] = args.max_replicas
    if args.canary_traffic_percent >= 0:
        predictor["canaryTrafficPercent"] = args.canary_traffic_percent
    for key, value in (("scaleTarget", args.scale_target), ("scaleMetric", args.scale_metric),
                       ("containerConcurrency", args.container_concurrency), ("timeout", args.timeout)):
        if value:
            predictor[key] = value
    fmt = _model_format(args)
    if fmt is None:
        container = {"name": "kserve-container", **_container(args, mounts, command_required=args.type == "custom",
                                                              custom=True)}
        predictor["containers"] = [container]
        if mounts:
            predictor["volumes"] = [{"name": m.dataset, "persistentVolumeClaim": {"claimName": m.dataset}}
                                    for m in mounts]
    else:
        body: dict[str, Any] = {}
        if args.type == "kserve":
            body["modelFormat"] = fmt
            if args.runtime:
                body["runtime"] = args.runtime
        storage = _storage_uri(args, mounts)
        if storage:
            body["storageUri"] = storage
        if args.protocol_version:
            body["protocolVersion"] = args.protocol_version
        if args.runtime_version:
            body["runtimeVersion"] = args.runtime_version
        if args.command.strip():
            raise UserError(f"a command runs in a custom container (arena serve custom, or kserve without "
                            f"--model-format); a {'sklearn' if args.type == 'sklearn' else 'model-format'} "
                            "predictor is served by millpond's model server")
        body.update(_container(args, (), command_required=False))
        predictor["model" if args.type == "kserve" else "sklearn"] = body
    return {"apiVersion": API_VERSION, "kind": "InferenceService", "metadata": metadata,
            "spec": {"predictor": predictor}}


def _check_name(name: str, namespace: str) -> None:
    if not name:
        raise UserError("--name is required")
    if not _ISVC_NAME.fullmatch(name):
        raise UserError(f"--name {name!r}: an InferenceService name is lower case letters, digits and '-', "
                        "starts with a letter, ends with a letter or digit, at most 63 characters")
    check_namespace(namespace, "--namespace")


def _check_counts(args: ServeArgs) -> None:
    """Arena's checks (``--gpus is invalid``…), and KServe's replica and canary rules, by flag."""
    for flag, value in (("--gpus", args.gpus), ("--gpumemory", args.gpumemory), ("--replicas", args.replicas),
                        ("--max-replicas", args.max_replicas), ("--port", args.port),
                        ("--restful-port", args.restful_port), ("--scale-target", args.scale_target),
                        ("--container-concurrency", args.container_concurrency), ("--timeout", args.timeout)):
        if value < 0:
            raise UserError(f"{flag} {value}: cannot be negative")
    for flag, value, most in (("--timeout", args.timeout, 600), ("--container-concurrency",
                                                                 args.container_concurrency, 1000)):
        if value > most:
            raise UserError(f"{flag} {value}: at most {most} (Knative's bound)")
    for flag, port in (("--port", args.port), ("--restful-port", args.restful_port)):
        if port > 65535:
            raise UserError(f"{flag} {port}: a port is at most 65535")
    if args.min_replicas < -1:
        raise UserError(f"--min-replicas {args.min_replicas}: cannot be negative")
    if args.replicas == 0 and args.min_replicas < 0 or args.min_replicas == 0:
        raise UserError("--replicas/--min-replicas 0: scale to zero needs Knative's activator; millpond runs at "
                        "least one replica")
    low = args.min_replicas if args.min_replicas >= 0 else args.replicas
    if args.max_replicas and low > args.max_replicas:
        raise UserError(f"--min-replicas {low} cannot be greater than --max-replicas {args.max_replicas}")
    if not -1 <= args.canary_traffic_percent <= 100:
        raise UserError(f"--canary-traffic-percent {args.canary_traffic_percent}: must be between 0 and 100")
    if args.gpus and args.gpumemory:
        raise UserError("--gpumemory asks for a share of one GPU: not with --gpus")
    if args.gpucore:
        raise UserError(f"--gpucore {args.gpucore}: millpond's serving counts whole GPUs (--gpus) and GPU memory "
                        "(--gpumemory), not a share of a GPU's cores")
    for flag, text in (("--cpu", args.cpu), ("--memory", args.memory)):
        if text:
            parse_quantity(text, flag)
    if args.protocol_version and args.protocol_version not in PROTOCOLS:
        raise UserError(f"--protocol-version {args.protocol_version!r}: one of {', '.join(PROTOCOLS)}")
    if args.type != "kserve":
        for flag, kserve_value in (("--model-format", args.model_format), ("--runtime", args.runtime),
                                   ("--runtime-version", args.runtime_version)):
            if kserve_value:
                raise UserError(f"{flag}: a kserve flag (arena serve kserve), not one of arena serve {args.type}")
    if args.type == "custom":
        for flag, set_ in (("--storage-uri", args.storage_uri), ("--protocol-version", args.protocol_version),
                           ("--min-replicas", args.min_replicas >= 0), ("--max-replicas", args.max_replicas),
                           ("--canary-traffic-percent", args.canary_traffic_percent >= 0)):
            if set_:
                raise UserError(f"{flag}: not a flag of arena serve custom (use arena serve kserve)")
    if args.shell not in ("sh", "bash"):
        raise UserError(f"--shell {args.shell!r}: sh or bash")


def pairs(values: tuple[str, ...], flag: str) -> dict[str, str]:
    """``KEY=VALUE`` values of a repeatable flag, in order (a later key wins, as Arena's map does)."""
    result: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(f"{flag} {value!r} must be KEY=VALUE")
        result[key] = rest
    return result


def _check_label_key(key: str, flag: str) -> None:
    prefix, _, name = key.rpartition("/")
    if not _LABEL_NAME.fullmatch(name) or (prefix and (len(prefix) > 253 or not _LABEL_PREFIX.fullmatch(prefix))):
        raise UserError(f"{flag} {key!r}: a key is [PREFIX/]NAME: NAME up to 63 letters, digits, '-', '_' or '.', "
                        "starting and ending with a letter or digit; PREFIX a DNS subdomain")


def _labels(args: ServeArgs) -> dict[str, str]:
    labels = {"servingType": "sklearn" if args.type == "sklearn" else "kserve" if args.type == "kserve"
              else "custom", "servingName": args.name}
    for flag, value, key in (("--version", args.version, "servingVersion"),
                             ("--model-name", args.model_name, "modelName"),
                             ("--model-version", args.model_version, "modelVersion")):
        if value:
            if len(value) > 63 or not _LABEL_NAME.fullmatch(value):
                raise UserError(f"{flag} {value!r}: a label value: up to 63 letters, digits, '-', '_' or '.', "
                                "starting and ending with a letter or digit")
            labels[key] = value
    for key, value in pairs(args.labels, "--label").items():
        _check_label_key(key, "--label")
        if value and (len(value) > 63 or not _LABEL_NAME.fullmatch(value)):
            raise UserError(f"--label {key}={value!r}: a label value is up to 63 letters, digits, '-', '_' or '.', "
                            "starting and ending with a letter or digit")
        labels[key] = value
    return labels


def _annotations(args: ServeArgs) -> dict[str, str]:
    found = pairs(args.annotations, "--annotation")
    for key in found:
        _check_label_key(key, "--annotation")
    return found


def data_mounts(values: tuple[str, ...]) -> tuple[DataMount, ...]:
    """``--data DATASET:/PATH`` values: a dataset name, an absolute path, each path once."""
    found: list[DataMount] = []
    for value in values:
        dataset, sep, target = value.partition(":")
        if not sep or not dataset or not target.startswith("/"):
            raise UserError(f"--data {value!r} must be DATASET:/ABSOLUTE/PATH")
        if subdomain_problem(dataset):
            raise UserError(f"--data {value!r}: {dataset!r} is not a dataset name (lower case letters, digits, "
                            "'-' and '.')")
        path = "/" + "/".join(part for part in target.split("/") if part)
        if path == "/" or ".." in path.split("/") or any(ord(c) < 32 for c in path):
            raise UserError(f"--data {value!r}: nothing can be mounted at {target!r}")
        if any(m.path == path for m in found):
            raise UserError(f"--data {value!r}: {path} is mounted twice")
        found.append(DataMount(dataset, path))
    return tuple(found)


def _model_format(args: ServeArgs) -> dict[str, str] | None:
    """The ``modelFormat`` (kserve with --model-format), ``{}`` for sklearn's shorthand, None for a container."""
    if args.type == "sklearn":
        return {}
    if args.type == "custom" or not args.model_format:
        return None
    name, sep, version = args.model_format.partition(":")
    if not name.strip() or (sep and not version.strip()) or any(c.isspace() or ord(c) < 32 for c in args.model_format):
        raise UserError(f"--model-format {args.model_format!r}: expected NAME or NAME:VERSION (sklearn, pytorch:1)")
    return {"name": name, **({"version": version} if sep else {})}


def _storage_uri(args: ServeArgs, mounts: tuple[DataMount, ...]) -> str:
    """``--storage-uri``/``--model-uri``, a path under a ``--data`` mount as its ``pvc://`` URI, or the
    dataset itself when only ``--data`` is given."""
    uri = args.storage_uri
    local = uri[len("file://"):] if uri.startswith("file://") else uri if uri.startswith("/") else ""
    if local:
        for mount in mounts:
            if local == mount.path or local.startswith(mount.path + "/"):
                rest = local[len(mount.path):].strip("/")
                return f"pvc://{mount.dataset}" + (f"/{rest}" if rest else "")
    if uri:
        return uri
    if len(mounts) > 1:
        raise UserError("--data: several datasets and no --storage-uri: name the model's path with --storage-uri "
                        "(a path under one of them)")
    if mounts:
        return f"pvc://{mounts[0].dataset}"
    if args.type == "sklearn":
        raise UserError("--model-uri is required: where the model is (s3://…, pvc://DATASET/PATH, a local path, "
                        "or --data DATASET:PATH)")
    return ""


def _container(args: ServeArgs, mounts: tuple[DataMount, ...], command_required: bool,
               custom: bool = False) -> dict[str, Any]:
    """The container's fields: image, command (``SHELL -c COMMAND``), env, port, resources, mounts.

    A custom server listens on ``$PORT``, which Knative sets to the containerPort and the replica
    supervisor to a free port of its own for each replica (replicas share this machine). A port given
    with ``--port``/``--restful-port`` is Knative's rule: ``PORT`` is that port, so a command that
    listens on a fixed port is found there; then only one replica can listen on it.
    """
    out: dict[str, Any] = {}
    if args.image:
        out["image"] = args.image
    if args.command.strip():
        out["command"] = [args.shell, "-c", args.command]
        if mounts:
            out["command"] = with_data.command(args.namespace, args.name, [(m.dataset, m.path) for m in mounts],
                                               out["command"])
    elif command_required:
        raise UserError("arena serve custom: give the command to run (after the flags, or --command): millpond "
                        "runs it in --image under the runtime policy, else on this host)")
    env = pairs(args.env, "--env")
    for key in env:
        if not _ENV_NAME.fullmatch(key):
            raise UserError(f"--env {key!r}: not a valid variable name (letters, digits, '-', '.', '_')")
    port = args.restful_port or args.port
    if port:
        out["ports"] = [{"containerPort": port, "protocol": "TCP"}]
        if custom and "PORT" not in env:
            replicas = args.min_replicas if args.min_replicas >= 0 else args.replicas
            if replicas > 1:
                flag = "--restful-port" if args.restful_port else "--port"
                raise UserError(f"{flag} {port} with {replicas} replicas: they share this machine, so only one can "
                                f"listen on {port}; leave {flag} out and listen on $PORT (each replica gets its own)")
            env["PORT"] = str(port)
    if env:
        out["env"] = [{"name": key, "value": value} for key, value in env.items()]
    resources: dict[str, Any] = {}
    if args.cpu:
        resources["cpu"] = args.cpu
    if args.memory:
        resources["memory"] = args.memory
    if args.gpus:
        resources[GPU] = str(args.gpus)
    if args.gpumemory:
        resources[GPU_MEM] = str(args.gpumemory)
    if resources:
        out["resources"] = {"requests": dict(resources), "limits": dict(resources)}
    if mounts:
        out["volumeMounts"] = [{"name": m.dataset, "mountPath": m.path} for m in mounts]
    return out

"""``arena serve update custom|kserve|sklearn``: change a served InferenceService, as Arena's update patches it.

Arena's ``serve update kserve`` changes the flags given on the stored InferenceService and leaves
the rest as it is; KServe makes each change of the predictor a new revision, and with
``--canary-traffic-percent P`` the new revision gets P percent of the requests and the previous
rolled-out one the rest, until an update without a split (or with 100) promotes it. Here the same:
:func:`updated` is the stored manifest with the given flags applied (the flags checked as
``arena serve`` checks them), which then goes through ``apply``'s checks and store
(``serving.deploy``); the supervisor sees the changed predictor and starts the new revision.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, fields, replace
from typing import Any

from millpond.errors import UserError
from millpond.serving import with_data
from millpond.serving.arena_serve import (
    ServeArgs,
    _annotations,
    _check_counts,
    _labels,
    pairs,
)
from millpond.serving.spec import GPU, GPU_MEM

# which ``arena serve`` type may update which predictor implementation
_TYPES_OF = {"containers": ("custom", "kserve"), "model": ("kserve",), "sklearn": ("sklearn", "kserve")}


@dataclass(frozen=True)
class UpdateArgs:
    """The update's flags; None (or empty) for a flag not given: that part stays as it is."""

    type: str
    name: str
    namespace: str = "default"
    version: str | None = None
    model_name: str | None = None
    model_version: str | None = None
    image: str | None = None
    command: str | None = None
    shell: str = "sh"
    replicas: int | None = None
    gpus: int | None = None
    gpumemory: int | None = None
    cpu: str | None = None
    memory: str | None = None
    env: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    annotations: tuple[str, ...] = ()
    port: int | None = None
    model_format: str | None = None
    runtime: str | None = None
    storage_uri: str | None = None
    runtime_version: str | None = None
    protocol_version: str | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None
    canary_traffic_percent: int | None = None


def _as_serve_args(args: UpdateArgs) -> ServeArgs:
    """The given flags as ``arena serve``'s, defaults elsewhere, so its checks name a bad one the same way."""
    known = {f.name for f in fields(ServeArgs)}
    given = {key: value for key, value in vars(args).items() if key in known and value is not None}
    return replace(ServeArgs(type=args.type, name=args.name), **given)


def updated(current: dict[str, Any], args: UpdateArgs) -> dict[str, Any]:
    """The stored InferenceService ``current`` with the flags given changed; UserError (one line) for a bad one."""
    serve = _as_serve_args(args)
    _check_counts(serve)
    body = copy.deepcopy(current)
    predictor = body.setdefault("spec", {}).setdefault("predictor", {})
    implementation = next((key for key in _TYPES_OF if predictor.get(key)), None)
    if implementation is None or args.type not in _TYPES_OF[implementation]:
        shown = implementation or "a predictor arena serve does not update"
        raise UserError(f"the serving job {args.name} is {'a ' + shown if implementation else shown} predictor: "
                        f"arena serve update {' or '.join(_TYPES_OF.get(implementation or '', ('kserve',)))}")
    if implementation == "containers":
        containers = predictor["containers"]
        target = next((c for c in containers if c.get("name") == "kserve-container"), containers[0])
    else:
        target = predictor[implementation]
    _predictor_fields(predictor, args)
    _model_fields(target, implementation, args)
    _container_fields(target, implementation, args)
    _metadata(body, args, serve)
    return body


def _predictor_fields(predictor: dict[str, Any], args: UpdateArgs) -> None:
    low = args.min_replicas if args.min_replicas is not None else args.replicas
    if low is not None:
        predictor["minReplicas"] = low
    if args.max_replicas is not None:
        predictor["maxReplicas"] = args.max_replicas
    if args.canary_traffic_percent is not None:
        predictor["canaryTrafficPercent"] = args.canary_traffic_percent


def _model_fields(target: dict[str, Any], implementation: str, args: UpdateArgs) -> None:
    model_only = (("--model-format", args.model_format), ("--runtime", args.runtime),
                  ("--runtime-version", args.runtime_version))
    if implementation != "model":
        for flag, value in model_only:
            if value is not None:
                raise UserError(f"{flag}: this InferenceService has no model predictor (its predictor is "
                                f"{implementation})")
    if implementation == "containers":
        for flag, value in (("--storage-uri", args.storage_uri), ("--protocol-version", args.protocol_version)):
            if value is not None:
                raise UserError(f"{flag}: a custom container has no storageUri or protocol (its command serves it)")
        return
    if args.model_format is not None:
        name, sep, version = args.model_format.partition(":")
        if not name.strip() or (sep and not version.strip()):
            raise UserError(f"--model-format {args.model_format!r}: expected NAME or NAME:VERSION")
        target["modelFormat"] = {"name": name, **({"version": version} if sep else {})}
    for key, value in (("runtime", args.runtime), ("storageUri", args.storage_uri),
                       ("runtimeVersion", args.runtime_version), ("protocolVersion", args.protocol_version)):
        if value is not None:
            target[key] = value


def _container_fields(target: dict[str, Any], implementation: str, args: UpdateArgs) -> None:
    if args.image is not None:
        target["image"] = args.image
    if args.command is not None:
        if implementation != "containers":
            raise UserError("a command runs in a custom container; this predictor is served by millpond's model "
                            "server")
        old = [str(part) for part in target.get("command") or []]
        new = [args.shell, "-c", args.command]
        if old[1:3] == ["-m", with_data.MODULE] and "--" in old:  # keep the datasets it was served with
            new = old[:old.index("--") + 1] + new
        target["command"] = new
        target.pop("args", None)
    env = pairs(args.env, "--env")
    if args.port is not None:
        target["ports"] = [{"containerPort": args.port, "protocol": "TCP"}]
        if implementation == "containers" and "PORT" not in env:
            env["PORT"] = str(args.port)  # Knative's rule, as arena serve custom sets it
    if env:
        current = [dict(item) for item in target.get("env") or []]
        names = [item.get("name") for item in current]
        for key, value in env.items():
            if key in names:
                current[names.index(key)] = {"name": key, "value": value}
            else:
                current.append({"name": key, "value": value})
        target["env"] = current
    resources = {key: value for key, value in (("cpu", args.cpu), ("memory", args.memory),
                                               (GPU, str(args.gpus) if args.gpus else None),
                                               (GPU_MEM, str(args.gpumemory) if args.gpumemory else None))
                 if value is not None}
    if args.gpus == 0 or args.gpumemory:
        _drop_resource(target, GPU)
    if args.gpumemory == 0 or args.gpus:
        _drop_resource(target, GPU_MEM)
    if resources:
        shaped = target.setdefault("resources", {})
        for part in ("requests", "limits"):
            shaped.setdefault(part, {}).update(resources)


def _drop_resource(target: dict[str, Any], name: str) -> None:
    for part in ("requests", "limits"):
        ((target.get("resources") or {}).get(part) or {}).pop(name, None)


def _metadata(body: dict[str, Any], args: UpdateArgs, serve: ServeArgs) -> None:
    metadata = body.setdefault("metadata", {})
    labels = dict(metadata.get("labels") or {})
    fresh = _labels(serve)  # checks the values; only what was given is changed
    for flag_value, key in ((args.version, "servingVersion"), (args.model_name, "modelName"),
                            (args.model_version, "modelVersion")):
        if flag_value:
            labels[key] = fresh[key]
        elif flag_value is not None:  # given empty: the label goes
            labels.pop(key, None)
    for item in args.labels:
        key = item.partition("=")[0].strip()
        labels[key] = fresh[key]
    if labels:
        metadata["labels"] = labels
    annotations = _annotations(serve)
    if annotations:
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations}

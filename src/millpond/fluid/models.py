"""The models of Fluid's Python SDK that a notebook builds by hand, as plain dataclasses.

Fluid generates its models with OpenAPI; their constructors take every field as an
optional keyword, in alphabetical order (``SecretKeySelector(key, name)``), and Fluid's
own code passes some positionally — so the order here is the same. ``to_dict()`` gives
the manifest form (camelCase: ``secretKeyRef``, ``imageTag``), which is what is applied.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from millpond.documents import MAX_DEPTH


def camel_case(name: str) -> str:
    """``service_account_name`` → ``serviceAccountName``: how Fluid's CRDs spell a field."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def to_manifest(value: Any, depth: int = 0) -> Any:
    """A model, a kubernetes client object, or plain data, as manifest JSON (None fields left out).

    kubernetes client models (``V1EnvVar``, ``V1Volume``…) carry their own camelCase map;
    plain dicts keep their keys, since mount ``options`` are not field names. Past
    ``MAX_DEPTH`` levels the value is left as it is, for the manifest check to refuse with
    the field's path (converting it would exhaust Python's stack on a hostile value).
    """
    if depth > MAX_DEPTH:
        return value
    if isinstance(value, Model):
        return value.to_dict(depth)
    attribute_map = getattr(type(value), "attribute_map", None)
    if isinstance(attribute_map, dict) and hasattr(type(value), "openapi_types"):
        return {attribute_map[attr]: to_manifest(getattr(value, attr), depth + 1)
                for attr in attribute_map if getattr(value, attr, None) is not None}
    if isinstance(value, dict):
        return {key: to_manifest(child, depth + 1) for key, child in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_manifest(child, depth + 1) for child in value]
    return value


class Model:
    """A Fluid model: fields in snake_case, ``to_dict()`` in the manifest's camelCase."""

    def to_dict(self, depth: int = 0) -> dict[str, Any]:
        return {camel_case(f.name): to_manifest(getattr(self, f.name), depth + 1)
                for f in fields(self)  # type: ignore[arg-type]  # each Model subclass is a dataclass
                if getattr(self, f.name) is not None}


@dataclass
class SecretKeySelector(Model):
    """One key of a secret (a millpond secret: ``millpond secret create NAME …``)."""

    key: str | None = None
    name: str | None = None


@dataclass
class EncryptOptionSource(Model):
    secret_key_ref: SecretKeySelector | None = None


@dataclass
class EncryptOption(Model):
    """A mount or storage option whose value is read from a secret, never written in a manifest."""

    name: str | None = None
    value_from: EncryptOptionSource | None = None


@dataclass
class ExternalStorage(Model):
    """The other side of a DataMigrate: a URI and the options (credentials) to reach it."""

    encrypt_options: list[EncryptOption] | None = None
    uri: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.encrypt_options, str):  # ExternalStorage("s3://…"): Fluid's order puts uri second
            raise TypeError("ExternalStorage: encrypt_options must be a list; "
                            "pass the URI by name: ExternalStorage(uri=...)")


@dataclass
class ScriptProcessor(Model):
    """A script run by ``command`` (the script file is its last argument), with the dataset mounted.

    ``image``/``image_tag`` are recorded for Kubernetes; on one machine the command runs here.
    """

    command: list[str] | None = None
    env: list[Any] | None = None
    image: str | None = None
    image_pull_policy: str | None = None
    image_tag: str | None = None
    resources: Any = None
    restart_policy: str | None = None
    source: str = ""
    volume_mounts: list[Any] | None = None
    volumes: list[Any] | None = None


@dataclass
class JobProcessor(Model):
    """A DataProcess that runs the containers of a pod spec."""

    pod_spec: Any = None


@dataclass
class PodMetadata(Model):
    annotations: dict[str, str] | None = None
    labels: dict[str, str] | None = None


@dataclass
class Processor(Model):
    """What a DataProcess runs: a ``script`` or a ``job``."""

    job: JobProcessor | None = None
    pod_metadata: PodMetadata | None = None
    script: ScriptProcessor | None = None
    service_account_name: str | None = None


@dataclass
class TargetPath(Model):
    """A path of a dataset to preload (``replicas`` is recorded: one machine holds one copy)."""

    path: str | None = None
    replicas: int | None = None


@dataclass
class Mount(Model):
    """One under file system of a Dataset."""

    encrypt_options: list[EncryptOption] | None = None
    mount_point: str | None = None
    name: str | None = None
    options: dict[str, str] | None = None
    path: str | None = None
    read_only: bool | None = None
    shared: bool | None = None


@dataclass
class Level(Model):
    """One cache tier of a runtime's tieredstore."""

    high: str | None = None
    low: str | None = None
    mediumtype: str | None = None
    path: str | None = None
    quota: str | None = None
    quota_list: str | None = None
    volume_source: Any = None
    volume_type: str | None = None


@dataclass
class TieredStore(Model):
    levels: list[Level] | None = None

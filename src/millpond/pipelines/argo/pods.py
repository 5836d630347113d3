"""The pod side of a template: its container, script, sidecars, volumes and run-time resource patch.

What Kubernetes would make of a pod spec, read into the model as far as a host can honour it:
environment (literal, downward API, secret and config-map keys), mounts of secret, config-map,
claim and scratch volumes; anything else (hostPath, NFS, devices, lifecycle hooks) is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from millpond.documents import load_yaml_documents
from millpond.pipelines.argo.fields import Fields
from millpond.pipelines.argo.model import (
    Container,
    EnvFrom,
    EnvSourceKind,
    EnvVar,
    Resources,
    Script,
    Sidecar,
    Volume,
    VolumeMount,
)

_CONTAINER_IGNORED = frozenset({
    "name", "ports", "securityContext", "livenessProbe", "readinessProbe", "startupProbe",
    "terminationMessagePath", "terminationMessagePolicy", "stdin", "stdinOnce", "tty",
})
_CONTAINER_FIELDS = frozenset({"image", "command", "args", "env", "envFrom", "volumeMounts", "resources", "workingDir",
                               "imagePullPolicy"})


class PodFields(Fields):
    """The accessors for a template's pod parts."""

    def container(self, raw: object, where: str, extra: Iterable[str] = ()) -> Container:
        raw = self.mapping(raw, where)
        if "volumeDevices" in raw or "lifecycle" in raw:
            self.fail(where, "volumeDevices and lifecycle hooks are not supported")
        self.fields(raw, where, _CONTAINER_FIELDS | set(extra), _CONTAINER_IGNORED)
        resources = self.mapping(raw.get("resources"), f"{where}.resources")
        self.fields(resources, f"{where}.resources", ("requests", "limits"))
        return Container(
            image=self.text(raw.get("image"), f"{where}.image"),
            image_pull_policy=self.text(raw.get("imagePullPolicy"), f"{where}.imagePullPolicy"),
            command=self.strings(raw.get("command"), f"{where}.command"),
            args=self.strings(raw.get("args"), f"{where}.args"),
            env=tuple(
                self.env(item, f"{where}.env[{i}]") for i, item in enumerate(self.items(raw.get("env"), f"{where}.env"))
            ),
            env_from=tuple(
                self.env_from(item, f"{where}.envFrom[{i}]")
                for i, item in enumerate(self.items(raw.get("envFrom"), f"{where}.envFrom"))
            ),
            volume_mounts=tuple(
                self.mount(item, f"{where}.volumeMounts[{i}]")
                for i, item in enumerate(self.items(raw.get("volumeMounts"), f"{where}.volumeMounts"))
            ),
            resources=Resources(
                requests=self.quantities(resources.get("requests"), f"{where}.resources.requests"),
                limits=self.quantities(resources.get("limits"), f"{where}.resources.limits"),
            ),
            working_dir=self.text(raw.get("workingDir"), f"{where}.workingDir"),
        )

    def quantities(self, raw: object, where: str) -> tuple[tuple[str, str], ...]:
        values = self.mapping(raw, where)
        return tuple((str(k), self.text(v, f"{where}[{k}]", required=True)) for k, v in values.items())

    def env(self, raw: object, where: str) -> EnvVar:
        raw = self.mapping(raw, where)
        self.fields(raw, where, ("name", "value", "valueFrom"))
        name = self.text(raw.get("name"), f"{where}.name", required=True)
        if "valueFrom" not in raw:
            return EnvVar(name, self.text(raw.get("value"), f"{where}.value"))
        source = self.mapping(raw["valueFrom"], f"{where}.valueFrom")
        if len(source) != 1:
            self.fail(f"{where}.valueFrom", "expected exactly one source")
        kind, spec = next(iter(source.items()))
        at = f"{where}.valueFrom.{kind}"
        spec = self.mapping(spec, at)
        if kind == "fieldRef":
            self.fields(spec, at, ("fieldPath",), ("apiVersion",))
            path = self.text(spec.get("fieldPath"), f"{at}.fieldPath", required=True)
            return EnvVar(name, source="fieldRef", key=path)
        if kind in ("secretKeyRef", "configMapKeyRef"):
            self.fields(spec, at, ("name", "key", "optional"))
            key_ref: EnvSourceKind = "secretKeyRef" if kind == "secretKeyRef" else "configMapKeyRef"
            return EnvVar(
                name, source=key_ref, source_name=self.text(spec.get("name"), f"{at}.name", required=True),
                key=self.text(spec.get("key"), f"{at}.key", required=True),
                optional=self.flag(spec.get("optional"), at),
            )
        if kind == "resourceFieldRef":
            self.fields(spec, at, ("resource",), ("containerName", "divisor"))
            resource = self.text(spec.get("resource"), f"{at}.resource", required=True)
            return EnvVar(name, source="resourceFieldRef", key=resource)
        self.fail(at, f"environment from {kind[:40]!r} is not supported")

    def env_from(self, raw: object, where: str) -> EnvFrom:
        raw = self.mapping(raw, where)
        self.fields(raw, where, ("secretRef", "configMapRef", "prefix"))
        kinds = [k for k in ("secretRef", "configMapRef") if k in raw]
        if len(kinds) != 1:
            self.fail(where, "expected one of secretRef and configMapRef")
        ref = self.mapping(raw[kinds[0]], f"{where}.{kinds[0]}")
        self.fields(ref, f"{where}.{kinds[0]}", ("name", "optional"))
        return EnvFrom(
            kinds[0], self.text(ref.get("name"), f"{where}.{kinds[0]}.name", required=True),
            self.text(raw.get("prefix"), f"{where}.prefix"), self.flag(ref.get("optional"), where),
        )

    def mount(self, raw: object, where: str) -> VolumeMount:
        raw = self.mapping(raw, where)
        if "subPathExpr" in raw or raw.get("mountPropagation"):
            self.fail(where, "subPathExpr and mountPropagation are not supported")
        self.fields(raw, where, ("name", "mountPath", "subPath", "readOnly"), ("mountPropagation",))
        return VolumeMount(
            self.text(raw.get("name"), f"{where}.name", required=True),
            self.text(raw.get("mountPath"), f"{where}.mountPath", required=True),
            self.text(raw.get("subPath"), f"{where}.subPath"),
            self.flag(raw.get("readOnly"), f"{where}.readOnly"),
        )

    def pull_secrets(self, raw: object, where: str) -> tuple[str, ...]:
        """The names of a pod spec's ``imagePullSecrets`` (LocalObjectReferences)."""
        return tuple(
            self.text(self.mapping(item, f"{where}[{i}]").get("name"), f"{where}[{i}].name", required=True)
            for i, item in enumerate(self.items(raw, where))
        )

    def volumes(self, raw: object, where: str) -> tuple[Volume, ...]:
        volumes = []
        for i, item in enumerate(self.items(raw, where)):
            at = f"{where}[{i}]"
            item = self.mapping(item, at)
            name = self.text(item.get("name"), f"{at}.name", required=True)
            kinds = [k for k in item if k != "name"]
            if len(kinds) != 1:
                self.fail(at, f"volume {name!r} needs exactly one source")
            kind = kinds[0]
            at = f"{at}.{kind}"
            spec = self.mapping(item[kind], at)
            if kind == "secret":
                self.fields(spec, at, ("secretName", "items", "optional"), ("defaultMode",))
                secret = self.text(spec.get("secretName"), f"{at}.secretName", required=True)
                items = self.key_items(spec.get("items"), f"{at}.items")
                volumes.append(Volume(name, "secret", secret, items, self.flag(spec.get("optional"), at)))
            elif kind == "configMap":
                self.fields(spec, at, ("name", "items", "optional"), ("defaultMode",))
                config_map = self.text(spec.get("name"), f"{at}.name", required=True)
                items = self.key_items(spec.get("items"), f"{at}.items")
                volumes.append(Volume(name, "configMap", config_map, items, self.flag(spec.get("optional"), at)))
            elif kind == "persistentVolumeClaim":
                self.fields(spec, at, ("claimName", "readOnly"))
                volumes.append(Volume(name, "persistentVolumeClaim",
                                      self.text(spec.get("claimName"), f"{at}.claimName", required=True),
                                      read_only=self.flag(spec.get("readOnly"), at)))
            elif kind == "emptyDir":
                self.fields(spec, at, (), ("medium", "sizeLimit"))
                volumes.append(Volume(name, "emptyDir"))
            else:
                self.fail(at, f"a {kind[:40]} volume cannot be provided on this machine "
                              "(secret, configMap, persistentVolumeClaim and emptyDir volumes can)")
        if len({v.name for v in volumes}) != len(volumes):
            self.fail(where, "a volume named twice")
        return tuple(volumes)

    def key_items(self, raw: object, where: str) -> tuple[tuple[str, str], ...]:
        pairs = []
        for i, item in enumerate(self.items(raw, where)):
            item = self.mapping(item, f"{where}[{i}]")
            self.fields(item, f"{where}[{i}]", ("key", "path"), ("mode",))
            pairs.append((self.text(item.get("key"), f"{where}[{i}].key", required=True),
                          self.text(item.get("path"), f"{where}[{i}].path", required=True)))
        return tuple(pairs)

    def script(self, raw: object, where: str) -> Script:
        raw = self.mapping(raw, where)
        source = self.text(raw.get("source"), f"{where}.source", required=True)
        return Script(self.container(raw, where, ("source",)), source)

    def sidecar(self, raw: object, where: str) -> Sidecar:
        raw = self.mapping(raw, where)
        name = self.text(raw.get("name"), f"{where}.name", required=True)
        container = self.container({k: v for k, v in raw.items() if k not in ("name", "mirrorVolumeMounts")}, where)
        if not container.command and not container.args:
            self.fail(where, f"sidecar {name!r} has no command: an image's entrypoint cannot be run on the host")
        return Sidecar(name, container, self.flag(raw.get("mirrorVolumeMounts"), f"{where}.mirrorVolumeMounts"))

    def pod_spec_patch(self, raw: object, where: str) -> dict[str, Any] | None:
        """kfp's run-time resources (``set_memory_limit(param)``): only the main container's resources are patched."""
        if raw is None:
            return None
        text = self.text(raw, where)
        documents = [d for d in load_yaml_documents(text, f"{self.source}: {where}") if d is not None]
        patch = self.mapping(documents[0] if len(documents) == 1 else None, where)
        self.fields(patch, where, ("containers",))
        for i, item in enumerate(self.items(patch.get("containers"), f"{where}.containers")):
            item = self.mapping(item, f"{where}.containers[{i}]")
            self.fields(item, f"{where}.containers[{i}]", ("name", "resources"))
            if item.get("name") != "main":
                self.fail(f"{where}.containers[{i}]", "only the main container's resources can be patched")
            resources = self.mapping(item.get("resources"), f"{where}.containers[{i}].resources")
            self.fields(resources, f"{where}.containers[{i}].resources", ("requests", "limits"))
            for part in ("requests", "limits"):
                self.quantities(resources.get(part), f"{where}.containers[{i}].resources.{part}")
        return patch

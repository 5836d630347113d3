"""The kfp-kubernetes platform spec, emulated on one machine.

A task's ``KubernetesExecutorConfig`` (the second YAML document of a compiled pipeline)
asks for what a pod would get on a cluster: secrets and config maps as environment
variables or files, PVCs and emptyDirs at mount paths, downward-API fields, pod labels,
a deadline. ``prepare_platform`` turns it into what a local process gets: environment
variables, bind mounts for the task's private mount namespace, a timeout, and one note
for each setting that means nothing on one machine (node selectors, tolerations, …).
``builtin_task`` runs kfp-kubernetes' CreatePVC / DeletePVC components, which have no
command of their own, as local volume folders.

Secret values only ever go into ``TaskPlatform.env`` and 0600 files; no message here
contains one.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from millpond.datasets.config import load_config
from millpond.datasets.shared_mounts import release, use
from millpond.errors import MillpondError, UserError
from millpond.pipelines.builtin_images import CREATE_PVC_IMAGE, DELETE_PVC_IMAGE, SNAPSHOT_IMAGE
from millpond.runners.base import Bind, DatasetBind
from millpond.settings import load_settings
from millpond.store import volume_folders
from millpond.store.paths import UnsafePath, contained_path
from millpond.store.resources import read_manifest
from millpond.store.secrets import ConfigStore, MissingConfig

LOCAL_IP = "127.0.0.1"

_FIELD = {"secret": "secret", "configmap": "configMap"}  # as the spec's field names spell them

_LABEL_FIELD = re.compile(r"""metadata\.(labels|annotations)\[\s*['"]([^'"]+)['"]\s*\]""")

_IGNORED = {
    "nodeSelector": "nodeSelector is ignored: every task runs on this machine",
    "tolerations": "tolerations are ignored: every task runs on this machine",
    "nodeAffinity": "nodeAffinity is ignored: every task runs on this machine",
    "podAffinity": "podAffinity is ignored: every task runs on this machine",
    "securityContext": "securityContext is ignored: the task runs as millpond's own user",
    "enabledSharedMemory": "enabledSharedMemory: on this machine the task uses its /dev/shm (in its image, a "
                           "/dev/shm of that size)",
}


class PlatformError(MillpondError):
    """The task's kubernetes config cannot be honoured here; the task fails with this one line."""


@dataclass(frozen=True)
class PodInfo:
    """What the downward API (fieldPathAsEnv) tells a task about the pod it would run in."""

    name: str
    namespace: str = "default"
    node: str = field(default_factory=socket.gethostname)
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))


@dataclass
class TaskPlatform:
    """What a task gets from its kubernetes config: feed env/binds/timeout_s to the launcher.

    ``env`` may hold secret values: it is left out of repr, and must never be logged or stored.
    Call ``cleanup()`` when the task has ended: it removes the folders made for it and gives
    back the task's hold on each dataset mount (the mount ends with its last user).
    """

    env: dict[str, str] = field(default_factory=dict, repr=False)
    binds: list[Bind] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    timeout_s: float | None = None
    scratch: list[Path] = field(default_factory=list)
    releases: list[Callable[[], object]] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)  # the datasets it mounts (their PVCs), for placement
    # cluster mode: the datasets it mounts, for the node to mount (``remote``; else they are ``binds``)
    dataset_binds: list[DatasetBind] = field(default_factory=list)

    def cleanup(self) -> None:
        for folder in self.scratch:
            shutil.rmtree(folder, ignore_errors=True)
        self.scratch.clear()
        while self.releases:
            self.releases.pop()()


Resolve = Callable[[dict[str, Any]], Any]
Render = Callable[[str], str]


def _as_is(text: str) -> str:
    return text


def prepare_platform(
    config: dict[str, Any],
    *,
    resolve: Resolve,
    configs: ConfigStore,
    volumes_dir: Path,
    scratch_dir: Path,
    pod: PodInfo,
    remote: bool = False,
    volumes_shared: bool = False,
    render: Render = _as_is,
) -> TaskPlatform:
    """Turn one executor's KubernetesExecutorConfig into env, binds, metadata, timeout and notes.

    ``resolve(binding)`` gives the value of an IR parameter binding in the task's scope (None
    when its source has no value). Folders for volumes are made under ``scratch_dir``.
    ``remote``: the task runs on a Ray node, which mounts its datasets itself (``dataset_binds``);
    a PVC that is a folder of ``volumes_dir`` is refused there unless ``volumes_shared`` (the
    folder is every node's: MILLPOND_SHARED_ROOTS). ``render`` fills the launcher's placeholders
    a ``subPath`` may hold (kfp 1.x's ``{{workflow.uid}}_{{pod.name}}``, a task input) as the task starts.
    """
    platform = TaskPlatform()
    try:
        _Builder(
            config or {}, resolve, configs, Path(volumes_dir), Path(scratch_dir), pod, platform, remote, volumes_shared,
            render,
        ).build()
    except BaseException:
        platform.cleanup()
        raise
    return platform


@dataclass
class _Builder:
    config: dict[str, Any]
    resolve: Resolve
    configs: ConfigStore
    volumes_dir: Path
    scratch_dir: Path
    pod: PodInfo
    out: TaskPlatform
    remote: bool = False
    volumes_shared: bool = False
    render: Render = _as_is

    def build(self) -> None:
        metadata = self.config.get("podMetadata") or {}
        self.out.labels.update({str(k): str(v) for k, v in (metadata.get("labels") or {}).items()})
        self.out.annotations.update({str(k): str(v) for k, v in (metadata.get("annotations") or {}).items()})
        deadline = self.config.get("activeDeadlineSeconds")
        if deadline is not None and int(deadline) > 0:
            self.out.timeout_s = float(int(deadline))
        for key, note in _IGNORED.items():
            if self.config.get(key):
                self.out.notes.append(note)
        for entry in self.config.get("secretAsEnv") or []:
            self._as_env("secret", entry, "secretName", "secretNameParameter", "secretKey")
        for entry in self.config.get("configMapAsEnv") or []:
            self._as_env("configmap", entry, "configMapName", "configMapNameParameter", "configMapKey")
        for entry in self.config.get("secretAsVolume") or []:
            self._as_volume("secret", entry, "secretName", "secretNameParameter")
        for entry in self.config.get("configMapAsVolume") or []:
            self._as_volume("configmap", entry, "configMapName", "configMapNameParameter")
        for entry in self.config.get("pvcMount") or []:
            self._pvc(entry)
        for entry in self.config.get("emptyDirMounts") or []:
            self._empty_dir(entry)
        for entry in self.config.get("genericEphemeralVolume") or []:
            self._ephemeral(entry)
        for entry in self.config.get("fieldPathAsEnv") or []:
            self.out.env[str(entry["name"])] = self._field_path(str(entry.get("fieldPath", "")))

    # --- names from constants or parameters ----------------------------------------------
    def _value(self, binding: dict[str, Any], where: str) -> Any:
        try:
            return self.resolve(binding)
        except LookupError:
            return None  # the binding's source has no value (an optional input left out)
        except PlatformError:
            raise
        except Exception as exc:  # the engine's own error for a binding it cannot read
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise PlatformError(f"{where}: {reason}") from None

    def _name(self, entry: dict[str, Any], constant_key: str, parameter_key: str, where: str) -> str | None:
        """The object's name: its parameter binding when there is one, else the constant."""
        if entry.get(parameter_key):
            value = self._value(entry[parameter_key], where)
        else:
            value = entry.get(constant_key)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise PlatformError(f"{where}: the name must be a string, got {type(value).__name__}")
        return value

    def _lookup(
        self, kind: str, entry: dict[str, Any], constant_key: str, parameter_key: str, where: str
    ) -> tuple[str, dict[str, str]] | None:
        """The object's name and data; None when it is optional and absent."""
        optional = bool(entry.get("optional", False))
        name = self._name(entry, constant_key, parameter_key, where)
        if name is None:
            if optional:
                return None
            raise PlatformError(f"{where}: the {kind} name has no value")
        try:
            return name, self.configs.get(kind, name)
        except MissingConfig as missing:
            if optional:
                return None
            where_to = "" if missing.namespace == "default" else f" -n {missing.namespace}"
            raise PlatformError(
                f"{missing} (create it with: millpond {kind} create {name}{where_to} --from-literal KEY=VALUE)"
            ) from None
        except UserError as exc:
            raise PlatformError(f"{where}: {exc}") from None

    # --- environment --------------------------------------------------------------------
    def _as_env(self, kind: str, entry: dict[str, Any], constant_key: str, parameter_key: str, key_field: str) -> None:
        found = self._lookup(kind, entry, constant_key, parameter_key, f"{_FIELD[kind]}AsEnv")
        if found is None:
            return
        name, data = found
        for mapping in entry.get("keyToEnv") or []:
            key, variable = str(mapping.get(key_field, "")), str(mapping.get("envVar", ""))
            if not variable or "=" in variable or "\0" in variable:
                raise PlatformError(f"{_FIELD[kind]}AsEnv: invalid environment variable name {variable!r}")
            if key in data:
                self.out.env[variable] = data[key]
            elif not entry.get("optional", False):
                keys = ", ".join(sorted(data)) or "none"
                raise PlatformError(
                    f"{kind} {name!r} has no key {key!r} (its keys: {keys}; "
                    f"recreate it with: millpond {kind} create {name} --replace --from-literal {key}=VALUE …)"
                )

    def _field_path(self, path: str) -> str:
        simple = {
            "metadata.name": self.pod.name,
            "metadata.namespace": self.pod.namespace,
            "metadata.uid": self.pod.uid,
            "spec.nodeName": self.pod.node,
            "spec.serviceAccountName": "default",
            "status.podIP": LOCAL_IP,
            "status.podIPs": LOCAL_IP,
            "status.hostIP": LOCAL_IP,
            "status.hostIPs": LOCAL_IP,
        }
        if path in simple:
            return simple[path]
        match = _LABEL_FIELD.fullmatch(path.strip())
        if match:
            source = self.out.labels if match.group(1) == "labels" else self.out.annotations
            return source.get(match.group(2), "")  # Kubernetes gives "" for a missing key
        raise PlatformError(f"fieldPathAsEnv: field path {path!r} is not supported (supported: {', '.join(simple)}, "
                            "metadata.labels['KEY'], metadata.annotations['KEY'])")

    # --- volumes ------------------------------------------------------------------------
    def _as_volume(self, kind: str, entry: dict[str, Any], constant_key: str, parameter_key: str) -> None:
        target = self._mount_path(entry, f"{_FIELD[kind]}AsVolume")
        found = self._lookup(kind, entry, constant_key, parameter_key, f"{_FIELD[kind]}AsVolume")
        if found is None:
            return
        _, data = found
        folder = self._fresh(kind)
        file_mode = 0o600 if kind == "secret" else 0o644
        for key, value in data.items():
            path = _inside(folder, key, f"{kind} key")
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, file_mode)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(value)
        if kind != "secret":
            folder.chmod(0o755)
        self._bind(folder, target, read_only=True)

    def _pvc(self, entry: dict[str, Any]) -> None:
        target = self._mount_path(entry, "pvcMount")
        if entry.get("pvcNameParameter"):
            value = self._value(entry["pvcNameParameter"], "pvcMount")
        elif "constant" in entry:
            value = entry["constant"]
        elif "componentInputParameter" in entry:
            value = self._value({"componentInputParameter": entry["componentInputParameter"]}, "pvcMount")
        elif "taskOutputParameter" in entry:
            value = self._value({"taskOutputParameter": entry["taskOutputParameter"]}, "pvcMount")
        else:
            raise PlatformError(f"pvcMount at {target}: no PVC name")
        if value is None or value == "":
            raise PlatformError(f"pvcMount at {target}: the PVC name has no value")
        if not isinstance(value, str):
            raise PlatformError(f"pvcMount at {target}: the PVC name must be a string, got {type(value).__name__}")
        entry = {**entry, "subPath": self._sub_path(entry, target)}
        if self.remote:  # a Ray node mounts it through its own cache (datasets.node_mounts)
            found = _dataset_on_node(value, target, entry, self.pod.namespace)
            if found is not None:
                self._claim(target)
                self.out.dataset_binds.append(found)
                self.out.datasets.append(value)
                return
        dataset = None if self.remote else _dataset_mount(value, f"task {self.pod.name}", self.pod.namespace)
        if dataset is not None:  # Fluid makes a PVC named after each dataset: the task sees the dataset
            folder, read_only, release = dataset
            self.out.releases.append(release)
            self.out.datasets.append(value)
            sub_path = str(entry.get("subPath") or "").strip("/")
            if ".." in PurePosixPath(sub_path).parts:
                raise PlatformError(f"pvcMount at {target}: subPath {sub_path!r} must be a relative path without '..'")
            self._bind(_inside(folder, sub_path, "subPath") if sub_path else folder, target, read_only=read_only)
            return
        volume = _volume_folder(self.volumes_dir, value, self.pod.namespace, mounting=True)
        if self.remote and not self.volumes_shared:
            raise PlatformError(volume_not_shared(target, f"volume {value!r}", self.volumes_dir))
        if not volume.is_dir() and self.pod.namespace != "default":  # with the kubelet's words, in its namespace
            raise PlatformError(f'volume {value!r} not found (persistentvolumeclaim "{value}" not found in '
                                f'namespace "{self.pod.namespace}")')
        if not volume.is_dir():
            raise PlatformError(
                f"volume {value!r} not found "
                f"(a kubernetes.CreatePVC task makes it, or create it with: mkdir -p {volume})"
            )
        source = volume
        sub_path = str(entry.get("subPath") or "")
        if sub_path:
            relative = PurePosixPath(sub_path)
            if relative.is_absolute() or ".." in relative.parts:
                raise PlatformError(f"pvcMount at {target}: subPath {sub_path!r} must be a relative path without '..'")
            source = _inside(volume, str(relative), "subPath")
            source.mkdir(parents=True, exist_ok=True)  # Kubernetes creates a missing subPath too
        self._bind(source, target, read_only=False)

    def _sub_path(self, entry: dict[str, Any], target: str) -> str:
        """The mount's subPath with its placeholders filled; any task-made text is checked by the caller."""
        raw = str(entry.get("subPath") or "")
        if "{{" not in raw:
            return raw
        try:
            return self.render(raw)
        except MillpondError as exc:
            raise PlatformError(f"pvcMount at {target}: subPath {raw[:60]!r}: {exc}") from None

    def _empty_dir(self, entry: dict[str, Any]) -> None:
        target = self._mount_path(entry, "emptyDirMounts")
        name = str(entry.get("volumeName") or "empty-dir")
        in_memory = str(entry.get("medium") or "") == "Memory"
        shm = Path("/dev/shm")
        if in_memory and shm.is_dir() and os.access(shm, os.W_OK):
            folder = Path(tempfile.mkdtemp(prefix="millpond-emptydir-", dir=shm))
            self.out.scratch.append(folder)
        else:
            folder = self._fresh("emptydir")
        if entry.get("sizeLimit"):
            self.out.notes.append(f"emptyDir {name!r}: sizeLimit {entry['sizeLimit']} is not enforced")
        self._bind(folder, target, read_only=False)

    def _ephemeral(self, entry: dict[str, Any]) -> None:
        target = self._mount_path(entry, "genericEphemeralVolume")
        name = str(entry.get("volumeName") or "ephemeral")
        self.out.notes.append(
            f"ephemeral volume {name!r} is a fresh local folder (size and storage class do not apply)"
        )
        self._bind(self._fresh("ephemeral"), target, read_only=False)

    def _mount_path(self, entry: dict[str, Any], where: str) -> str:
        raw = str(entry.get("mountPath") or "")
        path = PurePosixPath(raw)
        if not path.is_absolute() or ".." in path.parts or str(path) == "/":
            raise PlatformError(f"{where}: mountPath {raw!r} must be an absolute path other than '/' without '..'")
        return os.path.normpath(raw)

    def _claim(self, target: str) -> None:
        taken = [bind.target for bind in self.out.binds] + [data.target for data in self.out.dataset_binds]
        if target in taken:
            raise PlatformError(f"two volumes mount at {target}")

    def _bind(self, source: Path, target: str, read_only: bool) -> None:
        self._claim(target)
        self.out.binds.append(Bind(source=source, target=target, read_only=read_only))

    def _fresh(self, what: str) -> Path:
        """A new private folder for one volume of this task."""
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"{what}-", dir=self.scratch_dir))  # mode 0700
        self.out.scratch.append(folder)
        return folder


# --- CreatePVC / DeletePVC ------------------------------------------------------------------


def volume_not_shared(target: str, volume: str, volumes_dir: Path) -> str:
    """Why a task on a Ray node cannot mount ``volume`` (a PVC: a folder of the engine's machine)."""
    return (
        f"pvcMount at {target}: {volume} is a folder of this machine ({volumes_dir}) that the Ray nodes "
        f"do not reach: mount a dataset instead, or declare {volumes_dir} shared (the same folder on every node) "
        "with MILLPOND_SHARED_ROOTS"
    )


def _volume_folder(volumes_dir: Path, name: str, namespace: str, mounting: bool = False) -> Path:
    """The folder of the PVC ``name`` of ``namespace`` (``store.volume_folders``); ``mounting``: the one a pod
    of ``namespace`` mounts (single-user mode: ``default``'s when its namespace has none)."""
    try:
        if mounting:
            return volume_folders.find(volumes_dir, namespace, name)
        return volume_folders.folder(volumes_dir, namespace, name)
    except (UserError, UnsafePath) as exc:
        raise PlatformError(str(exc)) from None


def _inside(root: Path, relative: str, what: str) -> Path:
    """``root/relative``, or the task fails: a name from the pipeline never leads out of its folder."""
    try:
        return contained_path(root, relative, what=what)
    except UnsafePath as exc:
        raise PlatformError(str(exc)) from None


def _dns_prefix(text: str) -> str:
    """A run name made fit to start a Kubernetes object name."""
    cleaned = re.sub(r"[^a-z0-9.-]+", "-", text.lower()).strip("-.")
    return cleaned[:200] or "run"


def _size_of(folder: Path) -> str:
    """The data a snapshot holds as a Kubernetes quantity, rounded up to whole Mi (at least 1Mi): what a
    claim restoring it must hold (on a cluster, restoreSize is the source claim's capacity)."""
    total = sum(p.lstat().st_size for p in folder.rglob("*") if not p.is_dir() or p.is_symlink())
    return f"{max(1, -(-total // 2**20))}Mi"


def _without_tag(image: str) -> str:
    return re.sub(r"(@.*|:[^/]*)$", "", image.strip())


def is_create_pvc(image: str) -> bool:
    """Whether ``image`` is kfp-kubernetes' CreatePVC stub (any tag or digest)."""
    return _without_tag(image) == CREATE_PVC_IMAGE


def builtin_task(
    image: str, parameters: Mapping[str, object], volumes_dir: Path, run_name: str, namespace: str = "default",
) -> dict[str, str] | None:
    """Run a kfp-kubernetes CreatePVC/DeletePVC task here; its output parameters, or None for any other image.

    A PVC is a folder ``volumes_dir/NAMESPACE/NAME`` (the run's pods' namespace) that outlives the run until a
    DeletePVC (or the user) removes it. CreatePVC names it ``pvc_name``, or ``RUN_NAME-SUFFIX`` for
    ``pvc_name_suffix``, or a fresh UUID when neither is given — as the KFP driver does.
    """
    base = _without_tag(image)
    if base == CREATE_PVC_IMAGE:
        name = str(parameters.get("pvc_name") or "")
        suffix = str(parameters.get("pvc_name_suffix") or "")
        if name and suffix:
            raise PlatformError("CreatePVC: give pvc_name or pvc_name_suffix, not both")
        if suffix:
            name = f"{_dns_prefix(run_name)}-{suffix.lstrip('-')}"
        elif not name:
            name = str(uuid.uuid4())
        folder = _volume_folder(volumes_dir, name, namespace)
        folder.mkdir(parents=True, exist_ok=True)
        return {"name": name}
    if base == SNAPSHOT_IMAGE:
        name, source = str(parameters.get("snapshot_name") or ""), str(parameters.get("source_volume") or "")
        origin = _volume_folder(volumes_dir, source, namespace, mounting=True)
        copy = _volume_folder(volumes_dir, name, namespace)
        if not origin.is_dir():
            raise PlatformError(f"VolumeSnapshot {name!r}: volume {source!r} not found")
        if copy.exists():
            raise PlatformError(f"VolumeSnapshot {name!r}: a volume of that name already exists")
        shutil.copytree(origin, copy, symlinks=True)
        return {"name": name, "size": _size_of(copy)}
    if base == DELETE_PVC_IMAGE:
        name = str(parameters.get("pvc_name") or "")
        if not name:
            raise PlatformError("DeletePVC: pvc_name has no value")
        folder = _volume_folder(volumes_dir, name, namespace, mounting=True)
        if folder.is_symlink():
            folder.unlink()  # a volume the user linked in by hand: keep what it points to
        elif folder.is_dir():
            shutil.rmtree(folder)
        else:
            raise PlatformError(f"DeletePVC: volume {name!r} not found")
        return {}
    return None


# Where the spec names secrets and config maps, and the keys of their constant and parameter names.
_REFERENCES = (
    ("secret", "secretAsEnv", "secretName", "secretNameParameter"),
    ("secret", "secretAsVolume", "secretName", "secretNameParameter"),
    ("configmap", "configMapAsEnv", "configMapName", "configMapNameParameter"),
    ("configmap", "configMapAsVolume", "configMapName", "configMapNameParameter"),
)


def missing_configs(platform_spec: dict[str, Any] | None, configs: ConfigStore) -> list[tuple[str, str, str]]:
    """Required secrets and config maps named by a constant that do not exist: known before any task runs."""
    kubernetes = (platform_spec or {}).get("platforms", {}).get("kubernetes", {})
    executors = kubernetes.get("deploymentSpec", {}).get("executors", {})
    missing: list[tuple[str, str, str]] = []  # (kind, name, the task that uses it)
    for label, config in executors.items():
        for kind, field_name, constant_key, parameter_key in _REFERENCES:
            for entry in config.get(field_name) or []:
                if entry.get("optional"):
                    continue
                binding = entry.get(parameter_key) or {}
                name = binding.get("runtimeValue", {}).get("constant") if binding else entry.get(constant_key)
                if not isinstance(name, str) or not name or "{{" in name:
                    continue  # decided at run time
                try:
                    configs.get(kind, name)
                except MissingConfig:
                    problem = (kind, name, label.removeprefix("exec-"))
                    if problem not in missing:
                        missing.append(problem)
                except UserError:
                    continue
    return missing


def _dataset_read_only(name: str, namespace: str = "default") -> bool | None:
    """Whether the dataset ``name`` is read-only (its access modes); None if there is no such dataset.

    ``namespace``: the pod's (``default``; the run's own in multi-user mode, where a task mounts only its
    namespace's datasets)."""
    if read_manifest(load_settings(), "Dataset", name, namespace) is None:
        return None
    try:
        return load_config(name, namespace).read_only
    except UserError as exc:
        raise PlatformError(f"dataset {name}: {exc}") from None


def _dataset_on_node(name: str, target: str, entry: dict[str, Any], namespace: str = "default") -> DatasetBind | None:
    """The dataset ``name`` as a node mounts it at ``target`` (None if there is no such dataset)."""
    read_only = _dataset_read_only(name, namespace)
    if read_only is None:
        return None
    sub_path = str(entry.get("subPath") or "").strip("/")
    if ".." in PurePosixPath(sub_path).parts:
        raise PlatformError(f"pvcMount at {target}: subPath {sub_path!r} must be a relative path without '..'")
    return DatasetBind(name, namespace, target, read_only, sub_path)


def _dataset_mount(name: str, user: str, namespace: str = "default") -> tuple[Path, bool, Callable[[], object]] | None:
    """The shared FUSE mount of the dataset ``name``, whether it is read-only, and how ``user`` lets go of it.

    None if there is no such dataset.
    """
    read_only = _dataset_read_only(name, namespace)
    if read_only is None:
        return None
    try:
        shared = use(name, namespace, user)
    except UserError as exc:
        raise PlatformError(f"dataset {name}: {exc}") from None
    return shared.folder, read_only, lambda: release(shared)

"""What a Notebook's pod template mounts, and the environment it takes from Secrets and ConfigMaps.

Read at apply (``read_mounts``: the shape of ``volumes``, ``volumeMounts``, ``env[].valueFrom`` and
``envFrom``, refused in one line as the API server validates a pod) and resolved each time the server
starts (``Resolver``), as the kubelet does, with the readers every other family uses:

- a ``persistentVolumeClaim`` naming a Fluid Dataset of the notebook's namespace is the dataset's shared
  FUSE mount (``datasets.shared_mounts``, as a pipeline task's ``pvcMount``), read-write when the
  dataset's access modes allow it, read-only otherwise; any other claim is the PVC's folder
  (``store.volume_folders.find``: ``volumes/NAMESPACE/CLAIM``), kept across restarts and deletes of
  the Notebook as Kubernetes keeps a PVC. A claim that does not exist leaves the server unscheduled
  with the scheduler's words (``persistentvolumeclaim "x" not found``);
- a ``secret`` or ``configMap`` volume is a folder of files, one per key (or per ``items`` entry),
  written afresh at each start into the notebook's own folder (0700; a Secret's files 0600), shown
  read-only; one missing (not ``optional``) keeps the container ``ContainerCreating`` with the kubelet's
  FailedMount line;
- ``env[].valueFrom`` (``secretKeyRef``, ``configMapKeyRef``, ``fieldRef`` of the pod's name and
  namespace) and ``envFrom`` become the server's (and its kernels') environment; one missing is
  ``CreateContainerConfigError`` with the kubelet's words;
- an ``emptyDir`` is a fresh folder of the notebook's own, emptied at each start; one of ``medium: Memory``
  mounted at ``/dev/shm`` (what notebook images ask for shared memory) is the machine's ``/dev/shm``,
  which the server already sees (simplified: another of that medium is a folder on disk).

Every name is looked up in the notebook's own namespace (``ConfigStore.in_namespace``,
``volume_folders.find``): in multi-user mode another namespace's objects are never found.

A process on the host cannot see ``/home/jovyan``: the mounts are bind mounts of a private mount
namespace (``runners.sandbox.wrap``, bubblewrap), as a host-run pipeline task's volumes are, so the
server and every kernel see each volume at its ``mountPath``. Simplified: ``subPath`` and the other
volume kinds are refused at apply; values are read when the server starts (a Secret changed later is
seen at the next start, not within a minute as the kubelet's sync does).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from millpond.datasets.config import load_config
from millpond.datasets.shared_mounts import SharedMount, release, use
from millpond.errors import MillpondError, UserError
from millpond.names import check_object_name
from millpond.runners.base import Bind
from millpond.settings import Settings
from millpond.store import volume_folders
from millpond.store.paths import UnsafePath, contained_path
from millpond.store.resources import read_manifest
from millpond.store.secrets import ConfigStore, MissingConfig, check_key

HOME = "/home/jovyan"  # the Kubeflow images' home ($NB_USER's), where the Jupyter web app mounts the workspace
VOLUME_KINDS = ("persistentVolumeClaim", "secret", "configMap", "emptyDir")
FIELD_REFS = ("metadata.name", "metadata.namespace")
SHM = "/dev/shm"


class MountWaiting(MillpondError):
    """The server cannot start yet: ``unscheduled`` (a missing claim: the scheduler's PodScheduled False),
    else the container waits with ``reason`` (ContainerCreating, CreateContainerConfigError)."""

    def __init__(self, reason: str, message: str, unscheduled: bool = False) -> None:
        super().__init__(message)
        self.reason, self.message, self.unscheduled = reason, message, unscheduled


@dataclass(frozen=True)
class Mount:
    """One ``volumeMounts`` entry with its volume: ``kind`` is one of ``VOLUME_KINDS``, ``source`` the
    claim's, Secret's or ConfigMap's name, ``items`` (key, path) pairs of a Secret/ConfigMap volume."""

    volume: str
    kind: str
    source: str
    target: str
    read_only: bool
    optional: bool = False
    items: tuple[tuple[str, str], ...] = ()
    memory: bool = False  # an emptyDir of medium Memory


@dataclass(frozen=True)
class EnvSource:
    """A variable from a Secret, ConfigMap or the pod (``env[].valueFrom``), or every key of one (``envFrom``:
    ``variable`` empty, ``prefix`` the prefix)."""

    variable: str
    kind: str  # secret, configmap, field
    name: str  # the object's name, or the field path
    key: str = ""
    optional: bool = False
    prefix: str = ""


@dataclass(frozen=True)
class MountPlan:
    """What the pod template mounts and takes from Secrets/ConfigMaps, checked at apply."""

    mounts: tuple[Mount, ...] = ()
    env: tuple[EnvSource, ...] = ()
    working_dir: str = ""

    @property
    def home(self) -> str:
        """The working folder: the container's ``workingDir``, else the Kubeflow images' home."""
        return self.working_dir or HOME

    def home_mount(self) -> Mount | None:
        """The volume the working folder is on (mounted at it or above it): the notebook's workspace."""
        home = PurePosixPath(self.home)
        found = [m for m in self.mounts if PurePosixPath(m.target) == home or PurePosixPath(m.target) in home.parents]
        return max(found, key=lambda m: len(PurePosixPath(m.target).parts)) if found else None


@dataclass
class Resolved:
    """The binds and environment of one start; ``cleanup`` gives back the dataset mounts it holds.

    ``env`` may hold Secret values: left out of repr, never logged or stored."""

    binds: list[Bind] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict, repr=False)
    workspace: Path | None = None  # the host folder shown at the working folder (None: no volume there)
    releases: list[Callable[[], object]] = field(default_factory=list)

    def cleanup(self) -> None:
        while self.releases:
            self.releases.pop()()


def _path(where: list[str | int]) -> str:
    return ".".join(str(part) if isinstance(part, str) else f"[{part}]" for part in where).replace(".[", "[")


def _volume(volume: dict[str, Any], where: list[str | int]) -> tuple[str, str, bool, bool, tuple[tuple[str, str], ...]]:
    """(kind, source, read-only, optional, items) of one pod volume; another kind is refused."""
    kind = next((key for key in VOLUME_KINDS if key in volume), None)
    if kind is None:
        other = next((key for key in volume if key != "name"), "?")
        raise UserError(f"{_path([*where, other])}: a {other} volume cannot exist here (millpond mounts "
                        "persistentVolumeClaim, secret, configMap and emptyDir volumes)")
    body = volume.get(kind) or {}
    if kind == "emptyDir":
        return kind, "", False, False, ()
    name_key = {"persistentVolumeClaim": "claimName", "secret": "secretName", "configMap": "name"}[kind]
    source = str(body.get(name_key) or "")
    check_object_name(source, _path([*where, kind, name_key]))
    items = []
    for index, item in enumerate(body.get("items") or ()):
        key, path = str(item.get("key") or ""), str(item.get("path") or "")
        relative = PurePosixPath(path)
        if not key or not path or relative.is_absolute() or ".." in relative.parts:
            raise UserError(f"{_path([*where, kind, 'items', index])}: a key and a relative path without '..'")
        items.append((key, path))
    read_only = kind != "persistentVolumeClaim" or bool(body.get("readOnly"))
    return kind, source, read_only, bool(body.get("optional")), tuple(items)


def read_mounts(pod: dict[str, Any], container: dict[str, Any], where: list[str | int]) -> MountPlan:
    """The notebook container's mounts and Secret/ConfigMap environment (``where``: the container's path)."""
    pod_where = where[:-2]
    volumes: dict[str, tuple[str, str, bool, bool, tuple[tuple[str, str], ...]]] = {}
    volume_bodies: dict[str, dict[str, Any]] = {}
    for index, volume in enumerate(pod.get("volumes") or ()):
        volumes[str(volume.get("name"))] = _volume(volume, [*pod_where, "volumes", index])
        volume_bodies[str(volume.get("name"))] = volume
    mounts: list[Mount] = []
    for index, mount in enumerate(container.get("volumeMounts") or ()):
        here = [*where, "volumeMounts", index]
        raw = str(mount.get("mountPath") or "")
        target = PurePosixPath(raw)
        if not target.is_absolute() or str(target) == "/" or ".." in target.parts or \
                any(PurePosixPath(m.target) == target for m in mounts):
            raise UserError(f"{_path([*here, 'mountPath'])}: {raw!r} must be an absolute path other than /, "
                            "without '..', mounted once")
        if mount.get("subPath") or mount.get("subPathExpr"):
            raise UserError(f"{_path([*here, 'subPath'])}: a volume's sub-path cannot be mounted here")
        found = volumes.get(str(mount.get("name")))
        if found is None:
            raise UserError(f"{_path([*here, 'name'])}: Not found: {mount.get('name')!r} (no such volume in the "
                            "pod's volumes)")
        kind, source, read_only, optional, items = found
        body = volume_bodies[str(mount["name"])].get("emptyDir") or {}
        memory = kind == "emptyDir" and body.get("medium") == "Memory"
        mounts.append(Mount(str(mount["name"]), kind, source, os.path.normpath(raw),
                            read_only or bool(mount.get("readOnly")), optional, items, memory))
    return MountPlan(tuple(mounts), _env_sources(container, where), str(container.get("workingDir") or ""))


def _env_sources(container: dict[str, Any], where: list[str | int]) -> tuple[EnvSource, ...]:
    found: list[EnvSource] = []
    for index, item in enumerate(container.get("env") or ()):
        source = item.get("valueFrom")
        if source is None:
            continue
        here = _path([*where, "env", index, "valueFrom"])
        for field_name, kind in (("secretKeyRef", "secret"), ("configMapKeyRef", "configmap")):
            ref = source.get(field_name)
            if ref is not None:
                check_object_name(str(ref.get("name") or ""), f"{here}.{field_name}.name")
                found.append(EnvSource(str(item["name"]), kind, str(ref["name"]), str(ref.get("key") or ""),
                                       bool(ref.get("optional"))))
                break
        else:
            path = str((source.get("fieldRef") or {}).get("fieldPath") or "")
            if path not in FIELD_REFS:
                raise UserError(f"{here}: only secretKeyRef, configMapKeyRef and fieldRef of "
                                f"{', '.join(FIELD_REFS)} can be resolved here")
            found.append(EnvSource(str(item["name"]), "field", path))
    for index, item in enumerate(container.get("envFrom") or ()):
        here = _path([*where, "envFrom", index])
        for field_name, kind in (("secretRef", "secret"), ("configMapRef", "configmap")):
            ref = item.get(field_name)
            if ref is not None:
                check_object_name(str(ref.get("name") or ""), f"{here}.{field_name}.name")
                found.append(EnvSource("", kind, str(ref["name"]), optional=bool(ref.get("optional")),
                                       prefix=str(item.get("prefix") or "")))
                break
        else:
            raise UserError(f"{here}: a secretRef or a configMapRef is required")
    return tuple(found)


_SHOWN_KIND = {"secret": "Secret", "configmap": "ConfigMap"}


class Resolver:
    """Resolve one notebook's ``MountPlan`` in its namespace, as the kubelet does when it starts the pod."""

    def __init__(self, settings: Settings, namespace: str, name: str, own: Path) -> None:
        self.settings, self.namespace, self.name = settings, namespace, name
        self.own = own  # the notebook's own folder (its Secret/ConfigMap/emptyDir folders go under it)
        self.configs = ConfigStore(settings.home).in_namespace(namespace)

    def claim_folder(self, claim: str) -> Path | None:
        """The folder of a claim that is no dataset's, if the claim exists in the notebook's namespace."""
        folder = volume_folders.find(self.settings.volumes_dir, self.namespace, claim)
        return folder if folder.is_dir() else None

    def is_dataset(self, claim: str) -> bool:
        return read_manifest(self.settings, "Dataset", claim, self.namespace) is not None

    def check_claims(self, plan: MountPlan) -> None:
        """The scheduler's check: every claim exists (a dataset's, or a PVC's folder); MountWaiting otherwise."""
        for mount in plan.mounts:
            if mount.kind == "persistentVolumeClaim" and not self.is_dataset(mount.source) and \
                    self.claim_folder(mount.source) is None:
                raise MountWaiting("Unschedulable", f'persistentvolumeclaim "{mount.source}" not found',
                                   unscheduled=True)

    def resolve(self, plan: MountPlan) -> Resolved:
        """The binds and environment of this start (MountWaiting when an object is missing); the caller
        calls ``cleanup`` when the server ends."""
        out = Resolved()
        try:
            for source in plan.env:
                self._env(source, out)
            volumes_folder = self.own / "volumes"
            shutil.rmtree(volumes_folder, ignore_errors=True)  # what the last start wrote: written afresh
            for mount in plan.mounts:
                if mount.memory and mount.target == SHM:
                    continue  # the machine's shared memory, which the server sees already
                folder, read_only = self._source(mount, volumes_folder, out)
                out.binds.append(Bind(folder, mount.target, read_only))
        except BaseException:
            out.cleanup()
            raise
        home = plan.home_mount()
        if home is not None:
            bind = next(b for b in out.binds if b.target == home.target)
            relative = PurePosixPath(plan.home).relative_to(home.target)
            out.workspace = Path(bind.source) / relative if str(relative) != "." else Path(bind.source)
            if not bind.read_only:
                out.workspace.mkdir(parents=True, exist_ok=True)
        return out

    def _source(self, mount: Mount, volumes_folder: Path, out: Resolved) -> tuple[Path, bool]:
        """The host folder shown at the mount's path, and whether it is shown read-only."""
        if mount.kind == "persistentVolumeClaim":
            if self.is_dataset(mount.source):
                return self._dataset(mount, out)
            folder = self.claim_folder(mount.source)
            if folder is None:  # removed since the check
                raise MountWaiting("Unschedulable", f'persistentvolumeclaim "{mount.source}" not found', True)
            return folder, mount.read_only
        folder = volumes_folder / mount.volume
        folder.mkdir(parents=True, mode=0o700)
        if mount.kind == "emptyDir":
            return folder, False
        kind = "secret" if mount.kind == "secret" else "configmap"
        try:
            data = self.configs.get(kind, mount.source)
        except MissingConfig:
            if mount.optional:
                return folder, True
            raise MountWaiting("ContainerCreating", f'MountVolume.SetUp failed for volume "{mount.volume}" : '
                                                   f'{kind} "{mount.source}" not found') from None
        pairs = mount.items or tuple((key, key) for key in sorted(data))
        for key, path in pairs:
            if key not in data:
                if mount.optional:
                    continue
                raise MountWaiting("ContainerCreating", f'MountVolume.SetUp failed for volume "{mount.volume}" : '
                                                       f'configmap references non-existent config key: {key}'
                                   if kind == "configmap" else
                                   f'MountVolume.SetUp failed for volume "{mount.volume}" : references non-existent '
                                   f'secret key: {key}')
            try:
                file = contained_path(folder, path, what=f"{kind} item path")
                check_key(kind, key)
            except (UnsafePath, UserError) as exc:
                raise MountWaiting("ContainerCreating", str(exc)) from None
            file.parent.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if kind == "secret" else 0o644)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(data[key])
        if kind == "configmap":
            folder.chmod(0o755)
        return folder, True

    def _dataset(self, mount: Mount, out: Resolved) -> tuple[Path, bool]:
        """The dataset's shared FUSE mount (a lease held by this supervisor until ``cleanup``)."""
        try:
            read_only = load_config(mount.source, self.namespace).read_only
            shared: SharedMount = use(mount.source, self.namespace, f"Notebook {self.namespace}/{self.name}")
        except UserError as exc:
            raise MountWaiting("ContainerCreating", f'MountVolume.SetUp failed for volume "{mount.volume}" : '
                                                   f"dataset {mount.source}: {exc}") from None
        out.releases.append(lambda: release(shared))
        return shared.folder, read_only or mount.read_only  # a ReadOnly dataset is mounted read-only

    def _env(self, source: EnvSource, out: Resolved) -> None:
        if source.kind == "field":
            out.env[source.variable] = f"{self.name}-0" if source.name == "metadata.name" else self.namespace
            return
        try:
            data = self.configs.get(source.kind, source.name)
        except MissingConfig:
            if source.optional:
                return
            raise MountWaiting("CreateContainerConfigError", f'{source.kind} "{source.name}" not found') from None
        if not source.variable:  # envFrom
            out.env.update({f"{source.prefix}{key}": value for key, value in data.items()})
            return
        if source.key in data:
            out.env[source.variable] = data[source.key]
        elif not source.optional:
            raise MountWaiting("CreateContainerConfigError",
                               f"couldn't find key {source.key} in {_SHOWN_KIND[source.kind]} "
                               f"{self.namespace}/{source.name}")

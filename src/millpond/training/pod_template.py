"""A replica's pod template, read as one machine can run it: the container's command, on the host or in its image.

What the operator would run in a pod, millpond runs as an instance process: the training
container's ``command`` + ``args``, its ``env``, its
``resources`` (``cpu``, ``memory``, ``nvidia.com/gpu``; limits, else requests, through
``millpond.quantities``; Arena's gpushare resources ``aliyun.com/gpu-mem``, GiB of one GPU's
memory, and ``aliyun.com/gpu-core.percentage`` are a GPU share, as ``--gpumemory``/``--gpucore``),
``workingDir``, and its volume mounts: a ``persistentVolumeClaim``
whose ``claimName`` names a millpond dataset is mounted as ``--data`` would, a ``hostPath``
as ``--data-dir``. Scheduling fields (nodeSelector, tolerations, affinity…) are recorded only.
Anything that cannot exist here (another resource kind, a value from a Secret, a ConfigMap
volume, an init container) raises one UserError naming its field.

What its image needs is kept as a ``ContainerImage`` (``image_of``): the image, ``imagePullPolicy``,
the pod's ``imagePullSecrets``, ``args`` alone (the image's entrypoint runs them), ``resources.limits``,
an ``emptyDir`` of medium ``Memory`` at ``/dev/shm`` and the template's ``millpond.io/runtime``
annotation; ``training.images`` decides once per job whether the instances run in it.

A container with no command runs its image's entrypoint on a cluster; on the host there is no
image, so its instances fail at once, saying so (``no_command``), rather than the job being refused:
Kubernetes accepts such a job too. In its image, the entrypoint runs.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from millpond.datasets.fields import field_path, show
from millpond.errors import UserError
from millpond.names import check_object_name
from millpond.quantities import parse_bytes, parse_quantity
from millpond.scheduling.ledger import GpuShare, Request
from millpond.training.spec import ContainerImage, DataBinding, HostBinding

GPU = "nvidia.com/gpu"
GPU_MEM = "aliyun.com/gpu-mem"  # gpushare: GiB of one GPU's memory (Arena's --gpumemory)
GPU_CORE = "aliyun.com/gpu-core.percentage"  # gpushare/cGPU: percent of that GPU's compute (--gpucore)
# Resources that cost nothing here, accepted and not counted.
_UNCOUNTED = frozenset({"ephemeral-storage"})
_RECORDED_VOLUMES = frozenset({"emptyDir"})  # a scratch folder: the instance's working folder serves
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
RUNTIME_ANNOTATION = "millpond.io/runtime"  # runners.containers.policy.ANNOTATION, read where the template is
SHM = "/dev/shm"


@dataclass
class Container:
    """What one replica's instances run, read from its pod template."""

    argv: tuple[str, ...]
    image: str
    env: tuple[tuple[str, str], ...]
    resources: Request
    working_dir: str
    has_command: bool = True
    data: list[DataBinding] = field(default_factory=list)
    data_dirs: list[HostBinding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    image_spec: ContainerImage | None = None  # what running it in its image needs (None: no image given)
    field_env: tuple[tuple[str, str], ...] = ()  # (name, fieldPath): the downward API's, resolved per pod


def no_command(image: str) -> tuple[str, ...]:
    """The argv of an instance whose container gave no command: it fails, saying why."""
    why = (f"error: the container has no command: image {image or '(none)'}'s entrypoint is not run on the "
           "host (the image was not used: see the job's events); give the container a command")
    return ("sh", "-c", f"echo {shlex.quote(why)} >&2; exit 127")


def resources(spec: Any, where: list[str | int]) -> Request:
    """``limits`` (else ``requests``) of cpu, memory and nvidia.com/gpu; another resource is refused."""
    spec = spec or {}
    merged: dict[str, Any] = {**(spec.get("requests") or {}), **(spec.get("limits") or {})}
    for key in ("requests", "limits"):
        for name in spec.get(key) or {}:
            if name not in ("cpu", "memory", GPU, GPU_MEM, GPU_CORE) and name not in _UNCOUNTED:
                raise UserError(f"{field_path([*where, key, name])}: the resource {name} cannot exist on this "
                                f"machine (millpond counts cpu, memory, {GPU}, {GPU_MEM} and {GPU_CORE})")
    cpu = parse_quantity(merged["cpu"], field_path([*where, "cpu"])).milli_value() if "cpu" in merged else 0
    memory = parse_bytes(merged["memory"], field_path([*where, "memory"])) if "memory" in merged else 0
    gpus = 0
    if GPU in merged:
        value = parse_quantity(merged[GPU], field_path([*where, GPU]))
        if value.milli_value() % 1000:
            raise UserError(f"{field_path([*where, GPU])}: {merged[GPU]!r} is not a whole number of GPUs")
        gpus = value.value()
    return Request(cpu, memory, gpus, _share(merged, gpus, where))


def _share(merged: dict[str, Any], gpus: int, where: list[str | int]) -> tuple[GpuShare, ...]:
    """``aliyun.com/gpu-mem`` (GiB, may be fractional: 5.5) and ``aliyun.com/gpu-core.percentage``: one share."""
    if GPU_MEM not in merged:
        if GPU_CORE in merged:
            raise UserError(f"{field_path([*where, GPU_CORE])}: needs {GPU_MEM} too (a share is admitted by memory)")
        return ()
    gib = parse_quantity(merged[GPU_MEM], field_path([*where, GPU_MEM]))
    memory = int(gib.amount * 2**30) // 2**20 * 2**20  # whole MiB
    if memory <= 0:
        raise UserError(f"{field_path([*where, GPU_MEM])}: {merged[GPU_MEM]!r} must be more than 0 GiB")
    if gpus:
        raise UserError(f"{field_path([*where, GPU_MEM])}: a GPU share cannot be asked with {GPU} {gpus}")
    cores = 0
    if GPU_CORE in merged:
        percent = parse_quantity(merged[GPU_CORE], field_path([*where, GPU_CORE]))
        if percent.milli_value() % 1000 or not 1 <= percent.value() <= 100:
            raise UserError(f"{field_path([*where, GPU_CORE])}: {merged[GPU_CORE]!r} must be a whole percent, 1 to 100")
        cores = percent.value()
    return (GpuShare(memory, cores),)


# The downward API's fields a container's env may name (``valueFrom.fieldRef.fieldPath``), as kube-apiserver's
# validation lists them; ``metadata.labels['KEY']`` and ``metadata.annotations['KEY']`` name one entry.
FIELD_PATHS = ("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
               "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")
FIELD_ENTRY = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")


def field_refs(items: Any, where: list[str | int]) -> tuple[tuple[str, str], ...]:
    """``env: [{name, valueFrom: {fieldRef: {fieldPath}}}]``: (name, fieldPath) of each, checked as the API server
    checks them; what resolves them is the pod's controller (a batch Job's, ``training.batch.downward``)."""
    found = []
    for index, item in enumerate(items or ()):
        source = item.get("valueFrom")
        if source is None or set(source) != {"fieldRef"}:
            continue
        path = str((source["fieldRef"] or {}).get("fieldPath") or "")
        if path not in FIELD_PATHS and not FIELD_ENTRY.fullmatch(path):
            raise UserError(f"{field_path([*where, index, 'valueFrom', 'fieldRef', 'fieldPath'])}: Unsupported value: "
                            f"{show(path)}: supported values: {', '.join(FIELD_PATHS)}, metadata.labels['KEY'], "
                            "metadata.annotations['KEY']")
        found.append((str(item["name"]), path))
    return tuple(found)


def env_pairs(items: Any, where: list[str | int], downward: bool = False) -> tuple[tuple[str, str], ...]:
    """``env: [{name, value}]``; a ``valueFrom`` (Secret, ConfigMap, the pod's fields) is refused, but for the pod's
    fields when ``downward`` (``field_refs`` reads those)."""
    pairs = []
    for index, item in enumerate(items or ()):
        if downward and set(item.get("valueFrom") or {}) == {"fieldRef"}:
            continue
        if item.get("valueFrom") is not None:
            raise UserError(f"{field_path([*where, index, 'valueFrom'])}: a value from a Secret, ConfigMap or the "
                            "pod's fields cannot exist here; give the value")
        pairs.append((str(item["name"]), str(item.get("value", ""))))
    return tuple(pairs)


def _mounts(container: dict[str, Any], pod: dict[str, Any], where: list[str | int], out: Container) -> None:
    volumes = {volume.get("name"): (index, volume) for index, volume in enumerate(pod.get("volumes") or ())}
    seen: set[str] = set()
    for index, mount in enumerate(container.get("volumeMounts") or ()):
        here = [*where, "volumeMounts", index]
        target = PurePosixPath(str(mount["mountPath"]))
        if not target.is_absolute() or str(target) == "/" or ".." in target.parts or str(target) in seen:
            raise UserError(f"{field_path([*here, 'mountPath'])}: {show(mount['mountPath'])} must be an absolute "
                            "path other than /, without '..', mounted once")
        seen.add(str(target))
        if mount.get("subPath") or mount.get("subPathExpr"):
            raise UserError(f"{field_path([*here, 'subPath'])}: a volume's sub-path cannot be mounted here")
        found = volumes.get(mount["name"])
        if found is None:
            raise UserError(f"{field_path([*here, 'name'])}: no volume {mount['name']!r} in the pod's volumes")
        vindex, volume = found
        vwhere = [*where[:-2], "volumes", vindex]
        if volume.get("persistentVolumeClaim"):
            claim = str(volume["persistentVolumeClaim"]["claimName"])  # a dataset's name: it names folders too
            check_object_name(claim, field_path([*vwhere, "persistentVolumeClaim", "claimName"]))
            out.data.append(DataBinding(claim, mount["mountPath"]))
        elif volume.get("hostPath"):
            host = PurePosixPath(str(volume["hostPath"]["path"]))
            if not host.is_absolute() or ".." in host.parts:
                raise UserError(f"{field_path([*vwhere, 'hostPath', 'path'])}: {show(str(host))} must be an absolute "
                                "path without '..'")
            out.data_dirs.append(HostBinding(volume["hostPath"]["path"], mount["mountPath"]))
        elif any(key in volume for key in _RECORDED_VOLUMES):
            out.notes.append(f"{field_path(vwhere)}: an emptyDir is not mounted (the instance's folder serves)")
        else:
            kind = next((key for key in volume if key != "name"), "?")
            raise UserError(f"{field_path([*vwhere, kind])}: a {kind} volume cannot exist here "
                            "(millpond mounts a persistentVolumeClaim naming a dataset, or a hostPath)")


def pick_container(pod: dict[str, Any], preferred: str, where: list[str | int]) -> tuple[int, dict[str, Any]]:
    """The operator's training container: the one named ``preferred``, else the first."""
    if pod.get("initContainers"):
        raise UserError(f"{field_path([*where, 'initContainers'])}: init containers cannot run here")
    containers = pod.get("containers") or []
    if not containers:
        raise UserError(f"{field_path([*where, 'containers'])}: a pod needs a container")
    for index, container in enumerate(containers):
        if container.get("name") == preferred:
            chosen = index, container
            break
    else:
        chosen = 0, containers[0]
    if len(containers) > 1:
        other = 1 if chosen[0] == 0 else 0
        raise UserError(f"{field_path([*where, 'containers', other])}: a second container (a sidecar) cannot run "
                        "beside the training one here")
    return chosen


def _shm_bytes(container: dict[str, Any], pod: dict[str, Any], memory_limit: int, where: list[str | int]) -> int:
    """The size of an ``emptyDir: {medium: Memory}`` mounted at /dev/shm: its ``sizeLimit``, else the
    container's memory limit, else half the machine's memory (what a tmpfs gets by default); 0 without one."""
    volumes = {volume.get("name"): volume for volume in pod.get("volumes") or ()}
    for mount in container.get("volumeMounts") or ():
        volume = volumes.get(mount.get("name")) or {}
        empty = volume.get("emptyDir")
        if os.path.normpath(str(mount.get("mountPath"))) != SHM or not isinstance(empty, dict):
            continue
        if empty.get("medium") != "Memory":
            return 0
        if empty.get("sizeLimit") is not None:
            return parse_bytes(empty["sizeLimit"], field_path([*where, "volumes", mount["name"], "emptyDir",
                                                               "sizeLimit"]))
        return memory_limit or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    return 0


def image_of(container: dict[str, Any], pod: dict[str, Any], where: list[str | int],
             annotations: dict[str, Any] | None = None) -> ContainerImage | None:
    """What running ``container`` (of pod spec ``pod``, at path ``where``) in its image needs; None without one."""
    image = str(container.get("image") or "").strip()
    if not image:
        return None
    policy = str(container.get("imagePullPolicy") or "")
    if policy and policy not in PULL_POLICIES:
        raise UserError(f"{field_path([*where, 'imagePullPolicy'])}: {show(policy)} is not one of "
                        f"{', '.join(PULL_POLICIES)}")
    secrets = []
    for index, ref in enumerate(pod.get("imagePullSecrets") or ()):
        name = str((ref or {}).get("name") or "")
        if name:
            check_object_name(name, field_path([*where[:-2], "imagePullSecrets", index, "name"]))
            secrets.append(name)
    limits = (container.get("resources") or {}).get("limits") or {}
    memory = parse_bytes(limits["memory"], field_path([*where, "resources", "limits", "memory"])) \
        if "memory" in limits else 0
    cpus = parse_quantity(limits["cpu"], field_path([*where, "resources", "limits", "cpu"])).milli_value() / 1000 \
        if "cpu" in limits else 0.0
    return ContainerImage(
        image=image, pull_policy=policy, pull_secrets=tuple(secrets), args_only=not container.get("command"),
        args=tuple(str(word) for word in container.get("args") or ()) if not container.get("command") else (),
        memory_bytes=memory, cpus=cpus, shm_bytes=_shm_bytes(container, pod, memory, where[:-2]),
        runtime=str((annotations or {}).get(RUNTIME_ANNOTATION) or ""))


def read_pod(pod: dict[str, Any], preferred: str, where: list[str | int],
             annotations: dict[str, Any] | None = None, downward: bool = False) -> Container:
    """The training container of a pod spec (``where`` is the pod spec's path), as an instance runs it;
    ``annotations``: the pod template's (its ``millpond.io/runtime``); ``downward``: env from the pod's fields
    (``fieldRef``) is kept in ``field_env`` for the pod's controller to resolve, not refused."""
    index, container = pick_container(pod, preferred, where)
    cwhere = [*where, "containers", index]
    if container.get("envFrom"):
        raise UserError(f"{field_path([*cwhere, 'envFrom'])}: variables from a Secret or ConfigMap cannot exist "
                        "here; list them under env")
    image = str(container.get("image") or "")
    argv = tuple(str(word) for word in (*(container.get("command") or ()), *(container.get("args") or ())))
    if not container.get("command"):
        argv = no_command(image)
    out = Container(argv=argv, image=image, env=env_pairs(container.get("env"), [*cwhere, "env"], downward),
                    resources=resources(container.get("resources"), [*cwhere, "resources"]),
                    working_dir=str(container.get("workingDir") or ""), has_command=bool(container.get("command")))
    if not container.get("command"):
        out.notes.append(f"{field_path(cwhere)}: no command (the image's entrypoint): its instances fail unless "
                         "they run in the image")
    if downward:
        out.field_env = field_refs(container.get("env"), [*cwhere, "env"])
    _mounts(container, pod, cwhere, out)
    out.image_spec = image_of(container, pod, cwhere, annotations)
    return out

"""DataProcess: the processor's script or job containers, each with the dataset at ``mountPath``.

Fluid renders a DataProcess as a Job (``charts/fluid-dataprocess``): a script processor is one
container of ``image:imageTag`` whose ``source`` is mounted at ``/fluid-scripts/preprocess.sh``
and run as its args (after ``command`` when one is given, else by the image's entrypoint); a job
processor is its ``podSpec`` as written. Fluid adds the dataset's volume to every container, at
``spec.dataset.mountPath`` (+ ``subPath``). Here the containers run one after another, each:

- in its image when the runtime policy says so (``runners.containers.policy``: the DataProcess's
  ``millpond.io/runtime`` annotation, else ``settings.runtime``), pulled as the kubelet pulls it
  (``imagePullPolicy``, the pod's ``imagePullSecrets``); ``auto`` without a runtime or the image
  runs it on this host instead and the log says which image it did not use and why;
- on this host otherwise, in a private mount namespace (``runners.sandbox``), as before images
  ran: a script without ``command`` runs with ``bash``, and it sees millpond's console scripts and
  home (a script may drive millpond, as seed 000's does).

Either way the dataset's folder (its FUSE mount, or its cache folder) is bound at ``mountPath``,
read-write when the dataset is ``ReadWrite*`` and read-only otherwise; ``volumeMounts`` of the
container's ``volumes`` are bound too: ``hostPath``, ``emptyDir`` (a folder of this step) and
``persistentVolumeClaim`` (the home's named local volume: a PVC on one machine). Other volume kinds
fail the step naming them. ``resources.limits`` (memory, cpu) are enforced by the runtime in an image.
"""

from __future__ import annotations

import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from millpond.datasets.config import load_config
from millpond.datasets.operations.failures import OperationFailed
from millpond.datasets.shared_mounts import using
from millpond.errors import MillpondError
from millpond.quantities import parse_bytes, parse_quantity
from millpond.runners import isolation
from millpond.runners.base import Bind, InImage, ProcessSpec
from millpond.runners.containers import sweep
from millpond.runners.containers.command import OWNER_LABEL
from millpond.runners.containers.images import ImagePullError, dockerconfig_of
from millpond.runners.containers.policy import ImageRequest, chosen, decide
from millpond.runners.containers.runtimes import ContainerRuntime
from millpond.runners.environment import inherited_environment, with_console_scripts
from millpond.runners.guardian import guardian
from millpond.runners.in_image import container_command, finish
from millpond.runners.process_groups import MARK_VAR, end_marked, marked
from millpond.runners.sandbox import SandboxUnavailable, wrap
from millpond.settings import load_settings
from millpond.store import volume_folders
from millpond.store.resources import Resource
from millpond.store.secrets import ConfigStore, MissingConfig

# The containers this process runs now: whatever ends the operation (a stop signal, its deletion) removes them
# before it ends its process group (the runtime's client dying leaves its container running).
_RUNNING: dict[str, ContainerRuntime] = {}
_RUNNING_LOCK = threading.Lock()
SCRIPT_PATH = "/fluid-scripts/preprocess.sh"  # where Fluid's chart mounts a script processor's source
HOST_SHELL = ["bash"]  # a script without command, on this host


@dataclass
class Step:
    """One container of the processor, as read from the manifest."""

    name: str
    command: list[str]
    args: list[str]
    env: dict[str, str]
    script: str | None = None
    image: str | None = None
    pull_policy: str | None = None
    mounts: list[dict[str, Any]] = field(default_factory=list)  # its volumeMounts
    memory_bytes: int | None = None
    cpus: float | None = None


@dataclass(frozen=True)
class Processor:
    """The steps in order, the volumes they may mount, and the pod's pull secrets (their names)."""

    steps: list[Step]
    volumes: dict[str, dict[str, Any]]
    pull_secrets: tuple[str, ...] = ()


def dataset_ref(resource: Resource) -> tuple[str, str]:
    ref = resource.spec.get("dataset") or {}
    if isinstance(ref, str):  # DataBackup names its dataset by a plain string
        ref = {"name": ref}
    if not ref.get("name"):
        raise OperationFailed("spec.dataset.name is missing")
    return str(ref["name"]), str(ref.get("namespace") or resource.namespace)


def data_process(resource: Resource, progress: Any) -> dict[str, Any]:
    """Run the processor's script or containers with the dataset mounted at ``mountPath`` (+ ``subPath``).

    The dataset's shared mount is held for this step only: it ends with its last user.
    """
    name, namespace = dataset_ref(resource)
    if namespace != resource.namespace and isolation.required():
        # Fluid's check (dataProcessOperation.Validate, reason TargetDatasetNamespaceNotSame), applied on a team's
        # server: another namespace's dataset is reached only through a Dataset of this one that references it
        raise OperationFailed(f"DataProcess({resource.namespace}/{resource.name})'s namespace is not same as its "
                              "spec.dataset")
    with using(name, namespace, f"DataProcess {resource.namespace}/{resource.name}") as folder:
        return _process_in(resource, folder)


def _process_in(resource: Resource, folder: Path) -> dict[str, Any]:
    name, namespace = dataset_ref(resource)
    ref = resource.spec.get("dataset") or {}
    mount_path = str(ref.get("mountPath") or "/data").rstrip("/") or "/"
    sub_path = str(ref.get("subPath") or "").strip("/")
    read_only = load_config(name, namespace).read_only
    source = folder / sub_path if sub_path else folder
    if not source.is_dir():
        raise OperationFailed(f"dataset {name} has no folder {sub_path!r}")
    processor = read_processor(resource)
    home = load_settings().home
    logs = home / "operations"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{resource.namespace}_DataProcess_{resource.name}.out"
    dataset = Bind(source, mount_path, read_only=read_only)
    with tempfile.TemporaryDirectory(prefix="millpond-process-") as work, open(log_path, "wb") as log:
        for position, step in enumerate(processor.steps):
            image = _placement(resource, processor, step, log)
            binds = [dataset, *_volume_binds(step, processor.volumes, Path(work) / f"volumes-{position}",
                                                    resource.namespace)]
            if image is not None:
                code, reason = _run_in_image(step, image, binds, Path(work), position, log)
            else:
                code, reason = _run_on_host(step, binds, Path(work), position, home, log)
            if code != 0:
                log.flush()
                tail = [line for line in log_path.read_text(errors="replace").splitlines() if line.strip()][-1:] or [""]
                said = reason or tail[0][:200]
                raise OperationFailed(f"the script exited with status {code}: {said}")
    return {"log": str(log_path)}


def read_processor(resource: Resource) -> Processor:
    """The script processor as one step, or the job's init containers then containers, each a step."""
    processor = resource.spec.get("processor") or {}
    script = processor.get("script")
    if script:
        image = str(script.get("image") or "")
        if image and script.get("imageTag"):
            image = f"{image}:{script['imageTag']}"
        step = _step(script, "script-processor")
        step.script, step.image = script.get("source"), image or None
        return Processor([step], _volumes(script.get("volumes")))
    pod = (processor.get("job") or {}).get("podSpec") or {}
    containers = [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]
    if not pod.get("containers"):
        raise OperationFailed("spec.processor has neither a script nor a job with containers")
    secrets = tuple(str(ref.get("name")) for ref in pod.get("imagePullSecrets") or [] if ref.get("name"))
    steps = []
    for index, container in enumerate(containers):
        step = _step(container, str(container.get("name") or f"container-{index}"))
        step.image = str(container.get("image") or "") or None
        steps.append(step)
    return Processor(steps, _volumes(pod.get("volumes")), secrets)


def _step(raw: dict[str, Any], name: str) -> Step:
    env = {str(e["name"]): str(e.get("value", "")) for e in raw.get("env") or [] if "name" in e}
    limits = (raw.get("resources") or {}).get("limits") or {}
    try:
        memory = parse_bytes(limits["memory"], "resources.limits.memory") if "memory" in limits else None
        cpus = float(parse_quantity(limits["cpu"], "resources.limits.cpu").cores) if "cpu" in limits else None
    except MillpondError as exc:
        raise OperationFailed(str(exc)) from None
    return Step(name, [str(w) for w in raw.get("command") or []], [str(a) for a in raw.get("args") or []], env,
                pull_policy=raw.get("imagePullPolicy") or None, mounts=list(raw.get("volumeMounts") or []),
                memory_bytes=memory, cpus=cpus)


def _volumes(raw: Any) -> dict[str, dict[str, Any]]:
    return {str(volume["name"]): volume for volume in raw or [] if isinstance(volume, dict) and volume.get("name")}


def _volume_binds(step: Step, volumes: dict[str, dict[str, Any]], scratch: Path, namespace: str) -> list[Bind]:
    """Each of the step's ``volumeMounts`` as a bind of this machine's folder (see the module's docstring)."""
    binds = []
    for mount in step.mounts:
        name, target = str(mount.get("name") or ""), str(mount.get("mountPath") or "")
        volume = volumes.get(name)
        if volume is None:
            raise OperationFailed(f"container {step.name}: volumeMounts {name!r}: no volume of that name")
        read_only = bool(mount.get("readOnly"))
        if volume.get("hostPath"):
            source = Path(str(volume["hostPath"].get("path") or ""))
            try:
                isolation.check_host_folder(source, f"volume {name}: hostPath")
            except isolation.HostFolderRefused as exc:
                raise OperationFailed(str(exc)) from None
        elif "emptyDir" in volume:
            source = scratch / name
            source.mkdir(parents=True, exist_ok=True)
        elif volume.get("persistentVolumeClaim"):
            claim = volume["persistentVolumeClaim"]
            try:  # a claim of the DataProcess's own namespace, as a pod's
                source = volume_folders.find(load_settings().volumes_dir, namespace, str(claim.get("claimName") or ""))
            except MillpondError as exc:  # a claim name no PVC can have
                raise OperationFailed(f"volume {name}: {exc}") from None
            read_only = read_only or bool(claim.get("readOnly"))
        else:
            kind = next((key for key in volume if key != "name"), "?")
            raise OperationFailed(f"volume {name}: a {kind} volume cannot be mounted here (millpond mounts "
                                  "hostPath, emptyDir and persistentVolumeClaim volumes)")
        if not source.is_dir():
            raise OperationFailed(f"volume {name}: {source} is not a folder of this machine")
        sub = str(mount.get("subPath") or "").strip("/")
        binds.append(Bind(source / sub if sub else source, target, read_only=read_only))
    return binds


def _placement(resource: Resource, processor: Processor, step: Step, log: IO[bytes]) -> InImage | None:
    """The image the step runs in, or None for this host (the log says why an image was not used)."""
    if not step.image:
        return None
    annotations = (resource.manifest.get("metadata") or {}).get("annotations") or {}
    try:
        own = ConfigStore(load_settings().home).in_namespace(resource.namespace)  # its namespace's Secrets
        secrets = tuple(dockerconfig_of(own.get("secret", name), f'imagePullSecrets: secret "{name}"')
                        for name in processor.pull_secrets)
        asked = ImageRequest(step.image, chosen(annotations, load_settings().runtime), step.pull_policy, secrets,
                             args_only=not step.command)
        decision = decide(asked, log)
    except ImagePullError as exc:
        raise OperationFailed(f"container {step.name}: {exc.reason}: {exc.detail}") from None
    except MissingConfig as exc:
        raise OperationFailed(f"imagePullSecrets: {exc}") from None
    except MillpondError as exc:  # the policy insists and no runtime works; a bad annotation or reference
        raise OperationFailed(f"container {step.name}: {exc}") from None
    if decision.runtime is None:
        log.write(f"[millpond] image {step.image} not used, {step.name} runs on this host: {decision.reason}\n"
                  .encode())
        log.flush()
        return None
    labels = {OWNER_LABEL: f"DataProcess/{resource.namespace}/{resource.name}"}
    return InImage(decision.runtime, step.image, args_only=not step.command, memory_bytes=step.memory_bytes,
                   cpus=step.cpus, labels=labels)


def _run_in_image(step: Step, image: InImage, binds: list[Bind], work: Path, position: int,
                  log: IO[bytes]) -> tuple[int, str | None]:
    """The step as the runtime's ``run``: its script bound where Fluid mounts it; (exit status, OOMKilled or None)."""
    argv = [*step.command, *step.args]
    if step.script is not None:
        script = work / f"script-{position}"
        script.write_text(step.script)
        binds = [*binds, Bind(script, SCRIPT_PATH, read_only=True)]
        argv.append(SCRIPT_PATH)
    mark = marked()
    # log_path: only its folder is shown in the container (the step's work folder, not the home's operations)
    spec = ProcessSpec(argv=argv, env=dict(step.env), cwd=work, log_path=work / "log", binds=binds, in_image=image)
    started = container_command(spec, {**guardian().env(), **mark})
    with _RUNNING_LOCK:
        _RUNNING[started.name] = image.runtime
    try:
        result = subprocess.run(started.argv, env={**started.env, **mark}, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=work)
    finally:
        end_marked(mark[MARK_VAR])
        with _RUNNING_LOCK:
            _RUNNING.pop(started.name, None)
    reason = finish(image, started, result.returncode, stopped=result.returncode < 0)
    if reason == "OOMKilled":
        return result.returncode, f"OOMKilled: the container went over its memory limit ({image.memory_bytes} bytes)"
    return result.returncode, None


def remove_running() -> None:
    """Remove the containers this process runs now (the operation is being ended): none left running."""
    with _RUNNING_LOCK:
        running = dict(_RUNNING)
        _RUNNING.clear()
    for name, runtime in running.items():
        sweep.remove(runtime, name)


def _run_on_host(step: Step, binds: list[Bind], work: Path, position: int, home: Path,
                 log: IO[bytes]) -> tuple[int, None]:
    """The step on this host, in a private mount namespace with the binds; its exit status."""
    argv = [*(step.command or (HOST_SHELL if step.script is not None else [])), *step.args]
    if step.script is not None:
        script = work / f"script-{position}"
        script.write_text(step.script)
        argv.append(str(script))
    if not argv:
        raise OperationFailed(f"container {step.name} has no command or args to run on this host")
    try:
        words = wrap(argv, binds, work)
    except SandboxUnavailable as exc:
        if isolation.required():
            raise OperationFailed(str(exc)) from None
        raise OperationFailed(f"cannot mount the dataset at {binds[0].target}: {exc}") from None
    mark = marked()  # what the script starts in other sessions ends with it (runners.process_groups)
    try:
        result = subprocess.run(words, env={**_script_environment(home), **step.env, **mark}, stdout=log,
                                stderr=subprocess.STDOUT, cwd=work)
    finally:
        end_marked(mark[MARK_VAR])
    return result.returncode, None


def _script_environment(home: Path) -> dict[str, str]:
    """What a script on this host starts with: millpond's environment, its console scripts first on PATH, its
    home pinned.

    So a script that drives millpond (``arena submit``, ``arena get NAME -o json``, as seed
    000's training step does) reaches this installation and this home's store and ledger,
    even when the venv was never activated or ``MILLPOND_HOME`` was relative (the script runs
    in a folder of its own).
    """
    return {**with_console_scripts(inherited_environment()), "MILLPOND_HOME": str(home)}

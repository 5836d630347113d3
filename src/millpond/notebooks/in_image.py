"""Where a Notebook's server runs: in the Notebook's image (a container runtime), or JupyterLab on this host.

Kubeflow's notebook controller runs the Notebook's StatefulSet pod from ``spec.template.spec.containers[0]``:
its ``image``, pulled by the kubelet per ``imagePullPolicy`` with the pod's ``imagePullSecrets``, its
entrypoint (or the template's ``command``/``args``), its ``env`` beside ``NB_PREFIX``, listening on 8888.
Here the runtime policy decides, as for a custom model server (``serving.placement``): the Notebook's
``millpond.io/runtime`` annotation, else ``settings.runtime`` (``MILLPOND_RUNTIME``, ``millpond config set
runtime``), else ``auto``:

- ``auto`` runs the image when a runtime works and the image is here or can be pulled; else JupyterLab
  from millpond's environment on this host (``notebooks.jupyter``), said once (the server's log, the
  supervisor's, and the pod's ``millpond.io/ran-in: host: WHY``);
- a policy that insists (``container``, ``podman``, ``docker``) makes a failed pull the notebook's
  ``containerState.waiting`` with Kubernetes' reason (``ErrImagePull``, ``ImagePullBackOff``,
  ``ErrImageNeverPull``) and the registry's words, asked again every ``PULL_RETRY_S`` (the image's
  own back-off says ``ImagePullBackOff`` meanwhile, as the kubelet's does); an image loaded meanwhile
  is found at the next ask;
- multi-user mode keeps the server on this host, inside the namespace's sandbox: Kubeflow's images run
  Jupyter with an empty token, and a port published on the loopback is open to every local user, while
  the sandboxed host server keeps its token (see ``notebooks.jupyter``). Recorded as
  ``host: multi-user mode ...``.

In the image (``container_run``) the server gets what the pod gets: the image's own entrypoint and
command (the template's ``command``/``args`` when given, ``$(VAR)`` expanded from its environment as
the kubelet does), ``NB_PREFIX`` and the template's ``env``; the notebook's workspace bound read-write
at the image's home (``/home/jovyan``, Kubeflow's workspace volume's mount) and shared with the pod's
``fsGroup`` (100 unless the template has a ``securityContext``: ``share_with_group``); the working
folder the container's ``workingDir``, else the home (the controller's default); ``resources.limits``
of cpu and memory enforced by the runtime; the GPUs the ledger granted (``runners.in_image``). It
listens on Kubeflow's port (8888, or the container's ``ports[0].containerPort``), published on
``127.0.0.1`` at a free port: the port the proxy of ``millpond server`` forwards to (``endpoint.json``),
on the runtime's own network (two notebooks both listen on 8888). Jupyter's token is offered as
``JUPYTER_TOKEN`` too: an image that reads it asks for it, and a Kubeflow image, started with
``--ServerApp.token=''``, ignores the token header the proxy adds.

Every container is labelled ``io.millpond.owner=Notebook/NAMESPACE/NAME`` and with its supervisor's
guardian token (``runners.in_image``): a supervisor killed with -9 has its guardian remove it, the next
supervisor and the delete sweep what is left by the owner label (``sweep_owned``), so one notebook never
has two. Simplified: the image's ``USER`` runs it (``runAsUser`` and the rest of ``securityContext`` are
not read).
"""

from __future__ import annotations

import dataclasses
import os
import stat
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from millpond.errors import TaskFailure, UserError
from millpond.notebooks import paths
from millpond.notebooks.kinds import base_url
from millpond.quantities import QuantityError, parse_bytes, parse_quantity
from millpond.runners import isolation
from millpond.runners.base import Bind, InImage, ProcessSpec
from millpond.runners.containers import sweep
from millpond.runners.containers.command import OWNER_LABEL
from millpond.runners.containers.images import PULL_POLICIES, ImagePullError, pull_secrets
from millpond.runners.containers.policy import ANNOTATION, ImageRequest, check_policy, chosen, decide
from millpond.runners.containers.runtimes import ContainerRuntime
from millpond.runners.in_image import Started, container_command, finish
from millpond.runners.process_groups import MARK_VAR
from millpond.serving.container_env import expand
from millpond.serving.placement import working_folder
from millpond.settings import Settings
from millpond.store.secrets import ConfigStore

HOME = "/home/jovyan"  # Kubeflow's images' home: the workspace volume's mount, the controller's default workingDir
PORT = 8888  # what Kubeflow's images listen on
FS_GROUP = 100  # the controller's fsGroup for a pod with no securityContext: Kubeflow's images' jovyan is in it
RUNTIME_FILE = "container"  # in the notebook's folder: the runtime its server ran in (for the delete's sweep)
MULTI_USER = ("multi-user mode: a notebook image's token-less Jupyter on a loopback port would be open to every "
              "local user; JupyterLab runs in the namespace's sandbox on this host instead")
FILE_BITS = 0o660  # what the kubelet adds to a volume's files for its fsGroup
FOLDER_BITS = 0o2770  # and to its folders: setgid, so new files keep the group
PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull")
# A failed pull is asked again this soon, as the kubelet's pod sync does: the image's own back-off
# (``images.BACKOFF``: 10 s doubling to 5 min) answers ImagePullBackOff meanwhile without pulling.
PULL_RETRY_S = 5.0


@dataclass(frozen=True)
class NotebookContainer:
    """What the template's first container asks of its image (as the kubelet reads it)."""

    image: str
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    pull_policy: str | None = None
    pull_secrets: tuple[str, ...] = ()  # the pod's imagePullSecrets (names of Secrets of the namespace)
    port: int = PORT
    memory_bytes: int | None = None
    cpus: float | None = None
    working_dir: str = HOME
    fs_group: int | None = FS_GROUP


@dataclass(frozen=True)
class Placement:
    """Where the server runs: ``runtime`` set for the image, else this host with ``reason`` saying why."""

    runtime: ContainerRuntime | None
    reason: str = ""
    warnings: tuple[str, ...] = ()  # what the kubelet warns of and goes on without (a pull secret not found)

    @property
    def ran_in(self) -> str:
        """``millpond.io/ran-in``: the runtime's name, or ``host: WHY``."""
        return self.runtime.name if self.runtime is not None else f"host: {self.reason}"


def owner(namespace: str, name: str) -> str:
    return f"Notebook/{namespace}/{name}"


def check(metadata: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
    """At apply: UserError naming the field for a runtime policy millpond does not know (the
    ``millpond.io/runtime`` annotation) or an ``imagePullPolicy`` Kubernetes' pod validation refuses."""
    policy = (metadata.get("annotations") or {}).get(ANNOTATION)
    if policy is not None:
        check_policy(str(policy), f"metadata.annotations[{ANNOTATION}]")
    pod = (spec.get("template") or {}).get("spec") or {}
    given = ((pod.get("containers") or [{}])[0] or {}).get("imagePullPolicy")
    if given not in (None, "") and given not in PULL_POLICIES:
        raise UserError(f"spec.template.spec.containers[0].imagePullPolicy: Unsupported value: {given!r}: "
                        "supported values: " + ", ".join(f'"{p}"' for p in PULL_POLICIES))


def _words(value: Any) -> tuple[str, ...]:
    return tuple(str(word) for word in value) if isinstance(value, list) else ()


def container_of(spec: Mapping[str, Any]) -> NotebookContainer:
    """The notebook's container from the Notebook's ``spec`` (the first of ``template.spec.containers``).

    Limits the runtime cannot read (a bad quantity: refused at apply already) are left unenforced.
    """
    pod = (spec.get("template") or {}).get("spec") or {}
    container = (pod.get("containers") or [{}])[0]
    limits = (container.get("resources") or {}).get("limits") or {}
    try:
        memory = parse_bytes(limits["memory"], "memory limit") if "memory" in limits else None
        cpus = float(parse_quantity(limits["cpu"], "cpu limit").cores) if "cpu" in limits else None
    except QuantityError:
        memory = cpus = None
    ports = [port for port in container.get("ports") or [] if isinstance(port, dict)]
    port = ports[0].get("containerPort") if ports else None
    security = pod.get("securityContext")
    fs_group = FS_GROUP if security is None else (security or {}).get("fsGroup")
    return NotebookContainer(
        image=str(container.get("image") or ""), command=_words(container.get("command")),
        args=_words(container.get("args")), pull_policy=container.get("imagePullPolicy") or None,
        pull_secrets=tuple(str(ref.get("name")) for ref in pod.get("imagePullSecrets") or []
                           if isinstance(ref, dict) and ref.get("name")),
        port=port if isinstance(port, int) and 0 < port < 65536 else PORT, memory_bytes=memory, cpus=cpus,
        working_dir=str(container.get("workingDir") or HOME), fs_group=fs_group if isinstance(fs_group, int) else None)


def place(settings: Settings, namespace: str, annotations: Mapping[str, str] | None, container: NotebookContainer,
          log: IO[bytes] | None = None) -> Placement:
    """Decide where the server runs, pulling its image first when it must be (called in a thread).

    Raises TaskFailure (an ``ImagePullError`` with Kubernetes' reason for a pull) when the policy insists on
    the image and it cannot be had.
    """
    if not container.image:
        return Placement(None, "the notebook's container names no image")
    policy = chosen(annotations, settings.runtime)
    if policy == "host":
        return Placement(None, "the runtime policy is host")
    if isolation.required(settings):
        return Placement(None, MULTI_USER)
    secrets, warnings = pull_secrets(container.pull_secrets, ConfigStore(settings.home).in_namespace(namespace))
    decision = decide(ImageRequest(image=container.image, policy=policy, pull_policy=container.pull_policy,
                                   pull_secrets=tuple(secrets), args_only=not container.command), log)
    return Placement(decision.runtime, decision.reason, tuple(warnings))


class Placing:
    """The decision for the next start, made in a thread of the supervisor (a pull may take minutes while the
    supervisor still follows its object and writes its status)."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._outcome: Placement | BaseException | None = None

    def poll(self, settings: Settings, namespace: str, annotations: Mapping[str, str] | None,
             container: NotebookContainer, log_path: Path) -> Placement | BaseException | None:
        """The decision once made (a Placement, or what ``place`` raised); None while it is being made."""
        if self._thread is None:
            def run() -> None:
                try:
                    with open(log_path, "ab") as log:
                        self._outcome = place(settings, namespace, annotations, container, log)
                except Exception as exc:  # noqa: BLE001 - any failure to decide is the notebook's, said and retried
                    self._outcome = exc
            self._outcome = None
            self._thread = threading.Thread(target=run, daemon=True, name="notebook-image")
            self._thread.start()
            return None
        if self._thread.is_alive():
            return None
        self._thread = None
        return self._outcome


def failure(outcome: BaseException) -> tuple[str, str]:
    """The kubelet's waiting reason and message for a decision that failed: a pull's own reason, an image
    reference that is none (``InvalidImageName``), else ``CreateContainerConfigError``."""
    if isinstance(outcome, ImagePullError):
        return outcome.reason, outcome.detail
    why = str(outcome) if isinstance(outcome, TaskFailure) else f"{type(outcome).__name__}: {outcome}"
    return ("InvalidImageName" if "not a valid image reference" in why else "CreateContainerConfigError"), why


@dataclass(frozen=True)
class ImageServer:
    """The server's container: the runtime's ``run`` to start (``started.argv``), and its removal once its client
    ended (``--rm`` removes it when the client saw it exit; a client stopped by a signal leaves it)."""

    image: InImage
    started: Started

    def let_go(self, exit_code: int, stopped: bool) -> str | None:
        """Remove what is left of it; ``OOMKilled`` when the runtime killed it for its memory limit."""
        return finish(self.image, self.started, exit_code, stopped)


def container_run(runtime: ContainerRuntime, container: NotebookContainer, workspace: Path, namespace: str,
                  name: str, port: int, env: Mapping[str, str], guard_env: dict[str, str],
                  binds: Sequence[Bind] = ()) -> ImageServer:
    """The runtime's ``run`` of the notebook's image (see the module's docstring): ``env`` is the template's
    with the notebook's own (``NB_PREFIX``, ``JUPYTER_TOKEN``, its mark, its GPUs); ``guard_env`` the
    supervisor's guardian stamp, which labels the container for removal whatever ends the supervisor;
    ``binds`` what else the pod mounts (its volumes), each at its ``mountPath``."""
    groups = () if container.fs_group is None else (container.fs_group,)
    if groups:
        share_with_group(workspace, groups[0])
    image = InImage(runtime, container.image, args_only=not container.command, memory_bytes=container.memory_bytes,
                    cpus=container.cpus, labels={OWNER_LABEL: owner(namespace, name)},
                    ports=((port, container.port),), groups=groups)
    variables = {**env, "NB_PREFIX": base_url(namespace, name)}
    argv = [expand(word, variables) for word in (*container.command, *container.args)]  # the kubelet's $(VAR)
    # cwd and log_path are the container's home: the workspace is bound there, nothing of this host's at its path
    spec = ProcessSpec(argv=argv, env=variables, cwd=Path(HOME),
                       log_path=Path(HOME) / "server.log", binds=[Bind(workspace, HOME), *binds], in_image=image)
    started = container_command(spec, guard_env)
    if container.working_dir != HOME:  # a folder of the image (never bound from this host, unlike cwd)
        started = dataclasses.replace(started, argv=working_folder(started.argv, container.working_dir))
    return ImageServer(image, started)


def share_with_group(folder: Path, gid: int) -> None:
    """Apply the pod's ``fsGroup`` to the workspace as the kubelet applies it to a volume: every file owned by
    group ``gid`` with ``rw-rw----`` added, folders ``rwxrwx---`` and setgid (what is made inside keeps the
    group), so the image's user (Kubeflow's jovyan: uid 1000, gid 100) may write its home. Simplified: only
    when the folder's own group or mode differ (``fsGroupChangePolicy: OnRootMismatch``), and only where this
    process may change groups (root: a rootless runtime maps the image's users elsewhere anyway)."""
    if os.geteuid() != 0:
        return
    top = folder.stat()
    if top.st_gid == gid and top.st_mode & FOLDER_BITS == FOLDER_BITS:
        return
    for place, _, files in os.walk(folder):  # a link to a folder is not followed
        for path, bits in ((Path(place), FOLDER_BITS), *((Path(place) / f, FILE_BITS) for f in files)):
            if path.is_symlink():
                continue
            os.chown(path, -1, gid)
            os.chmod(path, stat.S_IMODE(path.stat().st_mode) | bits)


def image_env(spec_env: tuple[tuple[str, str], ...], token: str, mark: str,
              gpu_env: Mapping[str, str]) -> dict[str, str]:
    """What the server in the image is given beside ``NB_PREFIX``: the template's ``env``, Jupyter's token (an
    image that reads ``JUPYTER_TOKEN`` asks for it), the mark its processes carry, the GPUs granted."""
    return {**dict(spec_env), "JUPYTER_TOKEN": token, MARK_VAR: mark, **gpu_env}


def remember_runtime(settings: Settings, uid: str, runtime: ContainerRuntime) -> None:
    """Note that this notebook's server ran in a container of ``runtime`` (so a later sweep knows where to look)."""
    (paths.folder(settings, uid) / RUNTIME_FILE).write_text(runtime.name + "\n")


def sweep_owned(settings: Settings, uid: str, namespace: str, name: str) -> int:
    """Remove every container left of this notebook (an earlier supervisor killed with -9): its supervisor calls
    it before its first start, the delete after the supervisor ended. Costs nothing when its server never ran
    in a container. The number removed."""
    return sweep.remove_owned(paths.folder(settings, uid) / RUNTIME_FILE, owner(namespace, name))

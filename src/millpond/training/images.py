"""Where a job's instances run: in their pod templates' images, or on the host; decided once per job and image.

A supervisor (or a batch Job's controller) decides before it starts any instance, not at each
restart: pulling may take long, and a restart must not pull again. For each replica with an image
(``ReplicaSpec.image``):

- the policy is ``policy.chosen`` of the job's annotations with the pod template's
  ``millpond.io/runtime`` over them (the more specific wins), else ``settings.runtime``;
- the image is had as the kubelet has it (``imagePullPolicy``, the pod's ``imagePullSecrets``:
  ``kubernetes.io/dockerconfigjson`` Secrets of the job's namespace, ``pull_secrets``);
- one ``policy.decide`` per distinct (image, pull policy, secrets, policy): a master and its workers
  on the same image pull once.

``auto`` falls back to the host with the reason (``Placed.unused``: the caller says it once, in an
event; an instance that then fails says it again in the failure's event, ``host_note``); a policy that
insists raises: an ``ImagePullError`` (``ErrImagePull``, ``ErrImageNeverPull``, ``ImagePullBackOff``
with the registry's words) or a TaskFailure (no runtime works here).

What was decided is written to the job's folder (``images.json``): the Pod views read it to show
whether a pod ran in its image, and a reader that finds the job's supervisor dead knows to remove
its containers (``remove_containers``), which do not die with the runtime's client.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

from millpond.runners.base import InImage
from millpond.runners.containers import policy, runtimes, sweep
from millpond.runners.containers.command import OWNER_LABEL
from millpond.runners.containers.runtimes import ContainerRuntime
from millpond.settings import Settings
from millpond.training.pull_secrets import pull_secrets
from millpond.training.spec import ContainerImage

UID_LABEL = "io.millpond.owner-uid"  # the job's uid: a re-created job of the same name is another owner
INSTANCE_LABEL = "io.millpond.instance"  # the instance (pod) a container runs
RECORD = "images.json"
RAN_IN = "millpond.io/ran-in"  # a Pod view's annotation: the runtime it ran in (podman, docker), or "host: WHY"


@dataclass(frozen=True)
class RoleRuntime:
    """Where one replica's instances run: ``in_image`` None is the host. ``workdir``: the image's own
    WORKDIR (where its container starts when the pod template names no ``workingDir``)."""

    in_image: InImage | None
    image: ContainerImage | None = None
    workdir: str = ""
    reason: str = ""  # why the host, when it has an image


@dataclass
class Placed:
    """Every role's runtime, and the images the job did not use with why (said once)."""

    roles: dict[str, RoleRuntime] = field(default_factory=dict)
    unused: str | None = None

    def of(self, role: str) -> RoleRuntime:
        return self.roles.get(role) or RoleRuntime(None)

    @property
    def any_in_image(self) -> bool:
        return any(one.in_image is not None for one in self.roles.values())


def owner_labels(kind: str, namespace: str, name: str, uid: str) -> dict[str, str]:
    return {OWNER_LABEL: f"{kind}/{namespace}/{name}", UID_LABEL: uid}


def decide_roles(roles: Mapping[str, ContainerImage | None], *, namespace: str, annotations: Mapping[str, str],
                 labels: Mapping[str, str], settings: Settings,
                 log: IO[bytes] | None = None) -> Placed:
    """The runtime of each role (``roles``: role -> its pod template's image, None for none)."""
    placed = Placed()
    unused = policy.UnusedImages()
    decided: dict[tuple[object, ...], policy.Decision] = {}
    for role, image in roles.items():
        if image is None:
            placed.roles[role] = RoleRuntime(None)
            continue
        wanted = policy.chosen({**annotations, **({policy.ANNOTATION: image.runtime} if image.runtime else {})},
                               settings.runtime)
        key = (image.image, image.pull_policy, image.pull_secrets, wanted)
        if key not in decided:
            configs = pull_secrets(image.pull_secrets, namespace, settings, log)
            decided[key] = policy.decide(policy.ImageRequest(
                image.image, wanted, image.pull_policy or None, configs, args_only=image.args_only,
                shm_bytes=image.shm_bytes or None), log)
        decision = decided[key]
        if decision.runtime is None:
            unused.add(decision)
            placed.roles[role] = RoleRuntime(None, image, reason=decision.reason)
            continue
        in_image = InImage(decision.runtime, image.image, image.args_only, image.memory_bytes or None,
                           image.cpus or None, image.shm_bytes or None, dict(labels))
        placed.roles[role] = RoleRuntime(in_image, image, workdir=image_workdir(decision.runtime, image.image))
    placed.unused = unused.summary()
    return placed


def image_workdir(runtime: ContainerRuntime, image: str) -> str:
    """The image's WORKDIR ("" when it sets none, or sets ``/``): the kubelet starts a container there."""
    try:
        done = subprocess.run(runtime.argv("image", "inspect", "--format", "{{.Config.WorkingDir}}", image),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    found = done.stdout.strip() if done.returncode == 0 else ""
    return "" if found in ("", "/") else found


def for_instance(role: RoleRuntime, instance: str) -> InImage | None:
    """The role's InImage with the instance's own label (the Pod views and ``podman ps`` tell them apart)."""
    if role.in_image is None:
        return None
    return replace(role.in_image, labels={**role.in_image.labels, INSTANCE_LABEL: instance})


def instance_argv(argv: tuple[str, ...], image: ContainerImage, host_torchrun: tuple[str, ...]) -> tuple[str, ...]:
    """What an instance runs in its image: the container's ``args`` when it gave no command (the image's
    entrypoint runs them), else the planned argv with the host's torchrun (``--nproc-per-node``) as the
    image's own ``torchrun``."""
    if image.args_only:
        return image.args
    if host_torchrun and argv[:len(host_torchrun)] == host_torchrun:
        return ("torchrun", *argv[len(host_torchrun):])
    return argv


def host_note(role: RoleRuntime) -> str:
    """What a failure of an instance that ran on the host although it has an image adds to its event (a batch
    pod's message): that the image was not used, and why (its program or files may exist only there)."""
    if role.in_image is not None or role.image is None:
        return ""
    return f" (it ran on this machine, not in its image {role.image.image}: {role.reason})"


def cwd_in_image(role: RoleRuntime, working_dir: str, job_work: Path) -> Path:
    """The container's working folder: the pod template's ``workingDir``, else the image's WORKDIR, else
    the job's own work folder (shown at the same path, as on the host)."""
    return Path(working_dir or role.workdir or job_work)


def record(folder: Path, placed: Placed) -> None:
    """``images.json`` in the job's folder: per role, its image and whether (and with which runtime) it runs in it."""
    folder.mkdir(parents=True, exist_ok=True)
    shown = {role: {"image": one.image.image if one.image else "",
                    "runtime": one.in_image.runtime.name if one.in_image else "host",
                    "reason": one.reason} for role, one in placed.roles.items() if one.image is not None}
    (folder / RECORD).write_text(json.dumps(shown, sort_keys=True))


def recorded(folder: Path) -> dict[str, dict[str, str]]:
    """What ``record`` wrote ({} when the job has no image, or was decided before images ran)."""
    try:
        found = json.loads((folder / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def ran_in(ran: Mapping[str, Mapping[str, str]], role: str, ran_with: str = "") -> dict[str, str]:
    """A role's pods' ``millpond.io/ran-in`` from what ``recorded`` read ({} when the role has no image);
    ``ran_with``: the role whose process runs this one's (an MPIJob's workers are its launcher's ranks)."""
    found = ran.get(role) or (ran.get(ran_with) if ran_with else None)
    if not found:
        return {}
    runtime = found.get("runtime") or "host"
    return {RAN_IN: runtime if runtime != "host" else f"host: {found.get('reason') or 'the image was not used'}"}


def remove_containers(folder: Path, uid: str) -> None:
    """Remove every container of job ``uid`` (its supervisor died, or the job is deleted): a container does not
    end with the runtime's client that started it. Costs nothing for a job none of whose roles ran in an image."""
    names = {one.get("runtime") for one in recorded(folder).values()} - {"host", None, ""}
    for name in names:
        found = runtimes.probe(str(name))
        if isinstance(found, ContainerRuntime):
            sweep.remove(found, *sweep.labelled(found, f"{UID_LABEL}={uid}"))

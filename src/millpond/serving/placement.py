"""Where a custom predictor's replicas run: in the container's image, or its command on this host.

KServe runs a custom predictor (``spec.predictor.containers``) as a pod of that image. Here the
runtime policy decides (``runners.containers.policy``): the InferenceService's ``millpond.io/runtime``
annotation, else ``settings.runtime`` (``MILLPOND_RUNTIME``, ``millpond config set runtime``):

- once per revision, before its replicas start, and in a thread of the supervisor (a pull may take
  its time while the supervisor still follows its object): the image is pulled as the kubelet pulls
  it (``imagePullPolicy``; credentials from the predictor's ``imagePullSecrets``, each a
  ``kubernetes.io/dockerconfigjson`` Secret of the home, over the user's own registry config);
- ``auto`` falls back to the host when no runtime works or the image cannot be had, and the
  supervisor says so once (its log, the replica logs, an event); a policy that insists on the image
  (``container``, ``podman``, ``docker``) makes a failed pull the revision's failure with
  Kubernetes' reason (``ErrImagePull``, ``ImagePullBackOff`` while the back-off lasts,
  ``ErrImageNeverPull``) and the registry's own words;
- millpond's own model servers (sklearn, pytorch: the predefined formats) always run on this host:
  only custom containers name an image of the user's.

In the image a replica gets what it gets on this host, as KServe gives it: ``PORT`` (and Knative's
``K_SERVICE``, ``K_CONFIGURATION``, ``K_REVISION``), its ``env``, the model its ``storageUri`` names
bound read-only at ``/mnt/models`` (KServe's storage initializer's mount; ``MILLPOND_MODEL_DIR`` names
it), ``resources.limits`` enforced by the runtime, the host network (the InferenceService's port
and the gateway proxy to the port it listens on, as on this host). Every container carries
``io.millpond.owner=InferenceService/NS/NAME``: whatever ends the supervisor, the next one (or the
delete) removes what is left of its replicas.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO

from millpond.errors import TaskFailure
from millpond.runners.base import Bind, InImage
from millpond.runners.containers import runtimes, sweep
from millpond.runners.containers.command import OWNER_LABEL
from millpond.runners.containers.images import ImagePullError, pull_secrets
from millpond.runners.containers.policy import Decision, ImageRequest, decide
from millpond.serving import endpoints
from millpond.serving.spec import PredictorSpec, no_command
from millpond.store.secrets import ConfigStore

MODEL_MOUNT = "/mnt/models"  # where KServe's storage initializer puts the model for the server
IN_IMAGE_FILE = "containers"  # in the InferenceService's folder: the runtime its replicas ran in (for the sweep)
ISVC_LABEL = "serving.kserve.io/inferenceservice"


@dataclass(frozen=True)
class Placement:
    """Where one revision's replicas run: ``image`` set (with its runtime) for the image, else this host,
    with ``reason`` saying why the image (if any) was not used."""

    image: InImage | None
    reason: str = ""
    warnings: tuple[str, ...] = ()  # what the kubelet warns of and goes on without (a pull secret not found)


def owner(namespace: str, name: str, kind: str = endpoints.ISVC) -> str:
    """The owner label of an object's containers: ``KIND/NAMESPACE/NAME`` (a SeldonDeployment may share an
    InferenceService's name, and its containers are not the InferenceService's)."""
    return f"{kind}/{namespace}/{name}"


def request(spec: PredictorSpec, configs: ConfigStore) -> tuple[ImageRequest | None, list[str]]:
    """What the revision asks of the runtime (None for millpond's own model servers and a container with no
    image), and the warnings the kubelet would give: an ``imagePullSecrets`` entry that is not found is
    ``FailedToRetrieveImagePullSecret`` and the pull goes on without it, as the kubelet's does.

    TaskFailure naming the secret when one holds no registry config (``.dockerconfigjson``).
    """
    container = spec.container
    if spec.server != "command" or not container.image:
        return None, []
    secrets, warnings = pull_secrets(spec.image_pull_secrets, configs)
    return ImageRequest(image=container.image, policy=spec.runtime_policy, pull_policy=container.image_pull_policy,
                        pull_secrets=tuple(secrets), args_only=not container.command), warnings


def place(spec: PredictorSpec, configs: ConfigStore, log: IO[bytes] | None = None,
          kind: str = endpoints.ISVC) -> Placement:
    """Decide where the revision runs, pulling its image first when it must be (the supervisor's thread calls it).

    Raises TaskFailure (an ``ImagePullError`` with Kubernetes' reason for a pull) when the policy insists on
    the image and it cannot be had.
    """
    asked, warnings = request(spec, configs)
    if asked is None:
        return Placement(None)
    decision: Decision = decide(asked, log)
    if decision.runtime is None:
        return Placement(None, decision.reason, tuple(warnings))
    labels = {OWNER_LABEL: owner(spec.namespace, spec.name, kind), ISVC_LABEL: spec.name}
    return Placement(InImage(decision.runtime, asked.image, args_only=asked.args_only,
                             memory_bytes=spec.container.memory_limit, cpus=spec.container.cpu_limit,
                             labels=labels), warnings=tuple(warnings))


@dataclass(frozen=True)
class Settled:
    """What one decision means for its revision: where it runs (``placement``), or why it cannot start yet
    (``failure``: KServe's or the kubelet's reason and message; ``retry``: again after a back-off, else never),
    the events to record (type, reason, message) and the line to say once in the logs."""

    placement: Placement | None
    failure: tuple[str, str] | None = None
    retry: bool = True
    events: tuple[tuple[str, str, str], ...] = ()
    said: str = ""


def settle(spec: PredictorSpec, outcome: Placement | BaseException | None) -> Settled:
    """Read what :func:`place` gave (or raised) as the kubelet reports it: a failed pull is ``Failed`` with the
    registry's words and ``Error: ErrImagePull`` (``BackOff`` while the back-off lasts); the image not used
    under ``auto`` is said once (``ImageNotUsed``), and a container without a command then cannot start."""
    image = spec.container.image
    events: tuple[tuple[str, str, str], ...]
    if isinstance(outcome, ImagePullError):
        if outcome.reason == "ImagePullBackOff":
            events = (("Normal", "BackOff", outcome.detail),)
        else:
            events = (("Warning", "Failed", f'Failed to pull image "{image}": {outcome.detail}'),
                      ("Warning", "Failed", f"Error: {outcome.reason}"))
        return Settled(None, (outcome.reason, outcome.detail), events=events)
    if not isinstance(outcome, Placement):
        why = str(outcome) if isinstance(outcome, TaskFailure) else f"{type(outcome).__name__}: {outcome}"
        return Settled(None, ("RunContainerError", why), events=(("Warning", "Failed", why),))
    warnings = tuple(("Warning", "FailedToRetrieveImagePullSecret", warning) for warning in outcome.warnings)
    if outcome.image is not None:
        runtime = outcome.image.runtime.name
        return Settled(outcome, events=(*warnings, (
            "Normal", "Pulled", f'Container image "{image}" is on the machine: replicas run in it ({runtime})')),
            said=f"runs in image {image} ({runtime})")
    said = f"image {image} is not used, the command runs on this host: {outcome.reason}"
    events = (*warnings, ("Warning", "ImageNotUsed", said))
    if not spec.container.command:
        return Settled(None, ("InvalidPredictorSpec", no_command(image, outcome.reason)), retry=False,
                       events=events, said=said)
    return Settled(outcome, events=events, said=said)


def model_bind(model_dir: Path | None) -> list[Bind]:
    """The model folder at KServe's ``/mnt/models``, read-only as the storage initializer's volume is mounted."""
    return [Bind(model_dir, MODEL_MOUNT, read_only=True)] if model_dir is not None else []


def working_folder(argv: list[str], folder: str) -> list[str]:
    """The runtime's ``run`` words with ``-w`` set to the container's ``workingDir`` (a folder of the image,
    never bound from this host: the replica's own work folder is the ``-w`` ``container_command`` gives)."""
    words = list(argv)
    at = words.index("-w")  # run_argv writes exactly one, before the image
    words[at + 1] = folder
    return words


def remember_runtime(namespace: str, name: str, runtime: runtimes.ContainerRuntime,
                     kind: str = endpoints.ISVC) -> None:
    """Note that replicas of this InferenceService ran in containers (so a delete knows to sweep them)."""
    folder = endpoints.folder(namespace, name, kind)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / IN_IMAGE_FILE).write_text(runtime.name + "\n")


def sweep_owned(namespace: str, name: str, kind: str = endpoints.ISVC) -> int:
    """Remove every container left of this InferenceService's replicas (a supervisor killed with -9 leaves its
    containers behind): a new supervisor calls it before its first container, a delete after the supervisor ended.
    Costs nothing when none of its replicas ever ran in a container. The number removed."""
    return sweep.remove_owned(endpoints.folder(namespace, name, kind) / IN_IMAGE_FILE, owner(namespace, name, kind))


def forget(namespace: str, name: str) -> None:
    """The InferenceService is gone and so are its containers: the marker goes too."""
    (endpoints.folder(namespace, name) / IN_IMAGE_FILE).unlink(missing_ok=True)

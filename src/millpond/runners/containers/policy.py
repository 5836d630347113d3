"""Where a process runs: in its image (a container runtime) or on the host, and why.

The policy is one of ``POLICIES``:

- ``host``: today's host sandbox; the image is recorded, not used.
- ``container``: the image, in whichever runtime works (Podman first, then Docker); ``podman`` and
  ``docker`` name one. No working runtime, or an image that cannot be had, fails the task with
  Kubernetes' words.
- ``auto`` (the default): the image when a runtime works and the image is here or can be pulled;
  else the host, and the run says once which images it did not use. One rule more keeps it fast
  and predictable: a kfp lightweight Python component whose image is a generic Python base
  (``python:<any tag>``, as kfp's ``base_image`` defaults to) runs on the host, where the same
  Python code gives the same result without a container's start-up.

The most specific setting wins: an object's ``millpond.io/runtime`` annotation, then the run's
(``--runtime``), then ``MILLPOND_RUNTIME``, then ``millpond config set runtime``.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO

from millpond.errors import TaskFailure, UserError
from millpond.runners.containers import images, runtimes
from millpond.runners.containers.runtimes import ContainerRuntime

POLICIES = ("auto", "host", "container", "podman", "docker")
ANNOTATION = "millpond.io/runtime"
RAN_IN = "millpond.io/ran-in"  # recorded on what ran: "podman", "docker", or "host: <why the image was not used>"
GENERIC_PYTHON = frozenset({"docker.io/library/python"})
AUTO_PULL_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ImageRequest:
    """What a process's image asks of the runtime: set by the layer that knows the object it came from.

    ``args_only``: the argv is the container's ``args`` alone (no ``command``): the image's own
    entrypoint runs with them, as Kubernetes runs it. ``lightweight``: a kfp lightweight Python
    component (the host's Python runs it the same). ``pull_secrets``: the parsed
    ``.dockerconfigjson`` of each of the object's ``imagePullSecrets``.
    """

    image: str
    policy: str = "auto"
    pull_policy: str | None = None
    pull_secrets: tuple[Mapping[str, object], ...] = field(default=(), repr=False)
    args_only: bool = False
    lightweight: bool = False
    shm_bytes: int | None = None


@dataclass(frozen=True)
class Decision:
    """Where it runs: ``runtime`` None is the host, with ``reason`` saying why the image was not used."""

    image: str
    runtime: ContainerRuntime | None
    reason: str = ""

    @property
    def in_image(self) -> bool:
        return self.runtime is not None

    @property
    def ran_in(self) -> str:
        """What ``RAN_IN`` records: the runtime's name, or ``host: REASON``."""
        return self.runtime.name if self.runtime is not None else f"host: {self.reason}"


def check_policy(value: str, where: str) -> str:
    if value not in POLICIES:
        raise UserError(f"{where} is {value!r}; it takes one of: {', '.join(POLICIES)}")
    return value


def chosen(annotations: Mapping[str, str] | None, default: str) -> str:
    """The policy for one object: its ``millpond.io/runtime`` annotation when it has one, else ``default``."""
    value = (annotations or {}).get(ANNOTATION)
    if value is None:
        return default
    if value not in POLICIES:
        raise TaskFailure(f"annotation {ANNOTATION}={value!r} takes one of: {', '.join(POLICIES)}")
    return value


def is_generic_python(image: str) -> bool:
    try:
        return images.parse(image).repository in GENERIC_PYTHON
    except TaskFailure:
        return False


def decide(request: ImageRequest, log: IO[bytes] | None = None) -> Decision:
    """Where a process with ``request`` runs; the image is pulled here first when it must be.

    Raises TaskFailure (an ImagePullError for a pull) when the policy insists on the image and it
    cannot be had; ``auto`` then falls back to the host instead, with the reason.
    """
    policy = request.policy
    if policy == "host":
        return Decision(request.image, None, "the runtime policy is host")
    preferred = policy if policy in runtimes.RUNTIMES else None
    found = runtimes.find(preferred)
    if isinstance(found, str):
        if policy != "auto":
            raise TaskFailure(f"the runtime policy is {policy}, but no container runtime works here: {found}")
        return Decision(request.image, None, f"no container runtime works here: {found}")
    if policy == "auto" and request.lightweight and is_generic_python(request.image):
        return Decision(request.image, None, "a lightweight Python component on a generic Python image")
    pull_policy = images.pull_policy_of(request.image, request.pull_policy)
    # Under auto a failed pull is no failure (the host runs the task, and the run says so once): its output is
    # kept back, and reaches the log only when the pull succeeded.
    held = io.BytesIO() if policy == "auto" and log is not None else None
    try:
        images.ensure(found, request.image, pull_policy, pull_secrets=request.pull_secrets,
                      log=held if held is not None else log,
                      timeout_s=AUTO_PULL_TIMEOUT_S if policy == "auto" else images.DEFAULT_PULL_TIMEOUT_S)
        if held is not None and log is not None:
            log.write(held.getvalue())
    except images.ImagePullError as exc:
        if policy != "auto":
            raise
        if pull_policy == "Always" and images.is_present(found, images.parse(request.image).full):
            if log is not None:  # auto keeps working offline with the copy it has (``:latest`` pulls Always)
                log.write(f"[millpond] {exc}; using the copy of {request.image} this machine has\n".encode())
            return Decision(request.image, found)
        return Decision(request.image, None, f"the image could not be had: {exc}")
    return Decision(request.image, found)


class UnusedImages:
    """The images a run did not use and why, so the run can say so once (not once per task)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reasons: dict[str, str] = {}

    def add(self, decision: Decision) -> bool:
        """Remember a host decision; True the first time this image is seen."""
        if decision.in_image or not decision.image:
            return False
        with self._lock:
            if decision.image in self._reasons:
                return False
            self._reasons[decision.image] = decision.reason
            return True

    def summary(self) -> str | None:
        """One line naming every image not used, with the reasons; None when all were used."""
        with self._lock:
            if not self._reasons:
                return None
            by_reason: dict[str, list[str]] = {}
            for image, reason in self._reasons.items():
                by_reason.setdefault(reason, []).append(image)
        parts = [f"{', '.join(sorted(names))} ({reason})" for reason, names in by_reason.items()]
        return "ran on this machine, not in these images: " + "; ".join(parts)

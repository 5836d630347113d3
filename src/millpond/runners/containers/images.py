"""Images as the kubelet pulls them: references, pull policies, credentials, and pulls that end in words.

- A reference is read as Docker and Kubernetes read it: ``python:3.11`` is
  ``docker.io/library/python:3.11``; no tag is ``:latest``.
- ``imagePullPolicy`` defaults as Kubernetes defaults it: ``Always`` for ``:latest`` (or no tag),
  ``IfNotPresent`` otherwise; ``Never`` never pulls.
- Credentials: the ``.dockerconfigjson`` of the object's ``imagePullSecrets`` over the user's own
  registry config (``REGISTRY_AUTH_FILE``, ``$XDG_RUNTIME_DIR/containers/auth.json``,
  ``~/.docker/config.json``), merged into one auth file that lives only while the pull runs.
- A failed pull is an :class:`ImagePullError` with Kubernetes' reason (``ErrImagePull``, then
  ``ImagePullBackOff`` while the back-off lasts, ``ErrImageNeverPull``) and the registry's own
  message. Every pull has a time limit: a run never hangs on one.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from millpond.errors import TaskFailure
from millpond.runners.containers import pulled
from millpond.runners.containers.runtimes import ContainerRuntime
from millpond.settings import load_settings
from millpond.store.secrets import ConfigStore, MissingConfig

PULL_POLICIES = ("Always", "IfNotPresent", "Never")
DEFAULT_PULL_TIMEOUT_S = 600.0
BACKOFF_START_S, BACKOFF_MAX_S = 10.0, 300.0  # the kubelet's image back-off: 10 s doubling to 5 min
_REFERENCE = re.compile(r"^[a-z0-9][a-z0-9._:/@+-]*$", re.IGNORECASE)


class ImagePullError(TaskFailure):
    """The image could not be had; ``reason`` is Kubernetes' word for why, the message the registry's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.detail = message


@dataclass(frozen=True)
class ImageRef:
    """An image reference split as Docker splits it: registry domain, repository path, tag, digest."""

    domain: str
    path: str
    tag: str | None
    digest: str | None

    @property
    def repository(self) -> str:
        return f"{self.domain}/{self.path}"

    @property
    def full(self) -> str:
        """The fully qualified name (what podman and the registry are asked for)."""
        text = self.repository
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def parse(image: str) -> ImageRef:
    """``image`` as a reference; a string that is none is a TaskFailure naming it."""
    text = image.strip()
    if not text or not _REFERENCE.match(text) or ".." in text or "//" in text:
        raise TaskFailure(f"image {image!r} is not a valid image reference")
    name, _, digest = text.partition("@")
    slash = name.rfind("/")
    tag = None
    if ":" in name[slash + 1:]:
        name, tag = name.rsplit(":", 1)
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        domain, path = first, rest
    else:
        domain, path = "docker.io", name
    if domain == "docker.io" and "/" not in path:
        path = f"library/{path}"
    if not tag and not digest:
        tag = "latest"
    return ImageRef(domain.lower(), path, tag, digest or None)


def default_pull_policy(image: str) -> str:
    """Kubernetes' default: Always for ``:latest`` (or no tag and no digest), else IfNotPresent."""
    ref = parse(image)
    return "Always" if ref.tag == "latest" and not ref.digest else "IfNotPresent"


def pull_policy_of(image: str, given: str | None) -> str:
    if given is None or given == "":
        return default_pull_policy(image)
    if given not in PULL_POLICIES:
        raise TaskFailure(f"imagePullPolicy {given!r} is not one of {', '.join(PULL_POLICIES)}")
    return given


PRESENT_FOR_S = 30.0  # how long a "present" answer is trusted: a 50-task chain asks once, not 50 times
_present: dict[tuple[str, str], float] = {}
_present_lock = threading.Lock()


def is_present(runtime: ContainerRuntime, image: str) -> bool:
    """Whether the runtime's store holds ``image``; a yes is remembered for PRESENT_FOR_S (each ask is a runtime
    command, ~40 ms). An image removed meanwhile fails its run with the runtime's "image not known"."""
    key = (runtime.binary, image)
    with _present_lock:
        if time.monotonic() < _present.get(key, 0.0):
            return True
    words = ["image", "exists", image] if runtime.name == "podman" else ["image", "inspect", image]
    done = subprocess.run(runtime.argv(*words), capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    if done.returncode == 0:
        with _present_lock:
            _present[key] = time.monotonic() + PRESENT_FOR_S
    return done.returncode == 0


def user_auths() -> dict[str, object]:
    """Registry credentials the user already has, in the order podman reads them (the first wins)."""
    places = [os.environ.get("REGISTRY_AUTH_FILE", "")]
    if os.environ.get("XDG_RUNTIME_DIR"):
        places.append(os.path.join(os.environ["XDG_RUNTIME_DIR"], "containers", "auth.json"))
    places.append(os.path.join(os.environ.get("DOCKER_CONFIG") or os.path.expanduser("~/.docker"), "config.json"))
    auths: dict[str, object] = {}
    for place in reversed([p for p in places if p]):
        try:
            found = json.loads(Path(place).read_text(encoding="utf-8")).get("auths") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(found, dict):
            auths.update(found)
    return auths


def merged_auths(pull_secrets: Iterable[Mapping[str, object]]) -> dict[str, object]:
    """The user's credentials with each pull secret's ``auths`` over them (a later secret wins a registry)."""
    auths = user_auths()
    for config in pull_secrets:
        found = config.get("auths")
        if isinstance(found, dict):
            auths.update(found)
    return auths


class _Backoff:
    """The kubelet's image back-off, per runtime and image: after a failed pull, later pulls wait it out."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failed: dict[tuple[str, str], tuple[float, float, str]] = {}  # -> (until, delay, message)

    def check(self, key: tuple[str, str], image: str) -> None:
        with self._lock:
            entry = self._failed.get(key)
        if entry and time.monotonic() < entry[0]:
            raise ImagePullError("ImagePullBackOff", f'Back-off pulling image "{image}": {entry[2]}')

    def failed(self, key: tuple[str, str], message: str) -> None:
        with self._lock:
            previous = self._failed.get(key)
            delay = min(BACKOFF_MAX_S, previous[1] * 2) if previous else BACKOFF_START_S
            self._failed[key] = (time.monotonic() + delay, delay, message)

    def succeeded(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._failed.pop(key, None)


BACKOFF = _Backoff()


def _registry_words(said: str) -> str:
    """The registry's own message out of podman's or docker's output (its last ``Error:`` line)."""
    lines = [line.strip() for line in said.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if line.lower().startswith("error"):
            return line.split(":", 1)[1].strip()[:500] if ":" in line else line[:500]
    return (lines[-1] if lines else "the pull failed")[:500]


def _pull(argv: list[str], log: IO[bytes] | None, timeout_s: float) -> tuple[str, int | None]:
    """Run a pull, copying its progress into ``log`` as it comes (``Copying blob …``); (its output, exit status),
    the status None when it ran past ``timeout_s`` (it is then killed)."""
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        process.kill()

    timer = threading.Timer(timeout_s, expire)
    timer.start()
    lines: list[bytes] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if log is not None:
                log.write(line)
                log.flush()
        code = process.wait()
    finally:
        timer.cancel()
        if process.poll() is None:
            process.kill()
            process.wait()
    return b"".join(lines).decode("utf-8", errors="replace"), (None if expired.is_set() else code)


def ensure(
    runtime: ContainerRuntime, image: str, policy: str, *, pull_secrets: Iterable[Mapping[str, object]] = (),
    log: IO[bytes] | None = None, timeout_s: float = DEFAULT_PULL_TIMEOUT_S,
) -> str:
    """Have ``image`` in the runtime's store as ``policy`` says; "present" or "pulled", or an ImagePullError."""
    ref = parse(image).full
    if policy != "Always" and is_present(runtime, ref):
        return "present"
    if policy == "Never":
        raise ImagePullError("ErrImageNeverPull",
                             f'Container image "{image}" is not present with pull policy of Never')
    key = (runtime.name, ref)
    BACKOFF.check(key, image)
    with tempfile.TemporaryDirectory(prefix="millpond-auth-") as folder:
        words = ["pull"]
        auths = merged_auths(pull_secrets)
        if auths or runtime.name == "podman":  # always a file for podman: a REGISTRY_AUTH_FILE that is missing fails it
            auth_file = Path(folder) / "config.json"
            fd = os.open(auth_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump({"auths": auths}, out)
            words = ["--config", folder, "pull"] if runtime.name == "docker" else ["pull", "--authfile", str(auth_file)]
        if log is not None:
            log.write(f"[millpond] pulling image {ref} ({runtime.name})\n".encode())
            log.flush()
        said, code = _pull(runtime.argv(*words, ref), log, timeout_s)
    if code is None:
        message = f"the pull took longer than {timeout_s:g} s"
        BACKOFF.failed(key, message)
        raise ImagePullError("ErrImagePull", f'pulling image "{image}": {message}')
    if code != 0:
        message = _registry_words(said)
        BACKOFF.failed(key, message)
        raise ImagePullError("ErrImagePull", f'pulling image "{image}": {message}')
    BACKOFF.succeeded(key)
    pulled.add(load_settings().home, ref, runtime.name)
    return "pulled"


def pull_secrets(names: Iterable[str], configs: ConfigStore) -> tuple[list[dict[str, object]], list[str]]:
    """The registry config of each of a pod's ``imagePullSecrets`` (Secrets of ``configs``' namespace), and the
    kubelet's warning for one that is not found: ``FailedToRetrieveImagePullSecret``, and the pull goes on
    without it. TaskFailure naming a Secret that holds no registry config."""
    found, warnings = [], []
    for name in names:
        try:
            data = configs.get("secret", name)
        except MissingConfig:
            warnings.append(f"Unable to retrieve some image pull secrets ({name}); attempting to pull the image "
                            "may not succeed.")
            continue
        found.append(dockerconfig_of(data, f'imagePullSecrets: secret "{name}"'))
    return found, warnings


def dockerconfig_of(data: Mapping[str, str], where: str) -> dict[str, object]:
    """The registry config a ``kubernetes.io/dockerconfigjson`` Secret holds (``.dockercfg`` too), as
    ``{"auths": {...}}``; a TaskFailure naming ``where`` when it holds neither or bad JSON."""
    if ".dockerconfigjson" in data:
        text, legacy = data[".dockerconfigjson"], False
    elif ".dockercfg" in data:
        text, legacy = data[".dockercfg"], True
    else:
        raise TaskFailure(f"{where} has no .dockerconfigjson key (a kubernetes.io/dockerconfigjson Secret)")
    try:
        parsed = json.loads(text)
    except ValueError:
        raise TaskFailure(f"{where}: its .dockerconfigjson is not valid JSON") from None
    if not isinstance(parsed, dict):
        raise TaskFailure(f"{where}: its .dockerconfigjson is not a JSON object")
    return {"auths": parsed} if legacy else parsed

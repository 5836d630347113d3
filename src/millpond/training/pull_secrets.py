"""A pod's ``imagePullSecrets``: the registry configs of the named Secrets of the job's namespace.

The core family keeps a Secret's values in the home's ``ConfigStore`` (a 0600 file) and its
Kubernetes metadata (namespace, ``type``) as a row of the resource store; a Secret made with
``millpond secret create`` has no row and is in ``default``. As the kubelet does, a Secret that is
missing, of another namespace or not of type ``kubernetes.io/dockerconfigjson`` (``dockercfg``) is
skipped with a warning (its "Unable to retrieve some image pull secrets"), and the pull goes on
with the credentials that remain.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO

from millpond.errors import TaskFailure, UserError
from millpond.runners.containers.images import dockerconfig_of
from millpond.settings import Settings
from millpond.store.resources import ResourceStore
from millpond.store.secrets import ConfigStore, MissingConfig

PULL_SECRET_TYPES = ("kubernetes.io/dockerconfigjson", "kubernetes.io/dockercfg")


def pull_secrets(names: tuple[str, ...], namespace: str, settings: Settings,
                 log: IO[bytes] | None = None) -> tuple[Mapping[str, object], ...]:
    """The parsed ``.dockerconfigjson`` of each Secret ``names`` names in ``namespace`` that can be read."""
    if not names:
        return ()
    rows = {row.name: row for row in ResourceStore(settings).list("Secret", namespace)}
    configs = ConfigStore(settings.home)
    found: list[Mapping[str, object]] = []
    for name in names:
        row = rows.get(name)
        where = f"Secret {namespace}/{name}"
        secret_type = str((row.manifest.get("type") if row else "") or "Opaque")
        if row is not None and secret_type not in PULL_SECRET_TYPES:
            _warn(log, f"{where} is of type {secret_type}, not kubernetes.io/dockerconfigjson: pulling without it")
            continue
        try:
            found.append(dockerconfig_of(configs.get("secret", name, namespace), where))
        except MissingConfig:
            _warn(log, f"{where} does not exist: pulling without it")
        except (TaskFailure, UserError) as exc:
            _warn(log, f"{exc}: pulling without it")
    return tuple(found)


def _warn(log: IO[bytes] | None, line: str) -> None:
    if log is not None:
        log.write(f"[millpond] warning: unable to retrieve an image pull secret: {line}\n".encode())
        log.flush()

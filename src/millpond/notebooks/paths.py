"""Where a Notebook keeps its files: ``$MILLPOND_HOME/notebooks/UID/`` (a re-created Notebook is another folder).

``supervisor.log`` is what its supervisor printed, ``server.log`` the Jupyter server's output (the pod's
log, each line stamped), ``token`` Jupyter's own token (mode 0600: only the supervisor and the proxy of
``millpond server`` read it; the browser never sees it), ``endpoint.json`` where the running server
listens (``server_view``), ``runtime/`` and ``jupyter/`` Jupyter's runtime and config folders (nothing
of the OS user's own Jupyter set-up is read). The working folder Jupyter opens (``workspace``) is kept
per namespace and name, so it outlives a stop and a re-created Notebook, as the workspace PVC of a
Kubeflow notebook does.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from millpond.settings import Settings


def folder(settings: Settings, uid: str) -> Path:
    return settings.home / "notebooks" / uid


def supervisor_log(settings: Settings, uid: str) -> Path:
    return folder(settings, uid) / "supervisor.log"


def server_log(settings: Settings, uid: str) -> Path:
    return folder(settings, uid) / "server.log"


def endpoint_file(settings: Settings, uid: str) -> Path:
    return folder(settings, uid) / "endpoint.json"


def token_file(settings: Settings, uid: str) -> Path:
    return folder(settings, uid) / "token"


def workspace(settings: Settings, namespace: str, name: str) -> Path:
    return settings.home / "notebooks" / "workspaces" / namespace / name


def ensure_token(settings: Settings, uid: str) -> str:
    """The notebook's Jupyter token, made once (0600)."""
    path = token_file(settings, uid)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(secrets.token_urlsafe(32))
    return path.read_text().strip()


def read_token(settings: Settings, uid: str) -> str | None:
    try:
        return token_file(settings, uid).read_text().strip() or None
    except OSError:
        return None

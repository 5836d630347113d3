"""Where a RayCluster or RayJob keeps its files: ``$MILLPOND_HOME/kuberay/UID/`` (a re-created object is
another folder), and its Ray nodes' temp dirs.

``supervisor.log`` is what its supervisor printed; ``logs/NODE.log`` each Ray node's ``ray start``
output (a pod's log); ``nodes.json`` the nodes as the supervisor last saw them (``node_view``);
``driver.log`` a RayJob's driver output as Ray's job API returns it. ``kuberay/token`` is the home's
Ray auth token (mode 0600), which every cluster of the home and its drivers share. Ray keeps its
sessions and unix sockets under ``--temp-dir``, whose path must stay short (a socket path has 107 bytes): under the home when the home's path is short,
else under the system's temp folder, named by the object's uid either way.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path

from millpond.settings import Settings

SOCKET_ROOM = 40  # Ray's session and socket names take ~65 of a unix socket path's 107 bytes


def folder(settings: Settings, uid: str) -> Path:
    return settings.home / "kuberay" / uid


def supervisor_log(settings: Settings, uid: str) -> Path:
    return folder(settings, uid) / "supervisor.log"


def node_log(settings: Settings, uid: str, node: str) -> Path:
    return folder(settings, uid) / "logs" / f"{node}.log"


def nodes_file(settings: Settings, uid: str) -> Path:
    return folder(settings, uid) / "nodes.json"


def driver_log(settings: Settings, uid: str) -> Path:
    return folder(settings, uid) / "driver.log"


def token_file(settings: Settings) -> Path:
    """The home's Ray auth token: every cluster of the home, and its drivers, share it (a user's home)."""
    return settings.home / "kuberay" / "token"


def temp_root(settings: Settings, uid: str) -> Path:
    """The folder of the cluster's nodes' Ray temp dirs (one short subfolder per node)."""
    short = uid.replace("-", "")[:12]
    under_home = settings.home / "ray" / short
    if len(str(under_home)) <= SOCKET_ROOM:
        return under_home
    return Path(tempfile.gettempdir()) / f"mpray-{short}"


def ensure_token(settings: Settings) -> Path:
    """The home's token file, written once (0600, whole or not at all)."""
    path = token_file(settings)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".token-{os.getpid()}")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32))
        try:
            os.link(partial, path)  # the first writer wins; a second keeps the first's token
        except FileExistsError:
            pass
        partial.unlink(missing_ok=True)
    return path

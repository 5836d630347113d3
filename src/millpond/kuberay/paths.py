"""Where a RayCluster or RayJob keeps its files: ``$MILLPOND_HOME/kuberay/UID/`` (a re-created object is
another folder), and its Ray nodes' temp dirs.

``supervisor.log`` is what its supervisor printed; ``logs/NODE.log`` each Ray node's ``ray start``
output (a pod's log); ``nodes.json`` the nodes as the supervisor last saw them (``node_view``);
``driver.log`` a RayJob's driver output as Ray's job API returns it. ``kuberay/token`` is the home's
Ray auth token (mode 0600), which every cluster of the home and its drivers share. Ray keeps its
sessions, logs and unix sockets under ``--temp-dir``, whose path must stay short (a socket path has
107 bytes): ``UID/ray/`` in the home, named to Ray through a short link when the home's path is long.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from pathlib import Path

from millpond.settings import Settings

LINK_PREFIX = "mpray-k"
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
    """The folder of the cluster's nodes' Ray temp dirs (one short subfolder per node), as Ray is told it.

    Its files are under the object's folder in the home (``ray/``), so removing the home removes them;
    when that path is too long for Ray's sockets, Ray is told a short link to it in the system's temp
    folder (``make_temp_root``), which a killed supervisor leaves dangling and the next one removes.
    """
    under_home = folder(settings, uid) / "ray"
    if len(str(under_home)) <= SOCKET_ROOM:
        return under_home
    return Path(tempfile.gettempdir()) / f"{LINK_PREFIX}{uid.replace('-', '')[:12]}"


def make_temp_root(settings: Settings, uid: str) -> Path:
    """``temp_root``, made: the folder under the home, and the short link to it where one is needed."""
    real = folder(settings, uid) / "ray"
    real.mkdir(parents=True, exist_ok=True)
    told = temp_root(settings, uid)
    if told != real:
        if told.is_symlink() and Path(os.readlink(told)) != real:
            told.unlink()
        if not told.is_symlink():
            told.symlink_to(real, target_is_directory=True)
    return told


def remove_temp_root(settings: Settings, uid: str) -> None:
    """The nodes' temp dirs and the short link to them, gone (the nodes have ended)."""
    told = temp_root(settings, uid)
    if told.is_symlink():
        told.unlink(missing_ok=True)
    shutil.rmtree(folder(settings, uid) / "ray", ignore_errors=True)


def sweep_dangling_links() -> None:
    """Remove the short links of clusters whose home is gone (a corpus row's, a test's: killed, then removed)."""
    for link in Path(tempfile.gettempdir()).glob(f"{LINK_PREFIX}*"):
        if link.is_symlink() and not link.exists():
            link.unlink(missing_ok=True)


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


class HomeWatch:
    """Whether the home a supervisor started in is still there: not removed, nor replaced by another folder
    of that name (a corpus row's or a test's home, removed once its processes were killed: a supervisor
    started meanwhile, which nobody saw, must end its nodes and itself rather than run on)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.identity = self._identity()

    def _identity(self) -> tuple[int, int] | None:
        try:
            found = os.stat(self.home)
        except OSError:
            return None
        return found.st_dev, found.st_ino

    def gone(self) -> bool:
        return self.identity is None or self._identity() != self.identity

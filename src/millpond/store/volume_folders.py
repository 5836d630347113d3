"""Named local volumes (PVCs) of a millpond home, one folder per namespace: ``volumes/NAMESPACE/NAME``.

A PersistentVolumeClaim is an object of one namespace, and a pod mounts a claim of its own namespace:
so a task of ``team-a`` whose ``mount_pvc`` names ``data`` gets ``volumes/team-a/data``, never
``team-b``'s. ``find`` is the folder a mounting object of a namespace uses; in single-user mode a name
its namespace lacks is looked up in ``default`` too (where a kfp ``CreatePVC`` of a single-user run and
a claim applied without a namespace put it), as ``store.secrets`` does for Secrets.

A namespace's folder holds the marker ``.namespace``; any other folder right under ``volumes/`` is a
volume of ``default`` as an old home kept it (``volumes/NAME``, or one a user made with ``mkdir``, as the
old "create it with: mkdir -p" line said), and moves to ``volumes/default/NAME`` on first use
(``ensure_layout``). Each step is one rename, so a ``kill -9`` in the middle leaves every volume
readable in its old place or its new one, and the next use goes on: a namespace's folder is made
under a hidden name with its marker, then renamed into place. ``default`` is always the namespace's
folder (one made by ``mkdir -p volumes/default/NAME`` too). Simplification: an old home's volume named
``default`` is taken for that folder (its subfolders become volumes of ``default``); an old volume whose
name ``default`` already holds is left where it is (``leftovers`` names them).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path

from millpond.manifest_envelope import check_name
from millpond.settings import multi_user_setting
from millpond.store.paths import contained_path

DEFAULT_NAMESPACE = "default"
MARKER = ".namespace"  # in each namespace's folder: what tells it from an old home's volume


def ensure_layout(volumes_dir: Path) -> None:
    """Give ``volumes_dir`` the per-namespace layout, moving an old home's volumes into ``default``."""
    volumes_dir = Path(volumes_dir)
    default = volumes_dir / DEFAULT_NAMESPACE
    if default.is_dir() and not any(_is_old_volume(entry) for entry in volumes_dir.iterdir()):
        return
    volumes_dir.mkdir(parents=True, exist_ok=True)
    with open(volumes_dir.with_name(f".{volumes_dir.name}.lock"), "a+") as lock:  # beside it, not a volume
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process moves; the others wait, then find it done
        namespace_folder(volumes_dir, DEFAULT_NAMESPACE)
        for entry in sorted(volumes_dir.iterdir()):
            if _is_old_volume(entry) and not os.path.lexists(default / entry.name):
                os.rename(entry, default / entry.name)


def _is_old_volume(entry: Path) -> bool:
    """A folder right under ``volumes/`` that is no namespace's (no marker): a volume of ``default``."""
    if entry.name.startswith(".") or not entry.is_dir():
        return False
    return entry.is_symlink() or (entry.name != DEFAULT_NAMESPACE and not (entry / MARKER).exists())


def leftovers(volumes_dir: Path) -> list[Path]:
    """Old volumes left where they were because ``default`` already has one of their names."""
    return [entry for entry in sorted(Path(volumes_dir).iterdir()) if _is_old_volume(entry)] \
        if Path(volumes_dir).is_dir() else []


def namespace_folder(volumes_dir: Path, namespace: str) -> Path:
    """The folder of ``namespace``'s volumes, made with its marker in one rename when it is not there."""
    check_name("namespace", namespace)
    folder = Path(volumes_dir) / namespace
    if (folder / MARKER).exists():
        return folder
    if namespace == DEFAULT_NAMESPACE and folder.is_dir() and not folder.is_symlink():
        (folder / MARKER).touch()  # made by ``mkdir -p volumes/default/NAME``
        return folder
    Path(volumes_dir).mkdir(parents=True, exist_ok=True)
    made = Path(tempfile.mkdtemp(prefix=f".{namespace}.", dir=volumes_dir))
    (made / MARKER).touch()
    try:
        os.rename(made, folder)
    except OSError:  # made meanwhile by another process (a folder that is not empty)
        shutil.rmtree(made, ignore_errors=True)
    return folder


def folder(volumes_dir: Path, namespace: str, name: str) -> Path:
    """Where the volume ``name`` of ``namespace`` lives (it may not exist); UserError for a bad name."""
    check_name("namespace", namespace)
    check_name("PVC", name)
    ensure_layout(volumes_dir)
    return contained_path(namespace_folder(volumes_dir, namespace), name, what="PVC name")


def find(volumes_dir: Path, namespace: str, name: str, multi_user: bool | None = None) -> Path:
    """The folder a mount by an object of ``namespace`` uses: its namespace's; in single-user mode
    (``multi_user`` None: MILLPOND_MULTI_USER) ``default``'s when only that one exists."""
    own = folder(volumes_dir, namespace, name)
    if own.is_dir() or namespace == DEFAULT_NAMESPACE or (multi_user_setting() if multi_user is None else multi_user):
        return own
    shared = folder(volumes_dir, DEFAULT_NAMESPACE, name)
    return shared if shared.is_dir() else own

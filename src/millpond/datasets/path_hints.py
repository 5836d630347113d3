"""Where a path a user named sits in a dataset, when it is not where they wrote it.

In Fluid a mount without ``path`` appears at ``/<mount name>``: file ``a.txt`` of mount
``mnist`` is ``/mnist/a.txt`` in the FUSE mount, in a DataLoad's ``target`` and in
``millpond dataset path``. millpond keeps to that one layout rather than guessing: a path
that misses its mount's folder is refused with a hint naming where the file is, so the
path the user learns works everywhere (a guess that worked here would fail in a DataLoad,
and would be ambiguous once two mounts hold the same name).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from millpond.datasets.cache.engine import DatasetCache


@dataclass(frozen=True)
class Elsewhere:
    """``path`` (absolute, as in the FUSE mount) is where the named path sits, under mount ``mount``."""

    path: str
    mount: str
    mount_path: str


def under_mounts(cache: DatasetCache, path: str, *, folder: bool = False) -> list[Elsewhere]:
    """The places ``path`` exists when read under each mount's folder instead of the dataset's root.

    ``folder`` looks for a folder instead of a file. Mounts at the root, and mounts whose folder
    ``path`` already starts with, are not looked at: the path as written already went there.
    """
    relative = posixpath.normpath("/" + path).strip("/")
    found: list[Elsewhere] = []
    for mount in cache.config.mounts:
        if not mount.path or relative == mount.path or relative.startswith(mount.path + "/"):
            continue
        candidate = f"{mount.path}/{relative}" if relative else mount.path
        exists = cache.is_folder(candidate) if folder else cache.stat(candidate) is not None
        if exists:
            found.append(Elsewhere("/" + candidate, mount.name, "/" + mount.path))
    return found


def hint(found: list[Elsewhere]) -> str:
    """``; did you mean /data/a.txt? (mount "data" sits at /data, as in Fluid)``, or "" when nothing was found."""
    if not found:
        return ""
    if len(found) == 1:
        place = found[0]
        return f"; did you mean {place.path}? (mount {place.mount!r} sits at {place.mount_path}, as in Fluid)"
    return "; it is under more than one mount: " + ", ".join(place.path for place in found)

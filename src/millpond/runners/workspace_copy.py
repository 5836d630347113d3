"""A task's workspace as plain values, to carry it to a Ray node and back.

A lightweight task's workspace is a dozen small files in a deep tree (its work dir, its private
tmp, the remote mirror ``remote/s3/BUCKET/…/executor_output.json``). A tar archive of it cost
~2 ms to make and ~5 ms to extract per task on a loaded 2-core machine — tarfile builds headers
member by member, and its ``data`` filter resolves every member's real path — which was a
quarter of a Ray task's node-side cost. Here a workspace is a list of entries (path, kind, mode,
bytes) that Ray pickles as it pickles the rest of the task, and writing it back is a ``mkdir`` or
one ``open`` per entry.

The receiving side trusts nothing in the list: a path must be relative, normalised and free of
``..``; files are opened with ``O_NOFOLLOW``; links are made last (no entry is ever written
through one) and only when their target stays inside the folder; modes keep permission bits
only, the owner always able to read and write (as tarfile's ``data`` filter does).
"""

from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass
from pathlib import Path

from millpond.errors import MillpondError

DIR, FILE, LINK = "d", "f", "l"


class WorkspaceCopyError(MillpondError):
    """A workspace list names a path outside its folder, or a link that leaves it."""


@dataclass(frozen=True)
class Entry:
    path: str  # relative, POSIX separators
    kind: str  # DIR, FILE or LINK
    mode: int  # permission bits
    data: bytes = b""  # a file's content, a link's target


Workspace = list[Entry]


def size(workspace: Workspace) -> int:
    """The bytes the entries carry (what crosses Ray's object store, near enough)."""
    return sum(len(entry.data) + len(entry.path) for entry in workspace)


def copy_of(folder: Path) -> Workspace:
    """Every folder, file and link under ``folder`` (parents before children); other kinds (sockets,
    fifos) are left out, as a tar archive of a task's folder would fail on them."""
    entries: Workspace = []
    root = str(folder)
    for current, dirs, files in os.walk(root):
        relative = os.path.relpath(current, root)
        for name in sorted(dirs) + sorted(files):
            full = os.path.join(current, name)
            path = name if relative == "." else f"{relative}/{name}"
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                entries.append(Entry(path, LINK, 0o777, os.fsencode(os.readlink(full))))
            elif stat.S_ISDIR(info.st_mode):
                entries.append(Entry(path, DIR, stat.S_IMODE(info.st_mode)))
            elif stat.S_ISREG(info.st_mode):
                with open(full, "rb") as source:
                    entries.append(Entry(path, FILE, stat.S_IMODE(info.st_mode), source.read()))
    return entries


def _checked(path: str) -> str:
    normal = posixpath.normpath(path)
    if not path or path.startswith("/") or normal != path or normal.split("/")[0] == "..":
        raise WorkspaceCopyError(f"a workspace entry {path!r} is not a plain relative path")
    return normal


def write(workspace: Workspace, folder: Path) -> None:
    """Write ``workspace`` under ``folder`` (made if missing), over what is there."""
    folder.mkdir(parents=True, exist_ok=True)
    root = str(folder)
    links = []
    for entry in workspace:
        path = _checked(entry.path)
        full = os.path.join(root, path)
        if entry.kind == DIR:
            try:
                os.mkdir(full, (entry.mode & 0o777) | 0o700)
            except FileExistsError:
                if not os.path.isdir(full) or os.path.islink(full):
                    raise WorkspaceCopyError(f"the workspace entry {path!r} is a folder over a file") from None
        elif entry.kind == FILE:
            descriptor = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(descriptor, "wb") as out:
                out.write(entry.data)
                os.fchmod(out.fileno(), (entry.mode & 0o777) | 0o600)
        elif entry.kind == LINK:
            links.append((path, os.fsdecode(entry.data)))
        else:
            raise WorkspaceCopyError(f"the workspace entry {path!r} is of an unknown kind {entry.kind!r}")
    for path, target in links:
        landing = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        if target.startswith("/") or landing.split("/")[0] == "..":
            raise WorkspaceCopyError(f"the link {path!r} points outside its workspace ({target})")
        full = os.path.join(root, path)
        if os.path.lexists(full):
            os.unlink(full)
        os.symlink(target, full)

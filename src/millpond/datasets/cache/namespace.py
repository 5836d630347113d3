"""The dataset's file tree in memory: mounts placed at their paths, folders derived from keys.

Object stores have no folders; the tree is built from the listed keys so that ``ls`` and
``os.walk`` over a mount behave as on a disk. Lookups are dictionary hits (no SQL) because
``stat`` runs for every path a FUSE reader touches.
"""

from __future__ import annotations

import bisect
import posixpath
from dataclasses import dataclass, field

from millpond.datasets.cache.index import FileMeta


@dataclass
class Folder:
    """A folder: its children's names, sorted (the order a training loop walks them in)."""

    names: list[str] = field(default_factory=list)
    mtime: float = 0.0


class Namespace:
    """Files by dataset path, and the folders that contain them."""

    def __init__(self, files: dict[str, FileMeta], mount_paths: list[str]) -> None:
        self.files = files
        self.folders: dict[str, Folder] = {"": Folder()}
        children: dict[str, set[str]] = {"": set()}
        for mount_path in mount_paths:
            self._add_parents(mount_path, children, is_folder=True)
        for path, meta in files.items():
            self._add_parents(path, children, is_folder=False)
            parent = posixpath.dirname(path)
            folder = self.folders[parent]
            folder.mtime = max(folder.mtime, meta.mtime)
        for path, names in children.items():
            self.folders[path].names = sorted(names)

    def _add_parents(self, path: str, children: dict[str, set[str]], is_folder: bool) -> None:
        if not path:
            return
        if is_folder and path not in self.folders:
            self.folders[path] = Folder()
            children.setdefault(path, set())
        parent, name = posixpath.split(path)
        children.setdefault(parent, set()).add(name)
        if parent not in self.folders:
            self.folders[parent] = Folder()
            self._add_parents(parent, children, is_folder=True)

    def is_folder(self, path: str) -> bool:
        return path in self.folders

    def listdir(self, path: str) -> list[str] | None:
        folder = self.folders.get(path)
        return folder.names if folder is not None else None

    def following(self, path: str, count: int) -> list[str]:
        """Up to ``count`` files after ``path`` in its folder's order: what a sequential reader opens next."""
        parent, name = posixpath.split(path)
        folder = self.folders.get(parent)
        if folder is None:
            return []
        start = bisect.bisect_right(folder.names, name)
        found = []
        for sibling in folder.names[start:]:
            full = f"{parent}/{sibling}" if parent else sibling
            if full in self.files:
                found.append(full)
                if len(found) == count:
                    break
        return found

    def under(self, path: str) -> list[str]:
        """Every file at or below ``path`` ('' for the whole dataset), in path order."""
        if path in self.files:
            return [path]
        prefix = path + "/" if path else ""
        return sorted(p for p in self.files if p.startswith(prefix))

"""A task's private folders outside its workspace, carried to the Ray node one way.

Besides its workspace (which travels there and back), a task may need folders the engine made
for it alone: its secret and config-map files and its empty dirs (``ProcessSpec.carried``).
Each travels to the node as a copy (``runners.workspace_copy``) beside the task, is unpacked in the node's own folder
(an engine folder under ``/dev/shm`` — an in-memory emptyDir — lands in the node's ``/dev/shm``),
is shown to the process where the engine's folder would have been, and is removed when the task
ends: nothing of it comes back, as nothing of a pod's secret volume or emptyDir outlives the pod.

The copies hold secret values in clear while they travel, as the task's environment does:
they are in the Ray task's arguments (the owner's memory and, above Ray's inline limit, the
object store), never in a log or an error message. Ray's TLS (``RAY_USE_TLS``) covers the wire.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from millpond.runners.workspace_copy import Workspace, copy_of, write

SHM = Path("/dev/shm")


def carried_copies(folders: list[Path]) -> list[tuple[str, Workspace]]:
    """Each folder (an engine path) with its copy, for the node."""
    return [(str(folder.resolve()), copy_of(folder)) for folder in folders]


def unpack_carried(
    carried: list[tuple[str, Workspace]], base: Path, key: str
) -> tuple[list[tuple[str, str]], list[Path]]:
    """Unpack the task's carried folders on this node: (engine path -> node path) pairs for the task's
    paths, and the folders to remove when it ends. Private folders (0700), as the engine's were."""
    mapping: list[tuple[str, str]] = []
    made: list[Path] = []
    for index, (engine_path, copy) in enumerate(carried):
        if Path(engine_path).is_relative_to(SHM) and SHM.is_dir() and os.access(SHM, os.W_OK):
            folder = Path(tempfile.mkdtemp(prefix=f"millpond-node-{key}-", dir=SHM))
        else:
            folder = base / "tasks" / f"{key}.carried" / str(index)
            folder.mkdir(parents=True, mode=0o700)
        made.append(folder)
        write(copy, folder)
        mapping.append((engine_path.rstrip("/"), str(folder)))
    return mapping, made


def remove_carried(folders: list[Path]) -> None:
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
        parent = folder.parent
        if parent.name.endswith(".carried"):
            shutil.rmtree(parent, ignore_errors=True)

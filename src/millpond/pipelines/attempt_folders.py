"""The folders a run's task attempts work in, made once and emptied between attempts, never removed per task.

Each attempt of a container task needs a private folder under the home's staging folder: its
``outputs/parameters``, its ``work`` dir (the cwd), its ``tmp`` (TMPDIR), and, for some tasks,
staged artifacts, a remote mirror or Argo paths. Making and removing five folders per task cost
more than the task: on the ext4 this project runs on (mounted with ``discard``) one ``rmdir``
takes ~2.4 ms, so removing an attempt's folders took 10-15 ms of every step of a chain, more
than the forked task itself (~6 ms). So a run keeps its attempt folders: an attempt takes an
empty one (``take``) and gives it back (``give_back``), which removes what the task left in it
(a file is a cheap unlink) but keeps the fixed skeleton. The run's end removes them all
(``close``).

A folder is named ``run-<run id>-<engine token>-<n>``: a resumed run's engine never takes a
folder a killed engine left half full, and deleting a run removes what any of its engines left
(``leftovers``: deleting or resuming a run).
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path

SKELETON = ("outputs", "outputs/parameters", "work", "tmp")  # what every attempt finds, made once per folder


def run_prefix(run_id: str) -> str:
    """The start of the name of every attempt folder of ``run_id``, whichever engine made it."""
    return f"run-{run_id}-"


def leftovers(staging_dir: Path, run_id: str, task_ids: Iterable[str]) -> list[Path]:
    """What an engine killed mid-run left in staging for ``run_id``: its attempt folders, and the per-task
    folders named after ``task_ids`` (a platform's scratch folder, ``policies.platform``)."""
    patterns = [f"{run_prefix(run_id)}*", *(f"{task_id}-*" for task_id in task_ids)]
    return [folder for pattern in patterns for folder in staging_dir.glob(pattern)]


class AttemptFolders:
    """One run's attempt folders under ``staging_dir``: as many as attempts ever ran at once."""

    def __init__(self, staging_dir: Path, run_id: str) -> None:
        self.staging_dir = staging_dir
        self._prefix = f"{run_prefix(run_id)}{uuid.uuid4().hex[:8]}-"
        self._lock = threading.Lock()
        self._free: list[Path] = []
        self._made: list[Path] = []
        self._named = 0  # folders named so far: a removed folder's name is never given again

    def take(self) -> Path:
        """An empty attempt folder with its skeleton, this attempt's alone until it is given back."""
        with self._lock:
            if self._free:
                return self._free.pop()
            folder = self.staging_dir / f"{self._prefix}{self._named}"
            self._named += 1
            self._made.append(folder)
        for part in SKELETON:
            (folder / part).mkdir(parents=True)
        return folder

    def give_back(self, folder: Path) -> None:
        """Empty ``folder`` to its skeleton for the next attempt; one that cannot be emptied is removed."""
        try:
            _empty(folder, "")
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)
            with self._lock:
                self._made.remove(folder)
            return
        with self._lock:
            self._free.append(folder)

    def close(self) -> None:
        """Remove every folder (the run ended; no attempt holds one)."""
        with self._lock:
            made, self._made, self._free = self._made, [], []
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)


def _empty(folder: Path, relative: str) -> None:
    """Remove everything under ``folder`` but the skeleton's folders (``relative``: its place in the attempt)."""
    with os.scandir(folder) as entries:
        for entry in entries:
            inside = f"{relative}{entry.name}"
            if inside in SKELETON and entry.is_dir(follow_symlinks=False):
                _empty(Path(entry.path), inside + "/")
            elif entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
    for part in SKELETON:  # the task may have removed one of them
        if part.startswith(relative) and "/" not in part[len(relative):]:
            (folder / part[len(relative):]).mkdir(exist_ok=True)

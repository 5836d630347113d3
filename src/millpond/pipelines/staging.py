"""Where a task writes its output artifacts, and how they reach their final URIs atomically.

Every task owns one output folder, ``<pipeline root>/<pipeline>/<run id>/<task path>``; its
output artifacts, its pythonic ``dsl.get_uri()`` artifacts and its ``executor_output.json``
live there, as on the KFP backend. The task never writes into the real folder:

- local root, sandbox available: a staging folder is bound over the output folder inside
  the task's mount namespace; after success each entry is renamed into place;
- local root, no sandbox: the task writes in place, and a failure removes what it wrote;
- remote root (s3://, gs://, minio://): a local mirror is bound at ``/s3`` (``/gcs``,
  ``/minio``), where kfp looks for remote URIs; after success each entry is uploaded.

Remote input artifacts are downloaded into the same mirror before the task starts.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from millpond.errors import TaskFailure
from millpond.pipelines.placeholders import REMOTE_MOUNTS, local_path
from millpond.runners.base import Bind
from millpond.runners.sandbox import sandbox_problem
from millpond.store import artifacts as store
from millpond.store.paths import contained_path

EXECUTOR_OUTPUT = "executor_output.json"


class StagingError(TaskFailure):
    """Outputs cannot be staged or published; the task fails with this message."""


class OutputStaging:
    def __init__(
        self, task_prefix: str, attempt_dir: Path, has_outputs: bool, input_uris: list[str], fetch_here: bool = True
    ) -> None:
        """``fetch_here=False``: remote inputs are not downloaded but listed in ``fetches``, for a runner
        that starts the task on another machine to fetch them there (from the root, not through here)."""
        self.task_prefix = task_prefix
        self.binds: list[Bind] = []
        self.fetches: list[tuple[str, Path]] = []
        self._published: list[str] = []
        self._mirror = attempt_dir / "remote"
        mounts: set[str] = set()
        for uri in input_uris:
            if store.is_remote(uri):
                target = contained_path(self._mirror, local_path(uri).lstrip("/"), what="input artifact URI")
                if fetch_here:
                    store.download(uri, target)
                else:
                    self.fetches.append((uri, target))
                mounts.add(local_path(uri).split("/")[1])
        if store.is_remote(task_prefix):
            self.mode = "remote"
            self.task_dir = local_path(task_prefix)  # as the task sees it
            self.host_dir = contained_path(self._mirror, self.task_dir.lstrip("/"), what="output folder")
            self.host_dir.mkdir(parents=True, exist_ok=True)
            mounts.add(self.task_dir.split("/")[1])
        elif not has_outputs:
            self.mode = "none"
            self.task_dir = str(attempt_dir / "outputs")
            self.host_dir = attempt_dir / "outputs"
        else:
            self.task_dir = task_prefix
            final = Path(task_prefix)
            final.mkdir(parents=True, exist_ok=True)
            if sandbox_problem() is None:
                self.mode = "staged"
                self.host_dir = attempt_dir / "artifacts"
                self.host_dir.mkdir()
                self.binds.append(Bind(self.host_dir, str(final)))
            else:
                self.mode = "direct"
                self.host_dir = final
                self._clear(final)
        for mount in sorted(mounts):
            folder = self._mirror / mount
            folder.mkdir(parents=True, exist_ok=True)
            self.binds.append(Bind(folder, f"/{mount}"))
        if mounts and sandbox_problem():
            raise StagingError(
                f"remote artifacts ({', '.join(REMOTE_MOUNTS)}) need a private mount namespace: {sandbox_problem()}"
            )

    @property
    def task_output_file(self) -> str:
        """``executor_output.json`` as the task sees it; its folder is kfp's CONTAINER_TASK_ROOT."""
        return f"{self.task_dir}/{EXECUTOR_OUTPUT}"

    @property
    def host_output_file(self) -> Path:
        return self.host_dir / EXECUTOR_OUTPUT

    def host_path(self, uri: str) -> Path:
        """Where a task's write to ``uri`` lands on this machine before publishing."""
        prefix = self.task_prefix.rstrip("/") + "/"
        if not uri.startswith(prefix):
            raise StagingError(f"output artifact URI {uri} is outside the task's output folder {self.task_prefix}")
        return contained_path(self.host_dir, uri[len(prefix):], what="output artifact URI")

    def host_input(self, uri: str) -> Path:
        """Where an input artifact's file is on this machine: its path, or its remote copy in the mirror."""
        if store.is_remote(uri):
            return contained_path(self._mirror, local_path(uri).lstrip("/"), what="input artifact URI")
        return Path(uri)

    def adopt(self, source: Path, uri: str) -> None:
        """Take a file or folder the task wrote at a custom path as the artifact at ``uri``."""
        if not source.exists():
            raise StagingError(f"custom path {source} of artifact {uri} does not exist")
        target = self.host_path(uri)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target)

    def publish(self) -> None:
        """Move or upload everything the task wrote into its output folder (but its executor output)."""
        if self.mode == "none":
            return
        self.host_output_file.unlink(missing_ok=True)
        if self.mode == "direct":
            return
        for entry in sorted(self.host_dir.iterdir()):
            if self.mode == "staged":
                store.move_into_place(entry, contained_path(self.task_prefix, entry.name, what="output"))
            else:
                uri = f"{self.task_prefix}/{entry.name}"
                self._published.append(uri)
                store.upload(entry, uri)

    def discard(self) -> None:
        """After a failure: nothing of the task's may remain under its final URIs."""
        if self.mode == "direct":
            self._clear(self.host_dir)
        for uri in self._published:  # a later upload failed: take back the earlier ones
            try:
                store.remove_uri(uri)
            except store.StorageError:
                pass  # best effort: the failure that brought us here is the one to report
        self._published.clear()

    @staticmethod
    def _clear(folder: Path) -> None:
        for entry in folder.iterdir():
            store.remove_uri(str(entry))


def artifact_uris(executor_input: dict[str, Any]) -> list[str]:
    return [
        str(item.get("uri", ""))
        for entry in executor_input.get("inputs", {}).get("artifacts", {}).values()
        for item in entry.get("artifacts", [])
    ]

"""Make a kfp 1.x step's fixed paths real in its sandbox, as Argo's executor does in a pod.

Each path of the step's ``argoPaths`` (``paths``) gets a place, decided per attempt:

- under a volume the task mounts (a PVC, an emptyDir, the workspace): the volume itself,
  reached through the bind's host folder: the step writes where its other steps read;
- else, when the path's folder does not exist on this machine (``/tmp/outputs/X``): a fresh
  staging folder of the attempt bound at that folder (one per folder; nested ones share it);
- else (``/output.txt``, ``/etc/passwd``): a staging file of the attempt bound at the path
  itself, created empty with mtime 0, so "did the step write it" is its mtime.

Input artifacts are copied into their place before the step starts; after it succeeded,
output parameters are read back with Argo's rules (``scopes.output_parameter``) and output
artifacts copied out. Every read and write on the host walks the path from a folder of ours
with ``O_NOFOLLOW``: a step that leaves a symlink (``data -> /etc/shadow``) fails, naming it,
and no host file outside the task's folders is read or written. The staging lives in the
attempt folder, which the launcher removes however the attempt ends (a kill, a cancel, a retry).
"""

from __future__ import annotations

import os
import posixpath
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from millpond.errors import TaskFailure
from millpond.pipelines.argo.model import OutputParameter
from millpond.pipelines.argo.paths import ArgoPaths, OutputPath
from millpond.pipelines.argo.scopes import output_parameter
from millpond.runners.base import Bind
from millpond.runners.sandbox import tmp_entries

MAX_PARAMETER_BYTES = 256 * 1024  # Argo's own limit on an output parameter's size
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_DIRECTORY = _READ | os.O_DIRECTORY


class PlacementError(TaskFailure):
    """A path of the step cannot be placed or read back safely; the task fails with this line."""


@dataclass(frozen=True)
class _Place:
    """Where ``path`` lives on the host: ``root`` (a folder of ours or a volume's) and the path below it.

    ``stamp``: a staging file bound at the path itself (written = its mtime moved off 0).
    """

    root: Path
    relative: str
    stamp: bool = False
    read_only: bool = False
    mounted: bool = False  # a volume's folder (not the attempt's own)


class Placement:
    """The binds, input copies and output reads of one attempt of one kfp 1.x step."""

    def __init__(self, paths: ArgoPaths, folder: Path, mounts: list[Bind], sandbox_problem: str | None,
                 keep: tuple[Path, ...] = (), exact_stamps: bool = True) -> None:
        """``folder``: the attempt's own (removed with it); ``mounts``: the task's other binds (its volumes);
        ``keep``: host paths the step sees as they are when its ``/tmp`` becomes private (``sandbox.wrap``);
        ``exact_stamps``: False where the attempt folder comes back from a Ray node without its files'
        mtimes: an empty staging file then counts as not written."""
        self.folder = folder
        self.exact_stamps = exact_stamps
        self.binds: list[Bind] = []
        self.outputs = [o for o in paths.outputs if not (o.implicit and sandbox_problem)]
        self.inputs = list(paths.inputs)
        self._places: dict[str, _Place] = {}
        wanted = [o.path for o in self.outputs if o.path is not None] + [i.path for i in self.inputs]
        if wanted and sandbox_problem:
            raise PlacementError(f"the step's Argo path {wanted[0]} needs a private mount namespace: {sandbox_problem}")
        mounted = sorted(mounts, key=lambda b: len(b.target), reverse=True)
        folders: dict[str, Path] = {}  # a bound staging folder's target -> its host folder
        for path in sorted(set(wanted), key=len):
            mount = next((m for m in mounted if _under(path, m.target)), None)
            if mount is not None:
                self._places[path] = _Place(Path(mount.source), _below(path, mount.target), read_only=mount.read_only,
                                            mounted=True)
                continue
            shared = next((entry for entry in tmp_entries(list(keep)) if _under(path, entry)), None)
            if shared is not None:  # its mount point would be made in that host folder, shown as it is
                raise PlacementError(f"the step's Argo path {path} lies in {shared}, a folder of this machine "
                                     "the step sees as it is (millpond's own): a kfp 1.x path may not")
            parent = posixpath.dirname(path)
            outer = next((t for t in folders if _under(parent, t)), None)
            if outer is not None:
                self._places[path] = _Place(folders[outer], _below(path, outer))
            elif not os.path.lexists(parent):
                host = folder / f"dir-{len(folders)}"
                host.mkdir(parents=True)
                folders[parent] = host
                self.binds.append(Bind(host, parent))
                self._places[path] = _Place(host, posixpath.basename(path))
            else:
                host = folder / f"file-{len(self._places)}"
                host.mkdir(parents=True)
                self._places[path] = _Place(host, "file", stamp=True)
        targets = [b.target for b in (*mounts, *self.binds)] + [p for p, place in self._places.items() if place.stamp]
        if any(_under(t, "/tmp") and t != "/tmp" for t in targets) and os.path.isdir("/tmp"):
            # A pod's own /tmp: a new mount point under it (/tmp/outputs/X) must not reach the host's, and
            # re-showing every host entry there fails on a busy host (bwrap takes at most 9000 arguments).
            # The sandbox still shows the host entries holding the task's own folders (``sandbox.wrap``).
            (folder / "tmp").mkdir(parents=True, exist_ok=True)
            self.binds.insert(0, Bind(folder / "tmp", "/tmp"))

    # --- before the step ----------------------------------------------------------------
    def prepare(self, sources: dict[str, Path], render: Callable[[str], str],
                fetched_there: frozenset[str] = frozenset()) -> None:
        """Copy each input artifact (``sources``: input name -> host file or folder) or raw text to its path,
        and bind the staging files (call once, before the step). ``fetched_there``: inputs a Ray node
        downloads into the attempt's own mirror before the step: that copy is bound at the path there."""
        bound: set[str] = set()
        for item in self.inputs:
            place = self._places[item.path]
            if item.name in fetched_there and item.raw is None:
                if place.mounted:
                    raise PlacementError(f"input artifact {item.name!r} at {item.path}: a volume's file cannot be "
                                         "placed from a Ray node's download")
                self.binds.append(Bind(sources[item.name], item.path))
                bound.add(item.path)
                continue
            if place.read_only:
                raise PlacementError(f"input artifact at {item.path}: the volume mounted there is read-only")
            with _walk(place.root, place.relative, create=True) as (parent, name):
                _remove(parent, name)
                if item.raw is not None:
                    _write(parent, name, render(item.raw).encode())
                    continue
                source = sources.get(item.name or "")
                if source is None or not source.exists():
                    raise PlacementError(f"input artifact {item.name!r} has no file to place at {item.path}")
                if source.is_dir():
                    shutil.copytree(source, f"/proc/self/fd/{parent}/{name}", symlinks=True)
                else:
                    with open(source, "rb") as handle:
                        _write(parent, name, handle.read())
        for path, place in self._places.items():
            if place.stamp and path not in bound:
                file = place.root / place.relative
                if not file.exists():  # an output's: empty and dated 0, so an untouched one reads as not written
                    file.touch()
                    os.utime(file, (0, 0))
                self.binds.append(Bind(file, path))

    # --- after the step -----------------------------------------------------------------
    def parameters(self, render: Callable[[str], str]) -> dict[str, str]:
        """The output parameters as Argo saves them: the file's text less one newline, the default, or the value."""
        values: dict[str, str] = {}
        for output in self.outputs:
            if output.kind != "parameter":
                continue
            if output.path is None:
                values[output.name] = render(output.value or "")
                continue
            data = self._read(output)
            text = None if data is None else data.decode("utf-8", errors="replace")
            model = OutputParameter(name=output.name, path=output.path, default=output.default)
            values[output.name] = output_parameter(model, text)
        return values

    def artifacts(self, target: Callable[[str], Path]) -> list[str]:
        """Copy each output artifact to ``target(name)``; the names of those left out (optional, not written)."""
        missing: list[str] = []
        for output in self.outputs:
            if output.kind != "artifact" or output.path is None:
                continue
            place = self._places[output.path]
            if not self._written(place):
                if output.optional:
                    missing.append(output.name)
                    continue
                raise PlacementError(f"output artifact {output.name!r}: the step left no file at {output.path}")
            destination = target(output.name)
            destination.parent.mkdir(parents=True, exist_ok=True)
            try:
                with _walk(place.root, place.relative) as (parent, name):
                    mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
                    if stat.S_ISDIR(mode):
                        shutil.copytree(f"/proc/self/fd/{parent}/{name}", destination, symlinks=True,
                                        dirs_exist_ok=True)
                        _check_links(destination, output)
                    else:
                        destination.write_bytes(_read_file(parent, name, output, limit=None))
            except FileNotFoundError:
                if not output.optional:
                    raise PlacementError(f"output artifact {output.name!r}: the step left no file at "
                                         f"{output.path}") from None
                missing.append(output.name)
        return missing

    def _written(self, place: _Place) -> bool:
        if not place.stamp:
            return True  # a missing file is found when it is opened
        info = os.stat(place.root / place.relative, follow_symlinks=False)
        return info.st_size > 0 or (self.exact_stamps and info.st_mtime != 0)

    def _read(self, output: OutputPath) -> bytes | None:
        place = self._places[output.path or ""]
        if not self._written(place):
            return None
        try:
            with _walk(place.root, place.relative) as (parent, name):
                os.stat(name, dir_fd=parent, follow_symlinks=False)
                return _read_file(parent, name, output, limit=MAX_PARAMETER_BYTES)
        except FileNotFoundError:
            return None


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _below(path: str, folder: str) -> str:
    return path[len(folder.rstrip("/")):].lstrip("/")


@contextmanager
def _walk(root: Path, relative: str, create: bool = False) -> Iterator[tuple[int, str]]:
    """An open descriptor of ``relative``'s folder under ``root`` and its last name, never following a link.

    ``create``: missing folders are made (as Argo's executor makes an input's); else a missing
    one is FileNotFoundError (the step wrote nothing there). The path's own
    folder being the root itself (``relative`` empty) is refused: a volume is no file.
    """
    parts = [p for p in relative.split("/") if p]
    if not parts:
        raise PlacementError(f"a step path is the mount point {root.name!r} itself, not a file in it")
    descriptor = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=descriptor)
                except FileExistsError:
                    pass
            try:
                child = os.open(part, _DIRECTORY, dir_fd=descriptor)
            except FileNotFoundError:
                raise  # no such folder: the step wrote nothing there
            except OSError as exc:
                raise PlacementError(f"step path {relative!r}: {part!r} is a symlink or not a folder "
                                     f"({exc.strerror})") from None
            os.close(descriptor)
            descriptor = child
        yield descriptor, parts[-1]
    finally:
        if descriptor >= 0:
            os.close(descriptor)


def _read_file(parent: int, name: str, output: OutputPath, limit: int | None) -> bytes:
    try:
        descriptor = os.open(name, _READ, dir_fd=parent)
    except OSError as exc:
        raise PlacementError(f"output {output.name!r} at {output.path}: not a plain file ({exc.strerror})") from None
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise PlacementError(f"output {output.name!r} at {output.path}: not a plain file")
        data = handle.read(limit + 1 if limit is not None else -1)
    if limit is not None and len(data) > limit:
        raise PlacementError(f"output parameter {output.name!r} at {output.path} is larger than {limit} bytes")
    return data


def _write(parent: int, name: str, data: bytes) -> None:
    descriptor = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=parent)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)


def _remove(parent: int, name: str) -> None:
    """Clear the place of an input (what an earlier run left on a volume), never following a link."""
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(name, dir_fd=parent)
    else:
        os.unlink(name, dir_fd=parent)


def _check_links(folder: Path, output: OutputPath) -> None:
    """A folder artifact may hold links within itself only: one leading out would be read by its readers."""
    root = os.path.normpath(folder)
    for current, names, files in os.walk(folder):
        for entry in (*names, *files):
            full = os.path.join(current, entry)
            if os.path.islink(full):
                target = os.path.normpath(os.path.join(current, os.readlink(full)))
                if not (target == root or target.startswith(root + "/")):
                    raise PlacementError(f"output artifact {output.name!r}: {os.path.relpath(full, folder)} "
                                         "is a symlink leading out of it")

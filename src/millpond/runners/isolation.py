"""Isolation between namespaces on one machine: what a process's sandbox shows in multi-user mode.

On a team's server (``millpond server --multi-user``) every process of a namespace — a pipeline
task, a training job's instance, a DataProcess script, a model replica — runs the user's code. All
of them run as the one OS user the server runs as, so file modes cannot keep namespace A's task out
of namespace B's files, and per-namespace uids would need root (or subordinate-uid setup) to map and
to own every file the engine writes for a task. The mechanism chosen is **what the sandbox shows**,
with bubblewrap, as a pod's mount and PID namespaces do:

- the host's filesystem stays visible (its programs, libraries, devices), but the millpond home —
  the database, the server's TLS key and token, every namespace's artifacts, logs, staging, volumes,
  secrets, dataset caches and FUSE mounts — is covered by an empty tmpfs, as is every other folder
  the caller names (a run's local pipeline root, shared by all runs) and the memory tier of the
  dataset caches (``/dev/shm/millpond``);
- only the process's own folders are bound back at their paths: its working folder and workspace
  (staged inputs, outputs, secret files), the input artifacts it reads (read-only), the volumes and
  dataset mounts its namespace's spec names (the caller's binds), the virtualenvs on its ``PATH``
  and millpond's own interpreter's environment (read-only: a task is often run with it);
- ``/tmp`` is a private tmpfs; ``/proc`` is a fresh one in a new PID namespace, so no other
  process is visible and none can be signalled; the container runtimes' sockets are masked (a
  task reaching them would start a container of its own with any mount); all capabilities are
  dropped (root in the sandbox cannot unmount the covers);
- the environment carries nothing of the server's (``environment.inherited_environment``).

In containers (``in_image``) the runtime already gives a private PID namespace and shows only the
explicit mounts; in multi-user mode the log folder is not among them. Where bubblewrap cannot make
these namespaces, a multi-user server refuses to start the process and says what to install: it
never runs a namespace's code on the bare host.

Simplification: an explicit ``tieredstore`` path other than ``/dev/shm`` is not covered (a dataset
cache an administrator put there is every namespace's); name such folders in MILLPOND_HIDDEN_ROOTS.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from millpond.errors import UserError
from millpond.runners.base import Bind
from millpond.settings import Settings, load_settings

INSTALL_HINT = "apt-get install -y bubblewrap"
# More folders to cover in every confined process (separated by ':'): dataset tiers at explicit paths.
HIDDEN_ROOTS_ENV = "MILLPOND_HIDDEN_ROOTS"
MEMORY_TIER = Path("/dev/shm/millpond")  # datasets.config.tiers_of: a MEM level's default folder
# The container runtimes' API sockets: root in the sandbox could start a container mounting anything.
RUNTIME_SOCKETS = ("/run/docker.sock", "/var/run/docker.sock", "/run/podman/podman.sock",
                   "/run/containerd/containerd.sock", "/run/crio/crio.sock")


@dataclass(frozen=True)
class Confinement:
    """What a confined process sees: ``hidden`` folders covered, ``shown`` ones (its own) bound back."""

    hidden: tuple[Path, ...]
    shown: tuple[Bind, ...]


def required(settings: Settings | None = None) -> bool:
    """Whether processes must be confined to their namespace's folders (multi-user mode)."""
    return (settings or load_settings()).multi_user


@functools.cache
def isolation_problem() -> str | None:
    """None when bubblewrap can make mount and PID namespaces here, else one line saying why not."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return f"bubblewrap (bwrap) is not installed; install it: {INSTALL_HINT}"
    probe = subprocess.run([bwrap, "--dev-bind", "/", "/", "--unshare-user-try", "--unshare-pid", "--proc", "/proc",
                            "--", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["unknown error"])[-1]
        return (f"bubblewrap cannot make mount and PID namespaces here (bwrap: {reason}); allow unprivileged user "
                "namespaces (sysctl kernel.unprivileged_userns_clone=1) or run the server where they are allowed")
    return None


def refusal() -> str:
    """Why a multi-user server refuses to start a namespace's process (call only when ``isolation_problem``)."""
    return (f"multi-user mode runs every namespace's processes isolated from the others, and cannot here: "
            f"{isolation_problem()}")


def hidden_roots(settings: Settings, extra: Iterable[Path] = ()) -> tuple[Path, ...]:
    """The folders covered in every confined process: the home, the memory tier of dataset caches, those of
    MILLPOND_HIDDEN_ROOTS, and ``extra`` (a run's local pipeline root)."""
    named = [Path(p) for p in os.environ.get(HIDDEN_ROOTS_ENV, "").split(os.pathsep) if p]
    folders = [settings.home, MEMORY_TIER, *named, *extra]
    kept: list[Path] = []
    for folder in sorted({Path(os.path.realpath(f)) for f in folders if str(f)}, key=lambda p: len(p.parts)):
        if folder != Path("/") and not any(k == folder or k in folder.parents for k in kept):
            kept.append(folder)
    return tuple(kept)


def confinement(cwd: Path, path: str | None, own: Iterable[Path] = (), hidden: Iterable[Path] = (),
                settings: Settings | None = None) -> Confinement:
    """What a process working in ``cwd`` with ``PATH`` = ``path`` sees: its ``own`` folders (read-write) and
    the virtualenvs on its PATH (read-only) bound back over the covers."""
    covered = hidden_roots(settings or load_settings(), hidden)
    private = (*covered, Path("/tmp"))

    def under_cover(folder: Path) -> bool:
        return any(folder == root or root in folder.parents for root in private)

    shown: dict[str, Bind] = {}
    for folder in (cwd, *own):
        real = Path(os.path.realpath(folder))
        if under_cover(real) and real.exists():
            shown[str(real)] = Bind(real, str(real))
    for entry in (path or "").split(os.pathsep):
        if not entry.startswith("/"):
            continue
        real = Path(os.path.realpath(entry))
        folder = real.parent if real.name == "bin" and (real.parent / "pyvenv.cfg").exists() else real
        if under_cover(folder) and folder.exists() and str(folder) not in shown:
            shown[str(folder)] = Bind(folder, str(folder), read_only=True)
    for prefix in {sys.prefix, sys.base_prefix}:  # millpond's own interpreter, which tasks are often run with
        folder = Path(os.path.realpath(prefix))
        if under_cover(folder) and folder.exists() and str(folder) not in shown:
            shown[str(folder)] = Bind(folder, str(folder), read_only=True)
    return Confinement(covered, tuple(shown.values()))


def runtime_sockets() -> list[str]:
    """The container runtimes' sockets present here (masked in a confined process): the system ones and this
    user's rootless ones (a rootless service resolves a ``-v`` path outside the sandbox, past the covers)."""
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    rootless = (f"{runtime_dir}/podman/podman.sock", f"{runtime_dir}/docker.sock")
    return [path for path in (*RUNTIME_SOCKETS, *rootless) if os.path.exists(path) and not os.path.islink(path)]


class HostFolderRefused(UserError):
    """Multi-user mode: a spec named a host folder that holds millpond's own files (the home, a covered root)."""


def check_host_folder(folder: Path, what: str, settings: Settings | None = None) -> None:
    """In multi-user mode, refuse a host folder a spec names (a ``hostPath`` volume, ``--data-dir``) that is, is
    inside, or holds one of the covered roots: binding it would show other namespaces' files past the covers."""
    settings = settings or load_settings()
    if not settings.multi_user:
        return
    real = Path(os.path.realpath(folder))
    for root in hidden_roots(settings):
        if real == root or root in real.parents or real in root.parents:
            raise HostFolderRefused(f"{what}: {folder} would show {root}, millpond's own files: in multi-user mode a "
                                    "namespace mounts only its own volumes and datasets")

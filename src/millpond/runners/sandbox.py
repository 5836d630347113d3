"""A private mount namespace for a task, built with bubblewrap.

The task sees the host's filesystem as it is, plus bind mounts at absolute paths (an
artifact staging folder over its final place, ``/s3`` for remote artifacts, later the
volumes of kfp-kubernetes) — without the host's filesystem changing. The root is a fresh
tmpfs into which every top-level entry of the host's ``/`` is bound, so new top-level
mount points (``/s3``, ``/data``) never touch the host; a deeper new one (``/mnt/x``) gets
a private tmpfs over its parent that re-shows the parent's host entries.

In multi-user mode (``isolation``) the same root hides the home and other namespaces' folders, keeps
only the process's own, and adds a private ``/tmp``, a PID namespace with its own ``/proc``, and no
capabilities.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
from pathlib import Path

from millpond.errors import MillpondError
from millpond.runners import isolation
from millpond.runners.base import Bind


class SandboxUnavailable(MillpondError):
    """Mount namespaces cannot be made here; the message says why and what to install."""


@functools.cache
def sandbox_problem() -> str | None:
    """None when bubblewrap works here, else one line saying why not."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return f"bubblewrap (bwrap) is not installed; run: {isolation.INSTALL_HINT}"
    probe = subprocess.run(
        [bwrap, "--dev-bind", "/", "/", "--unshare-user-try", "--", "true"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["unknown error"])[-1]
        return f"mount namespaces are unavailable here (bwrap: {reason})"
    return None


def wrap(argv: list[str], binds: list[Bind], cwd: Path, path: str | None = None, own: tuple[Path, ...] = (),
         hidden: tuple[Path, ...] = ()) -> list[str]:
    """The bwrap command line that runs ``argv`` with ``binds`` in place.

    A bind over ``/tmp`` itself gives the task a ``/tmp`` of its own (a kfp 1.x step's, as a pod
    has): the host's ``/tmp`` entries holding the task's own folders (its ``cwd``, its binds'
    sources, the folders of its ``PATH``) are shown there still, and nothing else of it.

    In multi-user mode the process is confined (``isolation``): ``own`` folders (and ``cwd``) are all
    it sees of the home, ``/tmp`` and the ``hidden`` folders; SandboxUnavailable says what to install.
    """
    if isolation.required():
        if isolation.isolation_problem():
            raise SandboxUnavailable(isolation.refusal())
        return confined(argv, binds, cwd, isolation.confinement(cwd, path, own, hidden))
    problem = sandbox_problem()
    if problem:
        raise SandboxUnavailable(problem)
    if any(os.path.normpath(b.target) == "/tmp" for b in binds):
        keep = [cwd, *(Path(b.source) for b in binds), *(Path(p) for p in (path or "").split(os.pathsep) if p)]
        binds = [*binds, *(Bind(Path(entry), entry) for entry in tmp_entries(keep)
                           if not any(os.path.normpath(b.target) == entry for b in binds))]
    top_targets = {Path(b.target).parts[1] for b in binds if len(Path(b.target).parts) == 2}
    words = [shutil.which("bwrap") or "bwrap", "--unshare-user-try", "--die-with-parent", "--tmpfs", "/"]
    for entry in sorted(os.listdir("/")):
        if entry not in top_targets:
            words += _show_host_entry(Path("/") / entry)
    for folder in _folders_to_shadow(binds):
        words += ["--perms", f"{stat.S_IMODE(folder.stat().st_mode):04o}", "--tmpfs", str(folder)]
        for entry in sorted(os.listdir(folder)):
            words += _show_host_entry(folder / entry)
    for bind in sorted(binds, key=lambda b: len(Path(b.target).parts)):
        words += ["--ro-bind" if bind.read_only else "--bind", str(bind.source), bind.target]
    words += ["--chdir", str(cwd), "--"]
    return words + argv


def confined(argv: list[str], binds: list[Bind], cwd: Path, confinement: isolation.Confinement) -> list[str]:
    """The bwrap command line of a process of one namespace: the host's root less its ``/proc`` and ``/tmp``
    (fresh ones), the confinement's hidden folders covered, its own folders and ``binds`` bound back."""
    private = [Path("/tmp"), *confinement.hidden]
    top_targets = {Path(b.target).parts[1] for b in binds if len(Path(b.target).parts) == 2}
    words = [shutil.which("bwrap") or "bwrap", "--unshare-user-try", "--unshare-pid", "--die-with-parent"]
    if os.geteuid() == 0:  # bwrap drops them itself for anyone else
        words += ["--cap-drop", "ALL"]
    words += ["--tmpfs", "/"]
    for entry in sorted(os.listdir("/")):
        if entry not in top_targets and entry not in ("proc", "tmp"):
            words += _show_host_entry(Path("/") / entry)
    words += ["--proc", "/proc", "--perms", "1777", "--tmpfs", "/tmp"]
    if os.path.isdir("/var/tmp"):
        words += ["--perms", "1777", "--tmpfs", "/var/tmp"]
    for socket_path in isolation.runtime_sockets():
        words += ["--ro-bind", "/dev/null", socket_path]
    for folder in _folders_to_shadow(binds):
        if not any(folder == root or root in folder.parents for root in private):
            words += ["--perms", f"{stat.S_IMODE(folder.stat().st_mode):04o}", "--tmpfs", str(folder)]
            for entry in sorted(os.listdir(folder)):
                words += _show_host_entry(folder / entry)
    for folder in confinement.hidden:
        if os.path.isdir(folder) and Path("/tmp") not in folder.parents:
            words += ["--perms", "0700", "--tmpfs", str(folder)]
    targets = {os.path.normpath(b.target) for b in binds}
    shown = [b for b in confinement.shown if os.path.normpath(b.target) not in targets]
    for bind in sorted([*shown, *binds], key=lambda b: len(Path(b.target).parts)):
        words += ["--ro-bind" if bind.read_only else "--bind", str(bind.source), bind.target]
    words += ["--chdir", str(cwd), "--"]
    return words + argv


def tmp_entries(paths: list[Path]) -> list[str]:
    """The host's ``/tmp`` entries holding ``paths`` (``/tmp/home`` for ``/tmp/home/staging/x``)."""
    entries: list[str] = []
    for path in paths:
        normal = os.path.normpath(os.path.abspath(path))
        if normal.startswith("/tmp/"):
            entry = "/tmp/" + normal[len("/tmp/"):].split("/", 1)[0]
            if entry not in entries and os.path.exists(entry):
                entries.append(entry)
    return entries


def _show_host_entry(host: Path) -> list[str]:
    """bwrap words that show one host entry at the same path (symlinks recreated, not bound)."""
    if host.is_symlink():
        return ["--symlink", os.readlink(host), str(host)]
    if host.is_dir():
        return ["--dev-bind", str(host), str(host)]
    if host.parent == Path("/"):  # top-level files stay read-only, as before; sockets and such are left out
        return ["--ro-bind", str(host), str(host)] if host.is_file() else []
    return ["--dev-bind", str(host), str(host)] if host.exists() else []


def _folders_to_shadow(binds: list[Bind]) -> list[Path]:
    """Host folders that must become private before the binds, so no mount point lands on the host.

    bwrap creates a missing mount point (``/mnt/new``) inside whatever shows its parent; when
    that is a bound host folder the new entry would appear on the host. Such a parent (the
    deepest existing ancestor) is covered with a tmpfs that re-shows the host's entries, so
    the task still sees and writes through to everything that was there. A mount point inside
    another bind's target is left alone: it lands in that bind's source, as in Kubernetes.
    """
    targets = [Path(os.path.normpath(b.target)) for b in binds]
    shadow: set[Path] = set()
    for target in targets:
        if len(target.parts) <= 2 or os.path.lexists(target):
            continue
        parent = target.parent
        while not os.path.lexists(parent):
            parent = parent.parent
        folder = Path(os.path.realpath(parent))
        if folder == Path("/") or not folder.is_dir():
            continue
        if any(folder == other or other in folder.parents for other in targets):
            continue
        shadow.add(folder)
    return sorted(shadow, key=lambda p: len(p.parts))

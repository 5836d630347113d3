"""A private mount namespace for a task, built with bubblewrap.

The task sees the host's filesystem as it is, plus bind mounts at absolute paths (an
artifact staging folder over its final place, ``/s3`` for remote artifacts, later the
volumes of kfp-kubernetes) — without the host's filesystem changing. The root is a fresh
tmpfs into which every top-level entry of the host's ``/`` is bound, so new top-level
mount points (``/s3``, ``/data``) never touch the host.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

from millpond.runners.base import Bind

INSTALL_HINT = "apt-get install -y bubblewrap"


class SandboxUnavailable(Exception):
    """Mount namespaces cannot be made here; the message says why and what to install."""


@functools.cache
def sandbox_problem() -> str | None:
    """None when bubblewrap works here, else one line saying why not."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return f"bubblewrap (bwrap) is not installed; run: {INSTALL_HINT}"
    probe = subprocess.run(
        [bwrap, "--dev-bind", "/", "/", "--unshare-user-try", "--", "true"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["unknown error"])[-1]
        return f"mount namespaces are unavailable here (bwrap: {reason})"
    return None


def wrap(argv: list[str], binds: list[Bind], cwd: Path) -> list[str]:
    """The bwrap command line that runs ``argv`` with ``binds`` in place."""
    problem = sandbox_problem()
    if problem:
        raise SandboxUnavailable(problem)
    top_targets = {Path(b.target).parts[1] for b in binds if len(Path(b.target).parts) == 2}
    words = [shutil.which("bwrap") or "bwrap", "--unshare-user-try", "--die-with-parent", "--tmpfs", "/"]
    for entry in sorted(os.listdir("/")):
        host = Path("/") / entry
        if entry in top_targets:
            continue
        if host.is_symlink():
            words += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            words += ["--dev-bind", str(host), str(host)]
        elif host.is_file():
            words += ["--ro-bind", str(host), str(host)]
    for bind in sorted(binds, key=lambda b: len(Path(b.target).parts)):
        words += ["--ro-bind" if bind.read_only else "--bind", str(bind.source), bind.target]
    words += ["--chdir", str(cwd), "--"]
    return words + argv

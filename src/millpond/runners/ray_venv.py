"""``packages_to_install`` on a Ray node: the node builds, or reuses, the venv in its own folder.

Locally the launcher builds a component's venv under the home (``python_env``) before the
process starts. On a cluster that folder is the engine machine's, so the process description
carries the requirements instead (``ProcessSpec.packages``) and the node makes the venv itself
under ``MILLPOND_NODE_DIR/venvs``, keyed as locally (requirements, index options, and the
node's interpreter). Two tasks on one node that need the same venv at once take turns on its
lock: one builds, the other waits and reuses it; later tasks on that node find it ready.

The installer sees the engine's index settings, as a local build does: the task's ``PIP_*``
and ``UV_*`` variables (``PIP_INDEX_URL``, ``PIP_EXTRA_INDEX_URL``, ``PIP_FIND_LINKS``, …, given
to uv as its own) over the node's, beside the component's ``pip_index_urls`` in the options.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

from millpond.runners.base import Packages, ProcessSpec
from millpond.runners.python_env import READY, Prelude, ensure_venv, venv_key

INSTALLER_PREFIXES = ("PIP_", "UV_")


def put_venv_on_path(packages: Packages | None, spec: ProcessSpec, base: Path, cancel: threading.Event) -> None:
    """Build or reuse ``packages``' venv under ``base/venvs`` and put its ``bin`` first on the process's PATH.

    Says which in the task's log. A failed install raises the task's one line (``EnvironmentError_``).
    """
    if packages is None or not packages.requirements:
        return
    wanted = " ".join(packages.requirements)
    _log(spec, f"packages_to_install on node {socket.gethostname()}: {wanted}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(INSTALLER_PREFIXES)}
    env.update({k: v for k, v in spec.env.items() if k.startswith(INSTALLER_PREFIXES)})
    started = time.monotonic()
    prelude = Prelude(requirements=packages.requirements, index_options=packages.index_options, program=[])
    was_ready = (base / "venvs" / venv_key(prelude) / READY).exists()
    venv, built = ensure_venv(prelude, base / "venvs", cancel, env)
    seconds = time.monotonic() - started
    if built:
        _log(spec, f"built the venv {venv.name} in {seconds:.1f} s")
    elif was_ready:
        _log(spec, f"reusing the venv {venv.name} (cached on this node)")
    else:
        _log(spec, f"reusing the venv {venv.name} (built meanwhile by another task here: waited {seconds:.1f} s)")
    spec.env["PATH"] = f"{venv / 'bin'}{os.pathsep}{spec.env.get('PATH', '')}"


def _log(spec: ProcessSpec, line: str) -> None:
    with open(spec.log_path, "a", encoding="utf-8") as log:
        log.write(f"[millpond] {line}\n")

"""One notebook's JupyterLab server: its command line, its environment, and whether it answers.

A notebook that does not run in its image (``notebooks.in_image``) runs JupyterLab from millpond's own
environment (the ``notebooks`` extra: ``jupyterlab``, ``jupyter-server``, ``ipykernel``), on a free
loopback port, with Kubeflow's ``NB_PREFIX`` as its base URL (``--ServerApp.base_url``), as a Kubeflow
notebook image starts it, so every link it writes is
under ``/notebook/NAMESPACE/NAME/`` and ``millpond server`` forwards the path unchanged. Its token is
its own (``paths.ensure_token``), given in the environment (``JUPYTER_TOKEN``: never on a command
line other users' ``ps`` shows); the proxy adds it to each request, so the browser never holds it.

Its runtime, data and config folders are the notebook's own (nothing of the OS user's Jupyter set-up
is read, and two notebooks never share a kernel's connection files); the working folder is the
notebook's workspace. The container's ``env``, then ``extra``: the variables its Secrets and ConfigMaps give
(``notebooks.volumes``), its defaults (``notebooks.defaults``), the GPUs the ledger granted
(``CUDA_VISIBLE_DEVICES``, and a share's limits)
and a mark of its own (``process_groups.MARK_VAR``, which every kernel and terminal it starts
inherits, so stopping the notebook finds them wherever they went) complete its environment.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

from millpond.notebooks import paths
from millpond.notebooks.kinds import base_url
from millpond.notebooks.manifests import NotebookSpec
from millpond.runners.environment import inherited_environment
from millpond.runners.ports import LOCAL_ADDR
from millpond.runners.process_groups import MARK_VAR
from millpond.settings import Settings

PROBE_TIMEOUT_S = 2.0
MISSING = "JupyterLab is not installed: pip install 'millpond[notebooks]'"


def installed() -> bool:
    """Whether JupyterLab can be started from this environment."""
    return importlib.util.find_spec("jupyterlab") is not None and importlib.util.find_spec("ipykernel") is not None


def argv(namespace: str, name: str, port: int, workspace: Path) -> list[str]:
    """``jupyter lab`` with Kubeflow's base URL, on ``port`` of the loopback, opening ``workspace``."""
    return [sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.ip={LOCAL_ADDR}",
            f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            f"--ServerApp.base_url={base_url(namespace, name)}/", f"--ServerApp.root_dir={workspace}",
            "--ServerApp.allow_remote_access=True",  # the proxy forwards the browser's Host
            "--ServerApp.terminals_enabled=True", "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            *(["--allow-root"] if os.geteuid() == 0 else [])]  # a container's root, as Kubeflow's images allow


def environment(settings: Settings, uid: str, namespace: str, name: str, spec: NotebookSpec, token: str,
                extra: dict[str, str], mark: str, guard: dict[str, str]) -> dict[str, str]:
    """What the server and its kernels run with (see the module's docstring)."""
    own = paths.folder(settings, uid)
    env = {key: value for key, value in inherited_environment().items() if key != MARK_VAR}
    env.update(dict(spec.env))
    env.update(guard)
    env.update({
        "NB_PREFIX": base_url(namespace, name), "JUPYTER_TOKEN": token,
        "JUPYTER_RUNTIME_DIR": str(own / "runtime"), "JUPYTER_CONFIG_DIR": str(own / "jupyter" / "config"),
        "JUPYTER_DATA_DIR": str(own / "jupyter" / "data"), "IPYTHONDIR": str(own / "ipython"),
        "JUPYTER_PLATFORM_DIRS": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', os.defpath)}",
        MARK_VAR: mark,
    })
    env.update(extra)  # the volumes' and defaults' variables, the granted GPUs
    return env


def answers(port: int, namespace: str, name: str, token: str) -> bool:
    """Whether the server answers its API's status (what the controller's readiness amounts to)."""
    request = urllib.request.Request(f"http://{LOCAL_ADDR}:{port}{base_url(namespace, name)}/api/status",
                                     headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as answer:  # noqa: S310 - loopback only
            return bool(answer.status == 200)
    except (OSError, urllib.error.URLError, ValueError):
        return False

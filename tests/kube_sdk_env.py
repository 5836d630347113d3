"""The Kubeflow and KServe SDKs' side environment for the tests, built once and kept in a cache folder.

``kubeflow`` 0.5.0 (TrainerClient) and ``kserve`` 0.21.0 (KServeClient) cannot go into millpond's own
virtualenv: they pin other versions of psutil, pandas and grpc, and the Kubeflow SDK pins
``kubernetes < 36``. So they get a virtualenv of their own, in ``~/.cache/millpond-tests`` (or
``$XDG_CACHE_HOME``'s) under a name that holds the versions, reused by every later test session.

A build goes into a temporary folder beside it and is renamed into place only once pip has finished
and the ``complete`` file (written last) is there, so a build killed halfway leaves no environment
that looks usable: the next session removes the half-made folder and builds again. Two sessions
building at once both finish; the first rename wins and the other's folder is thrown away.

The SDK code runs in a subprocess of that environment's python (:func:`run_sdk`): a script file the
test writes, with the kubeconfig in ``KUBECONFIG``, printing one JSON document the test reads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

KUBEFLOW_VERSION = "0.5.0"
KSERVE_VERSION = "0.21.0"
REQUIREMENTS = (f"kubeflow=={KUBEFLOW_VERSION}", f"kserve=={KSERVE_VERSION}", "kubernetes<36")
VENV_NAME = (f"kube-sdks-kubeflow{KUBEFLOW_VERSION}-kserve{KSERVE_VERSION}"
             f"-py{sys.version_info.major}.{sys.version_info.minor}")
COMPLETE = "complete"  # written last: its presence says the environment is whole
BUILD_TIMEOUT_S = 900


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "millpond-tests"


@dataclass(frozen=True)
class SdkEnv:
    """The side environment: its folder, and how long this session spent getting it (0 when reused)."""

    folder: Path
    built_s: float

    @property
    def python(self) -> Path:
        return self.folder / "bin" / "python"


def is_complete(folder: Path) -> bool:
    return (folder / COMPLETE).is_file() and (folder / "bin" / "python").exists()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_builds(root: Path, name: str) -> None:
    """Half-made folders of builds whose process is gone (killed): ``NAME.building-PID``."""
    for leftover in root.glob(f"{name}.building-*"):
        pid = leftover.name.rsplit("-", 1)[-1]
        if not pid.isdigit() or not _pid_alive(int(pid)):
            shutil.rmtree(leftover, ignore_errors=True)


def build(root: Path, requirements: tuple[str, ...] = REQUIREMENTS, name: str = VENV_NAME) -> Path:
    """The environment ``name`` under ``root``, built now unless a complete one is there (``requirements``: what
    pip installs; none, a bare venv without pip, for the tests of this build itself). Other side environments
    (``tests/katib_sdk_env.py``) are built here under their own name."""
    final = root / name
    if is_complete(final):
        return final
    root.mkdir(parents=True, exist_ok=True)
    _remove_stale_builds(root, name)
    if final.exists():  # an old layout or a build interrupted after its rename: not trusted
        shutil.rmtree(final)
    building = root / f"{name}.building-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    log = root / f"{name}.log"
    with open(log, "w") as out:
        steps = [[sys.executable, "-m", "venv", *([] if requirements else ["--without-pip"]), str(building)]]
        if requirements:
            steps.append([str(building / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
                          *requirements])
        for argv in steps:
            done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT_S,
                                  env={key: value for key, value in os.environ.items()
                                       if key not in ("PYTHONPATH", "VIRTUAL_ENV")})
            if done.returncode != 0:
                shutil.rmtree(building, ignore_errors=True)
                pytest.fail(f"building the SDKs' environment failed ({' '.join(argv[:4])}): see {log}")
    (building / COMPLETE).write_text("\n".join(requirements) + "\n")
    try:
        building.rename(final)
    except OSError:  # another session renamed its own build into place first
        shutil.rmtree(building, ignore_errors=True)
    assert is_complete(final), f"no complete SDK environment at {final}"
    return final


@pytest.fixture(scope="session")
def kube_sdks() -> SdkEnv:
    """The session's SDK environment (built once per cache; each module asking gets the same one)."""
    started = time.monotonic()
    root = cache_root()
    reused = is_complete(root / VENV_NAME)
    folder = build(root)
    return SdkEnv(folder, 0.0 if reused else time.monotonic() - started)


def run_sdk(env: SdkEnv, kubeconfig: Path, folder: Path, name: str, code: str, *args: str,
            timeout: float = 240) -> Any:
    """Run ``code`` (dedented) as ``folder/name.py`` with the SDKs' python, ``KUBECONFIG`` set; the JSON document
    its last stdout line holds. A script that fails fails the test with its output."""
    script = folder / f"{name}.py"
    script.write_text(textwrap.dedent(code))
    environ = {key: value for key, value in os.environ.items()
               if key not in ("PYTHONPATH", "VIRTUAL_ENV", "KUBECONFIG")}
    done = subprocess.run([str(env.python), str(script), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=folder, env={**environ, "KUBECONFIG": str(kubeconfig)})
    assert done.returncode == 0, f"{name}.py: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    lines = done.stdout.strip().splitlines()
    assert lines, f"{name}.py printed nothing\n{done.stderr}"
    return json.loads(lines[-1])

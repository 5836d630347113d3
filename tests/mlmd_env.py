"""ML Metadata's own Python client (``ml-metadata`` 1.17.1) in a side environment, built once and kept in a cache.

``ml-metadata`` 1.17.1 has wheels for CPython 3.11 only and pins ``protobuf<5``, which millpond's own environment
cannot take (protobuf 6). Its gRPC client runs on protobuf 6 all the same (its generated modules load under the
6.x runtime), so it is installed ``--no-deps`` beside what it imports: protobuf 6.33, grpcio, absl-py, attrs and
six. Built and cached as ``tests/kube_sdk_env.py`` builds the Kubeflow SDKs' environment (a temporary folder
renamed into place once whole, a ``complete`` file written last), under a name that holds the versions.

:func:`run_client` runs a script with that environment's python and returns the JSON its last line prints.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.kube_sdk_env import BUILD_TIMEOUT_S, COMPLETE, SdkEnv, cache_root, is_complete

MLMD_VERSION = "1.17.1"
STEPS = (("--no-deps", f"ml-metadata=={MLMD_VERSION}"),
         ("protobuf>=6.33,<7", "grpcio>=1.76,<2", "absl-py>=0.9,<2", "attrs>=20.3,<24", "six>=1.10,<2"))
VENV_NAME = f"mlmd-client{MLMD_VERSION}-protobuf6-py{sys.version_info.major}.{sys.version_info.minor}"


def build(root: Path) -> Path:
    """The environment under ``root``, built now unless a complete one is there."""
    final = root / VENV_NAME
    if is_complete(final):
        return final
    root.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(final, ignore_errors=True)  # not complete: a build killed after its rename, not trusted
    building = root / f"{VENV_NAME}.building-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    log = root / f"{VENV_NAME}.log"
    python = building / "bin" / "python"
    argvs = [[sys.executable, "-m", "venv", str(building)],
             *([str(python), "-m", "pip", "install", "--disable-pip-version-check", *step] for step in STEPS)]
    environ = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    with open(log, "w") as out:
        for argv in argvs:
            done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT_S, env=environ)
            if done.returncode != 0:
                shutil.rmtree(building, ignore_errors=True)
                pytest.fail(f"building ML Metadata's client environment failed ({' '.join(argv[-3:])}): see {log}")
    (building / COMPLETE).write_text("\n".join(" ".join(step) for step in STEPS) + "\n")
    try:
        building.rename(final)
    except OSError:  # another session renamed its own build into place first
        shutil.rmtree(building, ignore_errors=True)
    assert is_complete(final), f"no complete ML Metadata client environment at {final}"
    return final


@pytest.fixture(scope="session")
def mlmd_client() -> SdkEnv:
    """The session's ML Metadata client environment (CPython 3.11 only: the wheels are)."""
    if sys.version_info[:2] != (3, 11):
        pytest.skip(f"ml-metadata {MLMD_VERSION} has wheels for CPython 3.11 only")
    started = time.monotonic()
    root = cache_root()
    reused = is_complete(root / VENV_NAME)
    folder = build(root)
    return SdkEnv(folder, 0.0 if reused else time.monotonic() - started)


def run_client(env: SdkEnv, folder: Path, name: str, code: str, *args: str, timeout: float = 120) -> Any:
    """Run ``code`` (dedented) as ``folder/name.py`` with the client's python; the JSON its last stdout line holds.
    A script that fails fails the test with its output."""
    script = folder / f"{name}.py"
    script.write_text(textwrap.dedent(code))
    environ = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(env.python), str(script), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=folder, env=environ)
    assert done.returncode == 0, f"{name}.py: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    lines = done.stdout.strip().splitlines()
    assert lines, f"{name}.py printed nothing\n{done.stderr}"
    return json.loads(lines[-1])

"""The Katib SDK (``kubeflow-katib`` 0.19.0) in a side environment of its own, built once and kept in a cache.

``kubeflow-katib`` 0.19.0 pins ``protobuf < 5`` (its DB-manager gRPC stubs), which neither millpond's own
environment (protobuf 6) nor the Kubeflow SDKs' side environment (``tests/kube_sdk_env.py``) can take, so it
gets a third one. Built and cached as that module builds its own (a temporary folder renamed into place once
whole, a ``complete`` file written last), under a name that holds the version; scripts run through
:func:`tests.kube_sdk_env.run_sdk` with the kubeconfig in ``KUBECONFIG``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.kube_sdk_env import BUILD_TIMEOUT_S, COMPLETE, SdkEnv, cache_root, is_complete

KATIB_VERSION = "0.19.0"
# kubernetes 36 and later validate each call's arguments with pydantic and refuse the SDK's model objects as a
# body ("Input should be a valid dictionary", seen with 37.0.2): the Katib SDK asks only ``>= 27.2.0``, so a fresh
# install today gets one it cannot create an Experiment with. 35 is what the Kubeflow SDK pins (``< 36``).
KUBERNETES = "kubernetes<36"
REQUIREMENTS = (f"kubeflow-katib=={KATIB_VERSION}", KUBERNETES)
VENV_NAME = f"katib-sdk{KATIB_VERSION}-kubernetes35-py{sys.version_info.major}.{sys.version_info.minor}"


def build(root: Path) -> Path:
    """The environment under ``root``, built now unless a complete one is there."""
    final = root / VENV_NAME
    if is_complete(final):
        return final
    root.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(final, ignore_errors=True)  # not complete: a build killed after its rename, not trusted
    for leftover in root.glob(f"{VENV_NAME}.building-*"):  # builds whose process is gone
        pid = leftover.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(leftover, ignore_errors=True)
    building = root / f"{VENV_NAME}.building-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    log = root / f"{VENV_NAME}.log"
    python = building / "bin" / "python"
    argvs = [[sys.executable, "-m", "venv", str(building)],
             [str(python), "-m", "pip", "install", "--disable-pip-version-check", *REQUIREMENTS]]
    environ = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    with open(log, "w") as out:
        for argv in argvs:
            done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT_S, env=environ)
            if done.returncode != 0:
                shutil.rmtree(building, ignore_errors=True)
                pytest.fail(f"building the Katib SDK's environment failed ({' '.join(argv[-3:])}): see {log}")
    (building / COMPLETE).write_text("\n".join(REQUIREMENTS) + "\n")
    try:
        building.rename(final)
    except OSError:  # another session renamed its own build into place first
        shutil.rmtree(building, ignore_errors=True)
    assert is_complete(final), f"no complete Katib SDK environment at {final}"
    return final


@pytest.fixture(scope="session")
def katib_sdk() -> SdkEnv:
    """The session's Katib SDK environment (built once per cache)."""
    started = time.monotonic()
    root = cache_root()
    reused = is_complete(root / VENV_NAME)
    folder = build(root)
    return SdkEnv(folder, 0.0 if reused else time.monotonic() - started)

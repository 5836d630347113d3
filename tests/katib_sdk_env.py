"""The Katib SDK (``kubeflow-katib`` 0.19.0) in a side environment of its own, built once and kept in a cache.

``kubeflow-katib`` 0.19.0 pins ``protobuf < 5`` (its DB-manager gRPC stubs), which neither millpond's own
environment (protobuf 6) nor the Kubeflow SDKs' side environment (``tests/kube_sdk_env.py``) can take, so it
gets a third one. Built and cached as that module builds its own (a temporary folder renamed into place once
whole, a ``complete`` file written last: ``kube_sdk_env.build``), under a name that holds the versions; scripts
run through :func:`tests.kube_sdk_env.run_sdk` with the kubeconfig in ``KUBECONFIG``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests import kube_sdk_env
from tests.kube_sdk_env import SdkEnv, cache_root, is_complete

KATIB_VERSION = "0.19.0"
# kubernetes 36 and later validate each call's arguments with pydantic and refuse the SDK's model objects as a
# body ("Input should be a valid dictionary", seen with 37.0.2): the Katib SDK asks only ``>= 27.2.0``, so a fresh
# install today gets one it cannot create an Experiment with. 35 is what the Kubeflow SDK pins (``< 36``).
KUBERNETES = "kubernetes<36"
REQUIREMENTS = (f"kubeflow-katib=={KATIB_VERSION}", KUBERNETES)
VENV_NAME = f"katib-sdk{KATIB_VERSION}-kubernetes35-py{sys.version_info.major}.{sys.version_info.minor}"


def build(root: Path) -> Path:
    """The environment under ``root``, built now unless a complete one is there."""
    return kube_sdk_env.build(root, REQUIREMENTS, VENV_NAME)


@pytest.fixture(scope="session")
def katib_sdk() -> SdkEnv:
    """The session's Katib SDK environment (built once per cache)."""
    started = time.monotonic()
    root = cache_root()
    reused = is_complete(root / VENV_NAME)
    folder = build(root)
    return SdkEnv(folder, 0.0 if reused else time.monotonic() - started)

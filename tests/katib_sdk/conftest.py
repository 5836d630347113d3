"""A ``millpond server --tls`` with a token, and the kubeconfig ``millpond kubeconfig`` writes for it (its CA, its
token), as a user's notebook reaches it with the Katib SDK or the Kubeflow SDK; and the Katib SDK's side
environment (``tests/katib_sdk_env.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.katib_sdk_env import katib_sdk  # noqa: F401 - the fixture, for this folder's tests
from tests.kube_support import Kubectl, kubeconfig_of_server
from tests.server_support import Served, module_home

TOKEN = "katib-sdk-token"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "katib-sdk")


@pytest.fixture(scope="module")
def served(home: Path) -> Iterator[Served]:
    server = Served(token=TOKEN, tls=True)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def kubectl(served: Served, home: Path, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    """kubectl with the kubeconfig ``millpond kubeconfig`` writes for the server."""
    return kubeconfig_of_server(served, home, tmp_path_factory.mktemp("katib-kubectl"), TOKEN)

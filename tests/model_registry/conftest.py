"""A `millpond server` over a module's home for the model registry's tests, and a folder models may come from."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import _end_background_processes
from tests.server_support import Served, module_home, serving


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    for path in module_home(tmp_path_factory, "model-registry"):
        yield path
        _end_background_processes(path)


@pytest.fixture(scope="module")
def models_root(home: Path) -> Path:
    """A folder under the home's volumes, one of the roots a registered local model may come from."""
    folder = home / "volumes" / "default" / "models"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[Served]:
    yield from serving()


@pytest.fixture(scope="module")
def registry(server: Served):  # noqa: ANN201 - model_registry.ModelRegistry, imported after the skip
    """The real ``model-registry`` client against the server (plain HTTP, no token: single-user)."""
    pytest.importorskip("model_registry")
    from model_registry import ModelRegistry

    os.environ.pop("KF_PIPELINES_SA_TOKEN_PATH", None)
    return ModelRegistry(server.url, author="alice", is_secure=False, user_token="unused-in-single-user")

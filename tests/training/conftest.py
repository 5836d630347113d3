"""The ``containers`` marker, until tests/markers.py's fixtures apply it (issue 31's shared test support)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "containers: runs processes in container images (Podman)")

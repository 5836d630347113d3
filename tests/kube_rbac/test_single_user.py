"""A single-user server (the default) decides nothing: every request, impersonated or not, is answered as before,
and ``kubectl auth can-i`` says so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kube_support import kubectl_for
from tests.server_support import Served, module_home, serving


@pytest.fixture(scope="module")
def single_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "single-user")


@pytest.fixture(scope="module")
def single(single_home: Path) -> Iterator[Served]:
    yield from serving()


def test_a_single_user_server_refuses_nobody(single: Served, tmp_path: Path) -> None:
    kubectl = kubectl_for(single, tmp_path)
    kubectl.ok("create", "configmap", "settings", "--from-literal=mode=fast", "-n", "default")
    assert kubectl.json("get", "configmaps", "-A")["items"][0]["metadata"]["name"] == "settings"
    assert kubectl.ok("get", "configmap", "settings", "--as", "someone", "-o", "name") == "configmap/settings\n"
    assert kubectl.ok("auth", "can-i", "delete", "nodes") == "yes\n"
    assert kubectl.ok("auth", "can-i", "create", "rolebindings", "-n", "elsewhere", "--as", "bob") == "yes\n"
    shown = kubectl.ok("auth", "whoami")
    assert shown.split() == ["ATTRIBUTE", "VALUE", "Username", "anonymous", "Groups", "[system:authenticated]"]
    kubectl.ok("delete", "configmap", "settings")

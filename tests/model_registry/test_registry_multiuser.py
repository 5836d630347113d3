"""The model registry on a multi-user server: each namespace's registry, asked through the one authorizer as
``registeredmodels`` of ``modelregistry.kubeflow.org`` (kubeflow-edit writes, kubeflow-view reads)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.routes_multiuser.support import ALICE, BOB, CAROL, TEAM_A, TEAM_B, Caller, MultiUserServer, team
from tests.server_support import module_home

API = "/api/model_registry/v1alpha3"


@pytest.fixture(scope="module")
def callers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Caller]]:
    for _ in module_home(tmp_path_factory, "registry-multiuser"):
        server = MultiUserServer()
        try:
            yield team(server)
        finally:
            server.stop()


def test_each_namespace_has_its_registry_and_rbac_decides(callers: dict[str, Caller]) -> None:
    alice, bob, carol = callers[ALICE.name], callers[BOB.name], callers[CAROL.name]
    made = alice.call(f"{API}/registered_models?namespace={TEAM_A}", "POST", {"name": "fraud"})
    assert made.status == 201, made.text
    assert bob.call(f"{API}/registered_models?namespace={TEAM_B}", "POST", {"name": "fraud"}).status == 201
    listed = carol.call(f"{API}/registered_models?namespace={TEAM_A}")  # a viewer reads
    assert listed.status == 200 and [m["name"] for m in listed.body["items"]] == ["fraud"]
    refused = carol.call(f"{API}/registered_models?namespace={TEAM_A}", "POST", {"name": "other"})
    assert refused.status == 403 and set(refused.body) == {"code", "message"}
    assert 'cannot create resource "registeredmodels" in API group "modelregistry.kubeflow.org"' in (
        refused.body["message"])
    assert bob.call(f"{API}/registered_models/{made.body['id']}?namespace={TEAM_A}").status == 403
    assert alice.call(f"{API}/registered_models?namespace={TEAM_B}").status == 403
    assert alice.call(f"{API}/registered_models").status == 403  # default: nobody's but an administrator's
    assert callers["nobody"].call(f"{API}/registered_models?namespace={TEAM_A}").status == 401
    assert callers["admin"].call(f"{API}/registered_models?namespace={TEAM_B}").body["size"] == 1

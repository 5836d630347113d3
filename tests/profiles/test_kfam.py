"""KFAM's contributors API on a multi-user server, as the central dashboard calls it: the profile's owner adds and
removes contributors (``POST``/``DELETE /kfam/v1/bindings``), the bindings are listed with KFAM's JSON and
filters, a contributor who is not the owner and an unauthenticated caller are refused with a message and
nothing changes, the administrator may manage any profile, ``/kfam/v1/role/clusteradmin`` answers who is one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from millpond.access import rbac
from millpond.store.resources import ResourceStore
from tests.profiles.support import ADMIN_TOKEN, MultiUserServer, user_token

BOB_EDIT = {"user": {"kind": "User", "name": "bob@example.com"}, "referredNamespace": "team-vision",
            "roleRef": {"kind": "ClusterRole", "name": "edit"}}


@pytest.fixture
def server(home: Path) -> Iterator[MultiUserServer]:
    served = MultiUserServer()
    yield served
    served.stop()


def test_the_owner_manages_contributors_and_others_are_refused(server: MultiUserServer, cli) -> None:
    alice, bob = user_token("alice@example.com"), user_token("bob@example.com")
    assert cli("profile", "create", "team-vision", "--owner", "alice@example.com").code == 0

    assert server.call("POST", "/kfam/v1/bindings", None, BOB_EDIT)[0] == 401  # no identity
    status, answer = server.call("POST", "/kfam/v1/bindings", bob, BOB_EDIT)  # not the owner
    assert status == 403 and "only its owner (alice@example.com) or a cluster administrator" in answer["message"]
    assert ResourceStore().get("RoleBinding", "user-bob-example-com-clusterrole-edit", "team-vision") is None

    assert server.call("POST", "/kfam/v1/bindings", alice, BOB_EDIT)[0] == 200
    status, answer = server.call("POST", "/kfam/v1/bindings", alice, BOB_EDIT)
    assert status == 409 and "already exists" in answer["message"]
    binding = ResourceStore().get("RoleBinding", "user-bob-example-com-clusterrole-edit", "team-vision")
    assert binding is not None and binding.manifest["roleRef"]["name"] == "kubeflow-edit"

    status, listed = server.call("GET", "/kfam/v1/bindings?namespace=team-vision", bob)
    assert status == 200 and listed == {"bindings": [
        {"user": {"kind": "User", "name": "alice@example.com"}, "referredNamespace": "team-vision",
         "RoleRef": {"apiGroup": "", "kind": "ClusterRole", "name": "admin"}},
        {"user": {"kind": "User", "name": "bob@example.com"}, "referredNamespace": "team-vision",
         "RoleRef": {"apiGroup": "", "kind": "ClusterRole", "name": "edit"}}]}
    assert server.call("GET", "/kfam/v1/bindings?user=bob@example.com", alice)[1]["bindings"][0]["user"]["name"] \
        == "bob@example.com"
    assert server.call("GET", "/kfam/v1/bindings?role=view", alice) == (200, {})

    assert server.call("DELETE", "/kfam/v1/bindings", bob, BOB_EDIT)[0] == 403  # a contributor is not the owner
    assert server.call("DELETE", "/kfam/v1/bindings", alice, BOB_EDIT)[0] == 200
    status, answer = server.call("DELETE", "/kfam/v1/bindings", alice, BOB_EDIT)
    assert status == 404 and "not found" in answer["message"]

    viewer = {**BOB_EDIT, "roleRef": {"kind": "ClusterRole", "name": "view"}}
    assert server.call("POST", "/kfam/v1/bindings", ADMIN_TOKEN, viewer)[0] == 200  # the administrator may
    for body, status_code, words in (
            ({**BOB_EDIT, "referredNamespace": "nosuch"}, 404, 'profiles.kubeflow.org "nosuch" not found'),
            ({**BOB_EDIT, "roleRef": {"kind": "ClusterRole", "name": "owner"}}, 400, "roleRef.name"),
            ({"user": {"kind": "User"}, "referredNamespace": "team-vision"}, 400, "user.name"),
            ([1, 2], 400, "a binding is a JSON object")):
        status, answer = server.call("POST", "/kfam/v1/bindings", alice, body)
        assert status == status_code and words in answer["message"], answer


def test_cluster_admin_is_who_may_do_everything(server: MultiUserServer) -> None:
    user_token("alice@example.com")
    token = user_token("root@example.com")
    ResourceStore().apply([{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": "root-admin"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                "name": "cluster-admin"},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                  "name": "root@example.com"}]}])
    rbac.note_written()  # written straight to the store: decisions read it now, not within a second
    assert server.call("GET", "/kfam/v1/role/clusteradmin?user=root@example.com", token) == (200, True)
    assert server.call("GET", "/kfam/v1/role/clusteradmin?user=alice@example.com", token) == (200, False)
    assert server.call("GET", "/kfam/v1/role/clusteradmin", token) == (200, False)

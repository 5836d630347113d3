"""RBAC objects written through the API take effect at once and obey Kubernetes' escalation rules; expired and
revoked tokens and a forged ``kubeflow-userid`` are refused; the ``kubernetes`` client sees the same decisions;
``millpond kubeconfig --user`` never puts a token beside an ``http://`` server."""

from __future__ import annotations

import datetime as dt
import time

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from millpond.access.credentials import Credentials
from millpond.settings import load_settings
from tests.kube_rbac.conftest import Team, millpond_cli
from tests.kube_support import Kubectl
from tests.tls_support import https_call

ROLE = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: NAME, namespace: team-a}
rules: [{apiGroups: ["GROUP"], resources: [RESOURCE], verbs: [get, list]}]
"""


def _kubectl_with_token(team: Team, token: str, name: str) -> Kubectl:
    config = yaml.safe_load(team.kubectl("alice").config.read_text())
    config["users"][0]["user"]["token"] = token
    folder = team.folder / name
    folder.mkdir(exist_ok=True)
    (folder / "kubeconfig").write_text(yaml.safe_dump(config))
    return Kubectl(folder / "kubeconfig", folder / "cache")


def test_a_binding_takes_effect_at_once_and_its_removal_too(team: Team) -> None:
    alice, bob = team.kubectl("alice"), team.kubectl("bob")
    assert "forbidden" in bob.run("get", "configmaps", "-n", "team-a").stderr
    alice.ok("create", "rolebinding", "user-bob-clusterrole-view", "--clusterrole=kubeflow-view", "--user=bob",
             "-n", "team-a")
    bob.ok("get", "configmaps", "-n", "team-a")  # no wait: the server that stored it decides with it
    assert bob.ok("auth", "can-i", "list", "configmaps", "-n", "team-a") == "yes\n"
    alice.ok("delete", "rolebinding", "user-bob-clusterrole-view", "-n", "team-a")
    assert "forbidden" in bob.run("get", "configmaps", "-n", "team-a").stderr


def test_nobody_grants_what_they_do_not_hold(team: Team) -> None:
    alice, root = team.kubectl("alice"), team.kubectl("root")
    held = alice.run("create", "-f", "-", stdin=ROLE.replace("NAME", "reader").replace("GROUP", "")
                     .replace("RESOURCE", "configmaps"))
    assert held.returncode == 0, held.stderr
    for name, group, resource in (("nodes-reader", "", "nodes"), ("any-reader", "*", "'*'")):
        refused = alice.run("create", "-f", "-", stdin=ROLE.replace("NAME", name).replace("GROUP", group)
                            .replace("RESOURCE", resource))
        assert refused.returncode == 1
        assert refused.stderr.startswith(f'Error from server (Forbidden): error when creating "STDIN": '
                                         f'roles.rbac.authorization.k8s.io "{name}" is forbidden: user "alice" '
                                         '(groups=["system:authenticated"]) is attempting to grant RBAC permissions '
                                         "not currently held"), refused.stderr
    escalated = alice.run("create", "rolebinding", "alice-cluster-admin", "--clusterrole=cluster-admin",
                          "--user=alice", "-n", "team-a")
    assert "is attempting to grant RBAC permissions not currently held" in escalated.stderr
    assert "forbidden" in alice.run("create", "clusterrolebinding", "mine", "--clusterrole=view",
                                    "--user=alice").stderr
    # a Role she holds every rule of may be bound; a binding to the role a contributor lacks may not
    alice.ok("create", "rolebinding", "carol-reader", "--role=reader", "--user=carol", "-n", "team-a")
    carol = team.kubectl("carol")
    assert "cannot create resource \"rolebindings\"" in carol.run(
        "create", "rolebinding", "x", "--role=reader", "--user=carol", "-n", "team-a").stderr
    # the escalate verb lets a holder write a role beyond its own rights, as upstream
    root.ok("create", "-f", "-", stdin=ROLE.replace("NAME", "escalator").replace("GROUP", "rbac.authorization.k8s.io")
            .replace("RESOURCE", "roles").replace("[get, list]", "[escalate, create]"))
    root.ok("create", "rolebinding", "alice-escalator", "--role=escalator", "--user=alice", "-n", "team-a")
    alice.ok("create", "-f", "-", stdin=ROLE.replace("NAME", "nodes-reader").replace("GROUP", "")
             .replace("RESOURCE", "nodes"))
    assert sorted(item["metadata"]["name"] for item in root.json("get", "roles", "-n", "team-a")["items"]) == \
        ["escalator", "nodes-reader", "reader"]
    for name in ("escalator", "nodes-reader", "reader"):
        root.ok("delete", "role", name, "-n", "team-a")
    for name in ("carol-reader", "alice-escalator"):
        root.ok("delete", "rolebinding", name, "-n", "team-a")


def test_expired_revoked_and_unknown_tokens_are_unauthorized(team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_HOME", str(team.home))
    credentials = Credentials(load_settings())
    short = credentials.issue_token("alice", "short-lived", dt.timedelta(seconds=1))
    while short.record.expires_at > dt.datetime.now(dt.timezone.utc):
        time.sleep(0.1)
    revoked = credentials.issue_token("alice", "to revoke")
    live = _kubectl_with_token(team, revoked.secret, "revoked")
    live.ok("get", "configmaps", "-n", "team-a")
    done = millpond_cli(team.home, "user", "token", "revoke", revoked.record.id)
    assert done.returncode == 0, done.stderr
    for name, token in (("expired", short.secret), ("revoked", revoked.secret), ("unknown", "mpt_" + "x" * 43)):
        refused = _kubectl_with_token(team, token, name).run("get", "configmaps", "-n", "team-a")
        assert refused.returncode == 1
        assert refused.stderr.splitlines()[-1].startswith("error: You must be logged in to the server"), name
        code, body = https_call(team.server.port, "/api/v1/namespaces/team-a/configmaps", team.server.ca, token)
        assert code == 401 and body["kind"] == "Status" and body["reason"] == "Unauthorized"


def test_a_forged_userid_header_is_refused(team: Team) -> None:
    for token in (None, team.tokens["carol"]):
        code, body = https_call(team.server.port, "/api/v1/namespaces/team-a/configmaps", team.server.ca, token,
                                method="POST", headers={"kubeflow-userid": "root", "Content-Type": "application/json"},
                                body=b'{"metadata": {"name": "forged"}, "data": {"a": "b"}}')
        assert code == 403 and body["reason"] == "Forbidden"
        assert "trusted only from the proxy addresses" in body["message"]
    names = [item["metadata"]["name"] for item in team.kubectl("root").json("get", "cm", "-n", "team-a")["items"]]
    assert "forged" not in names


def test_the_kubernetes_client_sees_the_same_decisions(team: Team) -> None:
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(team.kubectl("alice").config)))
    made = api.create_namespaced_config_map("team-a", k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="from-client"),
                                                                      data={"a": "b"}))
    assert made.metadata.name == "from-client"
    assert "from-client" in [item.metadata.name for item in api.list_namespaced_config_map("team-a").items]
    with pytest.raises(ApiException) as refused:
        api.list_namespaced_config_map("team-b")
    assert refused.value.status == 403
    status = yaml.safe_load(refused.value.body)
    assert status["reason"] == "Forbidden" and status["details"] == {"group": "", "kind": "configmaps", "name": ""}
    assert status["message"] == ('configmaps is forbidden: User "alice" cannot list resource "configmaps" in API '
                                 'group "" in the namespace "team-b"')
    viewer = k8s.CoreV1Api(k8s_config.new_client_from_config(str(team.kubectl("carol").config)))
    with pytest.raises(ApiException) as deleting:
        viewer.delete_namespaced_config_map("from-client", "team-a")
    assert deleting.value.status == 403
    assert yaml.safe_load(deleting.value.body)["details"] == {"group": "", "kind": "configmaps",
                                                              "name": "from-client"}
    review = k8s.AuthorizationV1Api(k8s_config.new_client_from_config(str(team.kubectl("carol").config)))
    answer = review.create_self_subject_access_review(k8s.V1SelfSubjectAccessReview(
        spec=k8s.V1SelfSubjectAccessReviewSpec(resource_attributes=k8s.V1ResourceAttributes(
            namespace="team-a", verb="delete", resource="configmaps"))))
    assert answer.status.allowed is False
    api.delete_namespaced_config_map("from-client", "team-a")


def test_an_admin_asks_what_another_user_may_do(team: Team) -> None:
    root = k8s.AuthorizationV1Api(k8s_config.new_client_from_config(str(team.kubectl("root").config)))
    asked = k8s.V1SubjectAccessReview(spec=k8s.V1SubjectAccessReviewSpec(
        user="carol", groups=["system:authenticated"], resource_attributes=k8s.V1ResourceAttributes(
            namespace="team-a", verb="list", resource="configmaps")))
    answer = root.create_subject_access_review(asked)
    assert answer.status.allowed is True and "user-carol-clusterrole-view" in answer.status.reason
    alice = k8s.AuthorizationV1Api(k8s_config.new_client_from_config(str(team.kubectl("alice").config)))
    with pytest.raises(ApiException) as refused:
        alice.create_subject_access_review(asked)
    assert refused.value.status == 403
    local = alice.create_namespaced_local_subject_access_review("team-a", k8s.V1LocalSubjectAccessReview(
        metadata=k8s.V1ObjectMeta(namespace="team-a"), spec=k8s.V1SubjectAccessReviewSpec(
            user="carol", resource_attributes=k8s.V1ResourceAttributes(namespace="team-a", verb="create",
                                                                      resource="configmaps"))))
    assert local.status.allowed is False
    with pytest.raises(ApiException) as elsewhere:
        alice.create_namespaced_local_subject_access_review("team-b", k8s.V1LocalSubjectAccessReview(
            metadata=k8s.V1ObjectMeta(namespace="team-b"), spec=k8s.V1SubjectAccessReviewSpec(
                user="bob", resource_attributes=k8s.V1ResourceAttributes(namespace="team-b", verb="get",
                                                                        resource="configmaps"))))
    assert elsewhere.value.status == 403


def test_kubeconfig_user_refuses_plain_http_and_unknown_users(team: Team, tmp_path) -> None:  # type: ignore[no-untyped-def]
    before = millpond_cli(team.home, "user", "token", "list", "bob").stdout
    plain = millpond_cli(team.home, "kubeconfig", "--user", "bob", "--server", "http://127.0.0.1:18150",
                         "--file", str(tmp_path / "config"))
    assert plain.returncode == 2 and plain.stderr.startswith("error: refusing to put 'bob''s token")
    assert len(plain.stderr.splitlines()) == 1 and not (tmp_path / "config").exists()
    unknown = millpond_cli(team.home, "kubeconfig", "--user", "nobody", "--server", team.server.url,
                           "--certificate-authority", str(team.server.ca), "--file", str(tmp_path / "config"))
    assert unknown.returncode == 2 and unknown.stderr == "error: user 'nobody' not found (millpond user add nobody)\n"
    assert millpond_cli(team.home, "user", "token", "list", "bob").stdout == before
    printed = millpond_cli(team.home, "kubeconfig", "--user", "bob", "--server", team.server.url,
                           "--certificate-authority", str(team.server.ca), "--print", "--namespace", "team-b")
    config = yaml.safe_load(printed.stdout)
    assert config["current-context"] == "millpond-bob"
    assert config["contexts"][0]["context"]["namespace"] == "team-b"
    assert config["users"][0]["user"]["token"].startswith("mpt_")
    assert "kubeconfig context millpond-bob" in millpond_cli(team.home, "user", "token", "list", "bob").stdout

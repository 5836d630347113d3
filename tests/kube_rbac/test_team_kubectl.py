"""Two users, a viewer and an administrator through the real ``kubectl``: each sees and acts only in the namespaces
RBAC binds them in, a ``view`` contributor reads and every write is refused with nothing changed, and every refusal
is kube-apiserver's ``Forbidden`` in its words."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.kube_rbac.conftest import Team

JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {name: hello, namespace: NS}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox, command: [echo, hi]}]
"""


def _forbidden(who: str, verb: str, resource: str, namespace: str = "", group: str = "") -> str:
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    return f'User "{who}" cannot {verb} resource "{resource}" in API group "{group}"{where}'


def _names(listing: dict) -> list[str]:
    return [item["metadata"]["name"] for item in listing["items"]]


@pytest.mark.parametrize(("who", "home", "other"), [("alice", "team-a", "team-b"), ("bob", "team-b", "team-a")])
def test_each_user_acts_in_their_namespace_only(team: Team, who: str, home: str, other: str) -> None:
    kubectl, root = team.kubectl(who), team.kubectl("root")
    kubectl.ok("create", "configmap", f"{who}-settings", "-n", home, "--from-literal=mode=fast")
    kubectl.ok("create", "secret", "generic", f"{who}-keys", "-n", home, "--from-literal=key=value")
    assert f"{who}-settings" in _names(kubectl.json("get", "configmaps", "-n", home))
    assert kubectl.json("get", "secret", f"{who}-keys", "-n", home)["data"] == {"key": "dmFsdWU="}
    assert kubectl.json("get", "namespace", home)["metadata"]["name"] == home  # its own namespace, by name

    listed = kubectl.run("get", "configmaps", "-n", other)
    assert listed.returncode == 1
    assert listed.stderr == ("Error from server (Forbidden): configmaps is forbidden: "
                             f"{_forbidden(who, 'list', 'configmaps', other)}\n")
    read = kubectl.run("get", "secret", "anything", "-n", other)
    assert read.stderr == ('Error from server (Forbidden): secrets "anything" is forbidden: '
                           f"{_forbidden(who, 'get', 'secrets', other)}\n")
    made = kubectl.run("create", "configmap", "intruder", "-n", other, "--from-literal=a=b")
    assert made.returncode == 1 and _forbidden(who, "create", "configmaps", other) in made.stderr
    assert "intruder" not in _names(root.json("get", "configmaps", "-n", other))
    assert _forbidden(who, "get", "namespaces", other) in kubectl.run("get", "namespace", other).stderr

    # a batch Job: created (a server-side dry run: authorized as a create) at home, refused elsewhere
    kubectl.ok("create", "-f", "-", "--dry-run=server", stdin=JOB.replace("NS", home))
    refused = kubectl.run("create", "-f", "-", stdin=JOB.replace("NS", other))
    assert refused.returncode == 1 and _forbidden(who, "create", "jobs", other, "batch") in refused.stderr

    assert kubectl.ok("delete", "configmap", f"{who}-settings", "-n", home) == \
        f'configmap "{who}-settings" deleted from {home} namespace\n'
    kubectl.ok("delete", "secret", f"{who}-keys", "-n", home)
    assert f"{who}-settings" not in _names(root.json("get", "configmaps", "-n", home))


def test_a_viewer_reads_and_every_write_is_refused_with_nothing_changed(team: Team) -> None:
    root, carol = team.kubectl("root"), team.kubectl("carol")
    root.ok("create", "configmap", "shared", "-n", "team-a", "--from-literal=mode=fast")
    root.ok("create", "secret", "generic", "private", "-n", "team-a", "--from-literal=key=value")
    before = root.json("get", "configmap", "shared", "-n", "team-a")
    assert carol.json("get", "configmap", "shared", "-n", "team-a")["data"] == {"mode": "fast"}
    assert "shared" in _names(carol.json("get", "configmaps", "-n", "team-a"))
    assert _forbidden("carol", "get", "secrets", "team-a") in carol.run("get", "secret", "private", "-n",
                                                                         "team-a").stderr
    changed = {**before, "data": {"mode": "slow"}}
    changed["metadata"] = {key: before["metadata"][key] for key in ("name", "namespace")}
    writes = {
        "create": (("create", "configmap", "more", "-n", "team-a", "--from-literal=a=b"), None),
        "apply": (("apply", "-f", "-"), json.dumps(changed)),
        "replace": (("replace", "-f", "-"), json.dumps({**changed, "metadata": before["metadata"]})),
        "label": (("label", "configmap", "shared", "-n", "team-a", "owner=carol"), None),
        "annotate": (("annotate", "configmap", "shared", "-n", "team-a", "note=x"), None),
        "patch": (("patch", "configmap", "shared", "-n", "team-a", "-p", '{"data": {"mode": "slow"}}'), None),
        "delete": (("delete", "configmap", "shared", "-n", "team-a"), None),
        "delete --all": (("delete", "configmaps", "--all", "-n", "team-a"), None),
        "rolebinding": (("create", "rolebinding", "mine", "--clusterrole=kubeflow-admin", "--user=carol",
                         "-n", "team-a"), None),
        "job": (("create", "-f", "-"), JOB.replace("NS", "team-a")),
    }
    for what, (args, stdin) in writes.items():
        done = carol.run(*args, stdin=stdin)
        assert done.returncode == 1, what
        assert "Forbidden" in done.stderr or "forbidden" in done.stderr, (what, done.stderr)
        assert 'User "carol" cannot' in done.stderr, (what, done.stderr)
    after = root.json("get", "configmap", "shared", "-n", "team-a")
    assert after == before
    assert _names(root.json("get", "rolebindings", "-n", "team-a")) == ["namespaceAdmin",
                                                                        "user-carol-clusterrole-view"]
    assert _names(root.json("get", "jobs", "-n", "team-a")) == []


def test_all_namespaces_and_cluster_scope_need_a_cluster_wide_grant(team: Team) -> None:
    for who in ("alice", "bob", "carol"):
        done = team.kubectl(who).run("get", "pods", "-A")
        assert done.stderr == ("Error from server (Forbidden): pods is forbidden: "
                               f"{_forbidden(who, 'list', 'pods')}\n")
        assert _forbidden(who, "list", "namespaces") in team.kubectl(who).run("get", "namespaces").stderr
        assert _forbidden(who, "list", "nodes") in team.kubectl(who).run("get", "nodes").stderr
    root = team.kubectl("root")
    root.ok("get", "pods", "-A")
    assert {"team-a", "team-b"} <= set(_names(root.json("get", "namespaces")))


def test_can_i_answers_what_the_request_then_does(team: Team) -> None:
    """``kubectl auth can-i`` (a SelfSubjectAccessReview) says yes exactly when the request is then allowed."""
    cases = [
        ("create", "configmaps", "team-a", ("create", "configmap", "probe", "--from-literal=a=b", "--dry-run=server")),
        ("get", "configmaps", "team-b", ("get", "configmap", "missing")),
        ("list", "secrets", "team-a", ("get", "secrets")),
        ("delete", "configmaps", "team-a", ("delete", "configmap", "missing")),
        ("create", "rolebindings", "team-a", ("create", "rolebinding", "probe", "--clusterrole=kubeflow-view",
                                              "--user=nobody", "--dry-run=server")),
        ("list", "pytorchjobs.kubeflow.org", "team-b", ("get", "pytorchjobs")),
    ]
    answers = {}
    for who in ("alice", "bob", "carol"):
        kubectl = team.kubectl(who)
        for verb, resource, namespace, request in cases:
            asked = kubectl.run("auth", "can-i", verb, resource, "-n", namespace)
            assert asked.stdout in ("yes\n", "no\n"), asked.stderr
            done = kubectl.run(*request, "-n", namespace)
            refused = "forbidden" in done.stderr.lower()
            assert (asked.stdout == "yes\n") == (not refused), (who, verb, resource, namespace, done.stderr)
            assert (asked.returncode == 0) == (asked.stdout == "yes\n")
            answers[(who, verb, resource.split(".")[0], namespace)] = asked.stdout.strip()
    assert answers[("alice", "create", "rolebindings", "team-a")] == "yes"  # kubeflow-admin manages bindings
    assert answers[("carol", "list", "secrets", "team-a")] == "no"  # view never reads secrets
    assert answers[("bob", "list", "pytorchjobs", "team-b")] == "yes"
    assert answers[("bob", "get", "configmaps", "team-b")] == "yes"
    assert answers[("alice", "get", "configmaps", "team-b")] == "no"
    # a subresource, a name and a non-resource URL
    alice = team.kubectl("alice")
    assert alice.run("auth", "can-i", "get", "pods", "--subresource=log", "-n", "team-a").stdout == "yes\n"
    assert team.kubectl("carol").run("auth", "can-i", "get", "pods/log", "-n", "team-b").stdout == "no\n"
    assert alice.run("auth", "can-i", "get", "/version").stdout == "yes\n"
    assert alice.run("auth", "can-i", "get", "/metrics").stdout == "no\n"
    assert team.kubectl("root").run("auth", "can-i", "*", "*", "-A").stdout == "yes\n"


def test_can_i_list_and_whoami(team: Team) -> None:
    listed = team.kubectl("carol").ok("auth", "can-i", "--list", "-n", "team-a")
    rows = {line.split()[0]: line for line in listed.splitlines()[1:] if not line.startswith(" ")}
    assert rows["configmaps"].endswith("[get list watch]")
    assert "secrets" not in rows and "rolebindings.rbac.authorization.k8s.io" not in rows
    assert rows["selfsubjectaccessreviews.authorization.k8s.io"].endswith("[create]")
    elsewhere = team.kubectl("carol").ok("auth", "can-i", "--list", "-n", "team-b")
    assert "configmaps " not in elsewhere
    for who in ("alice", "bob", "carol", "root"):
        shown = team.kubectl(who).ok("auth", "whoami", "-o", "json")
        assert yaml.safe_load(shown)["status"]["userInfo"] == {"username": who, "groups": ["system:authenticated"]}


def test_impersonation_needs_the_impersonate_verb(team: Team) -> None:
    """kubectl sends ``Impersonate-User`` on discovery too; with a cold discovery cache client-go cannot decode
    the refusal under its aggregated-discovery Accept and prints ``Forbidden: unknown`` (as against
    kube-apiserver), so each user's cache is warmed first, as any earlier command of theirs would have."""
    team.kubectl("alice").ok("get", "configmaps", "-n", "team-a")
    team.kubectl("bob").run("get", "configmaps", "-n", "team-a")  # bob's discovery; the list itself may be refused
    asked = team.kubectl("alice").run("get", "configmaps", "-n", "team-a", "--as", "bob")
    assert asked.stderr == ('Error from server (Forbidden): users "bob" is forbidden: '
                            f"{_forbidden('alice', 'impersonate', 'users')}\n")
    grouped = team.kubectl("bob").run("get", "configmaps", "-n", "team-a", "--as", "bob", "--as-group",
                                      "system:masters")
    assert "cannot impersonate" in grouped.stderr
    # cluster-admin may impersonate, and then acts as exactly that user
    as_carol = team.kubectl("root").run("create", "configmap", "by-root", "-n", "team-a", "--from-literal=a=b",
                                        "--as", "carol")
    assert _forbidden("carol", "create", "configmaps", "team-a") in as_carol.stderr
    assert team.kubectl("root").ok("auth", "whoami", "--as", "carol").split()[-1] == "[system:authenticated]"


def test_clusterroles_list_the_built_in_ones(team: Team) -> None:
    root = team.kubectl("root")
    names = _names(root.json("get", "clusterroles"))
    assert {"cluster-admin", "admin", "edit", "view", "kubeflow-admin", "kubeflow-edit", "kubeflow-view",
            "system:basic-user"} <= set(names)
    admin = root.json("get", "clusterrole", "kubeflow-admin")
    assert admin["aggregationRule"]["clusterRoleSelectors"] == [
        {"matchLabels": {"rbac.authorization.kubeflow.org/aggregate-to-kubeflow-admin": "true"}}]
    bindings = _names(root.json("get", "clusterrolebindings"))
    assert {"millpond-admin-root", "system:basic-user", "system:discovery"} <= set(bindings)
    refused = root.run("delete", "clusterrole", "view")
    assert refused.returncode == 1 and "built in" in refused.stderr
    assert _forbidden("alice", "list", "clusterroles", group="rbac.authorization.k8s.io") in \
        team.kubectl("alice").run("get", "clusterroles").stderr

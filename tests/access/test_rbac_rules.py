"""RBAC's rule matching and policy, against Kubernetes' documented semantics (records only, no server)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from millpond.access.attributes import Attributes
from millpond.access.identity import ADMIN, ANONYMOUS, user
from millpond.access.rbac import Policy
from millpond.access.rules import Rule

RBAC = "rbac.authorization.k8s.io"


def binding(name: str, namespace: str, role: str, subject: dict[str, str], kind: str = "ClusterRole") -> dict[str, Any]:
    return {"kind": "RoleBinding", "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": RBAC, "kind": kind, "name": role}, "subjects": [subject]}


def person(name: str) -> dict[str, str]:
    return {"apiGroup": RBAC, "kind": "User", "name": name}


ALICE, BOB, CAROL = user("alice@example.org", "token"), user("bob", "token"), user("carol", "token")
POLICY = Policy.of([
    binding("namespaceAdmin", "team-a", "kubeflow-admin", person(ALICE.name)),
    binding("user-bob-clusterrole-edit", "team-b", "kubeflow-edit", person("bob")),
    binding("user-carol-clusterrole-view", "team-a", "kubeflow-view", person("carol")),
    {"kind": "Role", "metadata": {"name": "read-cm", "namespace": "team-c"},
     "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["one"]}]},
    binding("read-one", "team-c", "read-cm", person("bob"), kind="Role"),
])


@pytest.mark.parametrize(("who", "asked", "allowed"), [
    (ALICE, Attributes("create", "team-a", "kubeflow.org", "pytorchjobs"), True),
    (ALICE, Attributes("create", "team-a", RBAC, "rolebindings"), True),  # admin manages its namespace's bindings
    (ALICE, Attributes("list", "team-b", "", "pods"), False),
    (ALICE, Attributes("list", "", "", "pods"), False),  # every namespace at once needs a ClusterRoleBinding
    (BOB, Attributes("delete", "team-b", "pipelines.kubeflow.org", "runs", name="r"), True),
    (BOB, Attributes("create", "team-b", RBAC, "rolebindings"), False),  # edit never writes RBAC objects
    (BOB, Attributes("get", "team-b", "", "secrets"), True),  # edit reads Secrets
    (CAROL, Attributes("get", "team-a", "", "secrets"), False),  # view never does
    (CAROL, Attributes("list", "team-a", "kubeflow.org", "pytorchjobs"), True),
    (CAROL, Attributes("get", "team-a", "", "pods", "log"), True),
    (CAROL, Attributes("terminate", "team-a", "pipelines.kubeflow.org", "runs"), False),
    (CAROL, Attributes("readArtifact", "team-a", "pipelines.kubeflow.org", "runs"), True),
    (BOB, Attributes("get", "team-c", "", "configmaps", name="one"), True),
    (BOB, Attributes("get", "team-c", "", "configmaps", name="two"), False),
    (BOB, Attributes("list", "team-c", "", "configmaps"), False),  # a rule with names never allows a list
    (BOB, Attributes("get", path="/apis"), True),  # system:discovery, to every authenticated user
    (BOB, Attributes("get", path="/metrics"), False),
    (BOB, Attributes("create", api_group="authorization.k8s.io", resource="selfsubjectaccessreviews"), True),
    (ANONYMOUS, Attributes("get", path="/version"), True),  # system:public-info-viewer
    (ANONYMOUS, Attributes("get", path="/apis"), False),
])
def test_decisions_follow_kubernetes_rbac(who: Any, asked: Attributes, allowed: bool) -> None:
    decision = POLICY.decide(who, asked)
    assert decision.allowed is allowed, decision.reason
    if not allowed:
        assert decision.reason.startswith(f'User "{who.name}" cannot {asked.verb}')


def test_a_role_binding_never_grants_non_resource_urls() -> None:
    policy = Policy.of([
        {"kind": "ClusterRole", "metadata": {"name": "metrics"},
         "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
        binding("metrics", "team-a", "metrics", person("bob")),
    ])
    assert not policy.decide(BOB, Attributes("get", path="/metrics")).allowed
    policy = Policy.of([*[{"kind": "ClusterRole", "metadata": {"name": "metrics"},
                           "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}],
                        {**binding("metrics", "", "metrics", person("bob")), "kind": "ClusterRoleBinding"}])
    assert policy.decide(BOB, Attributes("get", path="/metrics")).allowed


def test_a_labelled_cluster_role_joins_the_kubeflow_aggregate() -> None:
    """A component's ClusterRole labelled aggregate-to-kubeflow-edit adds its rules to kubeflow-edit (and so to
    kubeflow-admin, which aggregates kubeflow-edit), as Kubeflow's roles do."""
    asked = Attributes("create", "team-b", "example.com", "widgets")
    assert not POLICY.decide(BOB, asked).allowed
    widgets = {"kind": "ClusterRole", "metadata": {"name": "widgets-edit", "labels": {
        "rbac.authorization.kubeflow.org/aggregate-to-kubeflow-edit": "true"}},
        "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["create"]}]}
    policy = Policy.of([binding("b", "team-b", "kubeflow-edit", person("bob")),
                        binding("a", "team-b", "kubeflow-admin", person(ALICE.name)), widgets])
    assert policy.decide(BOB, asked).allowed
    assert policy.decide(ALICE, asked).allowed
    assert not policy.decide(CAROL, asked).allowed


def test_groups_and_service_accounts_are_subjects() -> None:
    policy = Policy.of([
        binding("g", "team-a", "view", {"kind": "Group", "name": "data-team"}),
        binding("sa", "team-a", "edit", {"kind": "ServiceAccount", "name": "default-editor"}),
    ])
    member = user("dora", "proxy")
    assert not policy.decide(member, Attributes("list", "team-a", "", "configmaps")).allowed
    grouped = type(member)("dora", (*member.groups, "data-team"), "proxy")
    assert policy.decide(grouped, Attributes("list", "team-a", "", "configmaps")).allowed
    account = type(member)("system:serviceaccount:team-a:default-editor", member.groups, "token")
    assert policy.decide(account, Attributes("create", "team-a", "", "configmaps")).allowed
    assert policy.namespaces_of(grouped) == {"team-a"}


def test_an_aggregation_cycle_ends() -> None:
    def aggregating(name: str, label: str, own: str) -> dict[str, Any]:
        return {"kind": "ClusterRole", "metadata": {"name": name, "labels": {own: "true"}},
                "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]},
                "rules": [{"apiGroups": [""], "resources": [name], "verbs": ["get"]}]}

    policy = Policy.of([aggregating("x", "to-x", "to-y"), aggregating("y", "to-y", "to-x")])
    names = {rule.resources[0] for rule in policy.cluster_role_rules("x")}
    assert names == {"x", "y"}


def test_the_server_token_is_never_refused_by_the_policy_holder() -> None:
    assert ADMIN.is_master and not ALICE.is_master


WORDS = st.sampled_from(["get", "list", "create", "delete", "*", "pods", "secrets", "", "kubeflow.org", "x/y"])


@given(verbs=st.lists(WORDS, max_size=3), groups=st.lists(WORDS, max_size=3),
       resources=st.lists(st.sampled_from(["pods", "pods/log", "*", "*/log", "secrets", "runs"]), max_size=3),
       names=st.lists(st.sampled_from(["a", "b"]), max_size=2),
       verb=st.sampled_from(["get", "list", "create", "delete"]), group=st.sampled_from(["", "kubeflow.org"]),
       resource=st.sampled_from(["pods", "secrets", "runs"]), sub=st.sampled_from(["", "log"]),
       name=st.sampled_from(["", "a", "b"]))
def test_rule_matching_matches_kubernetes_definition(verbs: list[str], groups: list[str], resources: list[str],
                                                     names: list[str], verb: str, group: str, resource: str,
                                                     sub: str, name: str) -> None:
    """``Rule.allows`` against a direct transcription of Kubernetes' ``RuleAllows`` definition."""
    rule = Rule(tuple(verbs), tuple(groups), tuple(resources), tuple(names))
    asked = Attributes(verb, "ns", group, resource, sub, name)
    combined = f"{resource}/{sub}" if sub else resource
    expected = (("*" in verbs or verb in verbs) and ("*" in groups or group in groups)
                and any(r in ("*", combined) or (sub and r == f"*/{sub}") for r in resources)
                and (not names or name in names))
    assert rule.allows(asked) is bool(expected)

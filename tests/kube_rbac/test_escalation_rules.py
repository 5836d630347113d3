"""Kubernetes' coverage of one set of RBAC rules by another (``rbac/validation.Covers``), as the escalation check
reads it, and the attributes a Kubernetes API request is asked with (``RequestInfoFactory``)."""

from __future__ import annotations

import pytest

from millpond.access.attributes import Attributes
from millpond.access.escalation import missing
from millpond.access.rules import Rule
from millpond.errors import UserError
from millpond.names import check_object_name
from millpond.server.kube.authorize import forbidden, resource_attributes
from millpond.server.kube.paths import parse

ALL = Rule(("*",), ("*",), ("*",))


@pytest.mark.parametrize(("held", "wanted", "lacking"), [
    ([ALL], [Rule(("get", "delete"), ("", "apps"), ("pods", "deployments/scale"))], 0),
    ([Rule(("get",), ("",), ("pods",))], [Rule(("get", "list"), ("",), ("pods",))], 1),
    ([Rule(("get",), ("",), ("pods",))], [Rule(("get",), ("",), ("pods/log",))], 1),  # a subresource is its own
    ([Rule(("get",), ("",), ("*/log",))], [Rule(("get",), ("",), ("pods/log", "pods"))], 1),
    ([Rule(("get",), ("",), ("pods",), ("a",))], [Rule(("get",), ("",), ("pods",), ("a",))], 0),
    ([Rule(("get",), ("",), ("pods",), ("a",))], [Rule(("get",), ("",), ("pods",))], 1),  # names cover only names
    ([Rule(("get",), ("",), ("pods",))], [Rule(("get",), ("",), ("pods",), ("a", "b"))], 0),
    ([Rule(("get",), non_resource_urls=("/apis/*",))], [Rule(("get",), non_resource_urls=("/apis/x", "/api"))], 1),
    ([Rule(("*",), ("*",), ("*",))], [Rule(("get",), non_resource_urls=("/metrics",))], 1),  # URLs are separate
])
def test_held_rules_cover_what_kubernetes_says(held: list[Rule], wanted: list[Rule], lacking: int) -> None:
    assert len(missing(held, wanted)) == lacking


@pytest.mark.parametrize(("method", "path", "query", "asked"), [
    ("GET", "/api/v1/namespaces/team-a/pods", {}, Attributes("list", "team-a", "", "pods")),
    ("GET", "/api/v1/namespaces/team-a/pods", {"watch": "true"}, Attributes("watch", "team-a", "", "pods")),
    ("GET", "/api/v1/pods", {}, Attributes("list", "", "", "pods")),
    ("GET", "/api/v1/namespaces/team-a/pods/p/log", {}, Attributes("get", "team-a", "", "pods", "log", "p")),
    ("GET", "/api/v1/namespaces/team-a", {}, Attributes("get", "team-a", "", "namespaces", "", "team-a")),
    ("PUT", "/api/v1/namespaces/team-a/status", {}, Attributes("update", "team-a", "", "namespaces", "status",
                                                               "team-a")),
    ("DELETE", "/apis/batch/v1/namespaces/ns/jobs", {}, Attributes("deletecollection", "ns", "batch", "jobs")),
    ("DELETE", "/apis/batch/v1/namespaces/ns/jobs/j", {}, Attributes("delete", "ns", "batch", "jobs", "", "j")),
    ("PATCH", "/apis/kubeflow.org/v1/namespaces/ns/pytorchjobs/p", {},
     Attributes("patch", "ns", "kubeflow.org", "pytorchjobs", "", "p")),
    ("POST", "/api/v1/namespaces/ns/configmaps", {}, Attributes("create", "ns", "", "configmaps")),
    ("GET", "/api/v1/namespaces/ns/configmaps", {"fieldSelector": "metadata.name=c"},
     Attributes("list", "ns", "", "configmaps", "", "c")),
])
def test_a_request_is_asked_as_kube_apiserver_asks_it(method: str, path: str, query: dict[str, str],
                                                      asked: Attributes) -> None:
    target = parse(path)
    assert target is not None
    assert resource_attributes(method, target, query) == asked


def test_a_refusal_is_worded_as_kube_apiserver_words_it() -> None:
    refused = forbidden(Attributes("get", "team-b", "kubeflow.org", "pytorchjobs", "", "mnist"), "alice")
    assert refused.code == 403 and refused.reason == "Forbidden"
    assert refused.message == ('pytorchjobs.kubeflow.org "mnist" is forbidden: User "alice" cannot get resource '
                               '"pytorchjobs" in API group "kubeflow.org" in the namespace "team-b"')
    assert refused.details == {"name": "mnist", "group": "kubeflow.org", "kind": "pytorchjobs"}
    assert forbidden(Attributes("get", path="/metrics"), "bob").message == \
        'forbidden: User "bob" cannot get path "/metrics"'


@pytest.mark.parametrize("name", ["namespaceAdmin", "system:basic-user", "user-alice-example-com-clusterrole-edit"])
def test_rbac_objects_are_named_by_path_segments(name: str) -> None:
    """``ValidateRBACName``: Kubeflow's profile controller names its owner's RoleBinding ``namespaceAdmin``."""
    assert check_object_name(name, "metadata.name", "RoleBinding") == name
    with pytest.raises(UserError):
        check_object_name(name.replace("-", "_").replace(":", "_") + "_", "metadata.name", "ConfigMap")


@pytest.mark.parametrize("name", ["a/b", "a%2f", ".", "..", "line\nbreak"])
def test_an_rbac_name_is_still_one_path_segment(name: str) -> None:
    with pytest.raises(UserError):
        check_object_name(name, "metadata.name", "ClusterRole")

"""Every route × verb × role through the real HTTP API, against an expectation written from Kubernetes' and
Kubeflow's roles rather than from millpond's rule matcher.

The expectation (``expected``) reads the roles as their documentation states them: a RoleBinding to
``kubeflow-view`` reads every namespaced resource of its namespace but Secrets, Roles and RoleBindings, and the
namespace itself; ``kubeflow-edit`` also writes them (Secrets included, RBAC objects not); ``kubeflow-admin``
does everything in its namespace; nothing of the three reaches another namespace, the cluster scope or an
all-namespaces collection; ``cluster-admin`` does everything. Writes are sent with ``dryRun=All`` (authorized as
the write itself, as upstream) so the walk changes nothing; a refusal must be a ``Forbidden`` ``Status`` naming
the user, the verb and the resource.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millpond.kind_handler import KindName
from millpond.kinds import REGISTRY
from tests.kube_rbac.conftest import Team

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
READS = ("get", "list", "watch")
GRANTS = {"alice": ("team-a", "admin"), "bob": ("team-b", "edit"), "carol": ("team-a", "view")}
USERS = ("alice", "bob", "carol", "root", "dave")  # dave: a user bound nowhere
SCOPES = ("team-a", "team-b", "")  # "": the cluster scope, or every namespace
RBAC = "rbac.authorization.k8s.io"
KINDS = sorted(REGISTRY, key=lambda kind: (kind.group, kind.plural))


@dataclass(frozen=True)
class Asked:
    kind: KindName
    verb: str
    namespace: str  # the namespace the request carries ("" cluster-wide)
    url: str
    method: str


def request_for(kind: KindName, verb: str, scope: str) -> Asked:
    """The request of ``verb`` on ``kind`` in ``scope`` (a Namespace is named by the scope), and its namespace."""
    prefix = f"/apis/{kind.group}/{kind.versions[0]}" if kind.group else f"/api/{kind.versions[0]}"
    named = verb in ("get", "update", "patch", "delete")
    if kind.cluster_scoped:
        collection = f"{prefix}/{kind.plural}"
        name = (scope or "team-a") if kind.plural == "namespaces" else "walk-missing"
        namespace = name if named and kind.plural == "namespaces" and not kind.group else ""
    else:
        collection = f"{prefix}/namespaces/{scope}/{kind.plural}" if scope else f"{prefix}/{kind.plural}"
        name, namespace = "walk-missing", scope
    url = f"{collection}/{name}" if named else collection
    method = {"get": "GET", "list": "GET", "watch": "GET", "create": "POST", "update": "PUT", "patch": "PATCH",
              "delete": "DELETE", "deletecollection": "DELETE"}[verb]
    query = {"watch": "?watch=true&timeoutSeconds=1"}.get(verb, "" if verb in READS else "?dryRun=All")
    return Asked(kind, verb, namespace, url + query, method)


def expected(who: str, asked: Asked) -> bool:
    """Whether ``who`` may do ``asked``, from the roles' documented meaning."""
    if who == "root":
        return True
    if who not in GRANTS:
        return False
    home, level = GRANTS[who]
    if asked.namespace != home:
        return False
    kind = asked.kind
    if kind.cluster_scoped:
        return kind.plural == "namespaces" and asked.verb in READS
    rbac_object = kind.group == RBAC and kind.plural in ("roles", "rolebindings")
    if level == "view":
        return asked.verb in READS and not rbac_object and not (kind.group == "" and kind.plural == "secrets")
    if level == "edit":
        return not rbac_object
    return True


def send(team: Team, who: str, asked: Asked) -> tuple[int, dict | None]:
    headers = {"Authorization": f"Bearer {team.tokens[who]}", "Accept": "application/json"}
    body = None
    if asked.method in ("POST", "PUT", "PATCH"):
        headers["Content-Type"] = "application/merge-patch+json" if asked.method == "PATCH" else "application/json"
        body = b"{}"
    with requests.request(asked.method, team.server.url + asked.url, headers=headers, data=body,
                          verify=str(team.server.ca), stream=True, timeout=60) as response:
        if response.status_code == 403:
            return 403, response.json()
        return response.status_code, None


def check(team: Team, who: str, asked: Asked) -> None:
    code, refusal = send(team, who, asked)
    allowed = expected(who, asked)
    assert (code != 403) == allowed, (who, asked, code, refusal)
    assert code < 500, (who, asked, code)
    if refusal is not None:
        assert refusal["kind"] == "Status" and refusal["reason"] == "Forbidden"
        assert f'User "{who}" cannot {asked.verb} resource "{asked.kind.plural}" in API group ' \
               f'"{asked.kind.group}"' in refusal["message"], refusal


@pytest.fixture(scope="module")
def walked(team: Team) -> Team:
    if "dave" not in team.tokens:
        team.add_user("dave")
    return team


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(KINDS), verb=st.sampled_from(VERBS), who=st.sampled_from(USERS),
       scope=st.sampled_from(SCOPES))
def test_every_route_verb_and_role_is_decided_as_rbac_says(walked: Team, kind: KindName, verb: str, who: str,
                                                           scope: str) -> None:
    check(walked, who, request_for(kind, verb, scope))


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: f"{kind.plural}.{kind.group}")
def test_a_viewer_is_refused_every_write_of_every_kind(walked: Team, kind: KindName) -> None:
    """The whole walk for the ``view`` contributor in its own namespace: every kind, every verb."""
    for verb in VERBS:
        check(walked, "carol", request_for(kind, verb, "team-a"))

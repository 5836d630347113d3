"""A team on one multi-user server: alice (kubeflow-edit in team-a), bob (kubeflow-edit in team-b), carol
(kubeflow-view in team-a) and dana (a cluster administrator, ``millpond user add --admin``), each with an API
token from ``millpond user token create``; contributors bound as Kubeflow's KFAM binds them (a RoleBinding
``user-<safe-email>-clusterrole-<role>`` with the ``user``/``role`` annotations), applied as manifests by the
server's own token (``system:masters``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from millpond.server.access import AccessSettings
from tests.server_support import Served

ROOT = Path(__file__).resolve().parents[2]
SERVER_TOKEN = "routes-multiuser-server-token"
TEAM_A, TEAM_B = "team-a", "team-b"
API = "/apis/millpond/v1"


@dataclass(frozen=True)
class Member:
    """A user of the team: ``role`` (kubeflow-edit, kubeflow-view) in ``namespace``; no role: an administrator."""

    name: str
    role: str
    namespace: str


ALICE = Member("alice@example.com", "edit", TEAM_A)
BOB = Member("bob@example.com", "edit", TEAM_B)
CAROL = Member("carol@example.com", "view", TEAM_A)
DANA = Member("dana@example.com", "", "")  # millpond user add --admin: ClusterRoleBinding to cluster-admin
MEMBERS = (ALICE, BOB, CAROL, DANA)


def millpond(*args: str, stdin: str = "") -> str:
    """The CLI on the test's home (MILLPOND_HOME of this process); its standard output."""
    done = subprocess.run([sys.executable, "-m", "millpond.cli.main", *args], input=stdin, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def contributor_binding(member: Member) -> dict[str, Any]:
    """KFAM's RoleBinding of a contributor (``kubeflow/kubeflow`` ``components/access-management``): name
    ``user-<email, lower-cased, every character but [a-z0-9] a '-'>-clusterrole-<role>``."""
    safe = re.sub(r"[^a-z0-9]", "-", member.name.lower())
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": f"user-{safe}-clusterrole-{member.role}", "namespace": member.namespace,
                         "annotations": {"user": member.name, "role": member.role}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": f"kubeflow-{member.role}"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": member.name}]}


class MultiUserServer(Served):
    """``millpond server --multi-user`` with a server token, in a thread."""

    def __init__(self) -> None:
        super().__init__(access=AccessSettings(multi_user=True, token=SERVER_TOKEN))


@dataclass
class Answer:
    status: int
    body: Any
    text: str


class Caller:
    """Requests to the server as one identity (its bearer token; None: nobody)."""

    def __init__(self, server: MultiUserServer, token: str | None, name: str) -> None:
        self.server, self.token, self.name = server, token, name

    def call(self, path: str, method: str = "GET", body: Any = None, content_type: str = "application/json") -> Answer:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        data = None
        if body is not None:
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
            headers["Content-Type"] = content_type
        request = urllib.request.Request(self.server.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        text = raw.decode("utf-8", errors="replace")
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        return Answer(status, parsed, text)

    def apply(self, *documents: dict[str, Any]) -> Answer:
        return self.call(f"{API}/fluid/apply", "POST", list(documents))


def team(server: MultiUserServer) -> dict[str, Caller]:
    """Every member's caller (after adding the users and binding them), and ``admin``: the server token."""
    callers = {"admin": Caller(server, SERVER_TOKEN, "system:admin"), "nobody": Caller(server, None, "nobody")}
    for member in MEMBERS:
        millpond("user", "add", member.name, "--password-stdin", *(["--admin"] if not member.role else []),
                 stdin="a long enough password\n")
        token = millpond("user", "token", "create", member.name, "--description", "routes test").strip()
        callers[member.name] = Caller(server, token, member.name)
    bound = callers["admin"].apply(*(contributor_binding(m) for m in MEMBERS if m.role))
    assert bound.status == 200, bound.text
    return callers

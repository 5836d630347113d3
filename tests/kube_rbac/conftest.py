"""A team on one ``millpond server --multi-user --tls`` (a real subprocess), each member with a kubeconfig context
that ``millpond kubeconfig --user`` wrote.

- ``alice`` owns ``team-a``: RoleBinding ``namespaceAdmin`` to ``kubeflow-admin``, as Kubeflow's profile
  controller binds a Profile's owner;
- ``bob`` contributes to ``team-b`` with ``edit`` (KFAM's ``user-bob-clusterrole-edit`` to ``kubeflow-edit``);
- ``carol`` contributes to ``team-a`` with ``view`` (``user-carol-clusterrole-view`` to ``kubeflow-view``);
- ``root`` is an administrator (``millpond user add --admin``: a ClusterRoleBinding to ``cluster-admin``).

The namespaces and bindings are made by ``root`` through kubectl, as an administrator would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.kube_support import Kubectl
from tests.server_support import module_home
from tests.tls_support import TlsServer

SERVER_TOKEN = "kube-rbac-server-token"
PASSWORD = "correct horse battery"
NAMESPACES = ("team-a", "team-b")


def millpond_cli(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The ``millpond`` command line on ``home`` (the machine's administrator), as a process of its own."""
    return subprocess.run([sys.executable, "-m", "millpond.cli.main", *args], input=stdin, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "MILLPOND_HOME": str(home)})


def binding(name: str, namespace: str, role: str, user: str, annotations: dict[str, str] | None = None) -> dict:
    """A RoleBinding of ``user`` to the ClusterRole ``role`` in ``namespace``."""
    metadata: dict = {"name": name, "namespace": namespace}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}


@dataclass
class Team:
    home: Path
    server: TlsServer
    folder: Path
    clients: dict[str, Kubectl] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)

    def kubectl(self, who: str) -> Kubectl:
        return self.clients[who]

    def add_user(self, name: str, *extra: str) -> None:
        made = millpond_cli(self.home, "user", "add", name, "--password-stdin", *extra, stdin=PASSWORD + "\n")
        assert made.returncode == 0, made.stderr
        config = self.folder / name / "kubeconfig"
        config.parent.mkdir(parents=True, exist_ok=True)
        written = millpond_cli(self.home, "kubeconfig", "--user", name, "--server", self.server.url,
                               "--certificate-authority", str(self.server.ca), "--file", str(config), "--use")
        assert written.returncode == 0, written.stderr
        document = yaml.safe_load(config.read_text())
        assert document["current-context"] == f"millpond-{name}"
        self.tokens[name] = document["users"][0]["user"]["token"]
        self.clients[name] = Kubectl(config, self.folder / name / "cache")


@pytest.fixture(scope="package")
def team_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "kube-rbac")


@pytest.fixture(scope="package")
def team(team_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    token_file = team_home.parent / "server-token"
    token_file.write_text(SERVER_TOKEN + "\n")
    token_file.chmod(0o600)
    server = TlsServer(team_home, ["--tls", "--multi-user", "--token-file", str(token_file)], token=SERVER_TOKEN)
    try:
        made = Team(team_home, server, tmp_path_factory.mktemp("kube-rbac-users"))
        made.add_user("root", "--admin")
        for name in ("alice", "bob", "carol"):
            made.add_user(name)
        root = made.kubectl("root")
        for namespace in NAMESPACES:
            root.ok("create", "namespace", namespace)
        bindings = [
            binding("namespaceAdmin", "team-a", "kubeflow-admin", "alice"),
            binding("user-bob-clusterrole-edit", "team-b", "kubeflow-edit", "bob", {"user": "bob", "role": "edit"}),
            binding("user-carol-clusterrole-view", "team-a", "kubeflow-view", "carol",
                    {"user": "carol", "role": "view"}),
        ]
        root.ok("apply", "-f", "-", stdin=yaml.safe_dump_all(bindings))
        yield made
    finally:
        server.stop()

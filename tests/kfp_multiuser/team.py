"""A team on one machine, for the KFP multi-user tests: a real ``millpond server --multi-user`` and its users.

alice (``kubeflow-edit`` in team-a), bob (``kubeflow-edit`` in team-b), carol (``kubeflow-view`` in team-a),
root (``millpond user add --admin``: bound to cluster-admin) and the server token (``system:masters``). Users
and tokens are made with the ``millpond user`` commands, the contributors' RoleBindings applied as the
manifests Kubeflow's KFAM writes (``user-<safe-email>-clusterrole-<role>``, annotations ``user``/``role``).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MILLPOND = Path(sys.executable).parent / "millpond"
SERVER_TOKEN = "server-admin-token-0123456789"
API = "/apis/v2beta1"


@dataclass(frozen=True)
class Member:
    email: str
    namespace: str  # "" for an administrator
    role: str  # edit, view, admin


MEMBERS = (Member("alice@example.com", "team-a", "edit"), Member("bob@example.com", "team-b", "edit"),
           Member("carol@example.com", "team-a", "view"), Member("root@example.com", "", "admin"))


def kfam_binding(member: Member) -> dict[str, Any]:
    """The RoleBinding Kubeflow's access management (KFAM) makes for a contributor."""
    safe = re.sub(r"[^a-z0-9]", "-", member.email.lower())
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": f"user-{safe}-clusterrole-{member.role}", "namespace": member.namespace,
                     "annotations": {"user": member.email, "role": member.role}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"kubeflow-{member.role}"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": member.email}],
    }


@dataclass
class Team:
    """The running server, its URL, and each member's API token (``tokens["server"]``: the server token)."""

    home: Path
    url: str
    process: subprocess.Popen[bytes]
    tokens: dict[str, str] = field(default_factory=dict)

    def call(self, who: str, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
        """One request as ``who`` (a member's name before the @, or ``server``) to ``path`` (from the root)."""
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.tokens[who]}"}
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def finished_run(self, namespace: str, spec: dict[str, Any], timeout: float = 180) -> str:
        """A run of ``spec`` (a pipeline spec) in a new experiment of ``namespace``, made by the server token's
        administrator and waited for: its id once it SUCCEEDED."""
        experiment = self._ok("POST", f"{API}/experiments", {"display_name": f"x-{uuid.uuid4().hex[:8]}",
                                                            "namespace": namespace})
        run_id: str = self._ok("POST", f"{API}/runs", {"display_name": "run", "pipeline_spec": spec,
                                                      "experiment_id": experiment["experiment_id"]})["run_id"]
        deadline = time.monotonic() + timeout
        while (state := self._ok("GET", f"{API}/runs/{run_id}")["state"]) not in ("SUCCEEDED", "FAILED", "CANCELED"):
            assert time.monotonic() < deadline, f"run {run_id} did not finish"
            time.sleep(0.2)
        assert state == "SUCCEEDED", run_id
        return run_id

    def _ok(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        status, answer = self.call("server", method, path, body)
        assert status == 200, answer
        return answer

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def cli(home: Path, *args: str, stdin: str = "") -> str:
    """``millpond ARGS`` on the home (the machine's administrator); its stdout."""
    done = subprocess.run([str(MILLPOND), *args], input=stdin, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MILLPOND_HOME": str(home)}, check=False)
    assert done.returncode == 0, f"millpond {' '.join(args)}: {done.stderr}"
    return done.stdout


def start_team(home: Path, *server_args: str) -> Team:
    """Users, tokens and bindings made, then the server started in multi-user mode (waits for healthz);
    ``server_args``: more options for ``millpond server``."""
    tokens = {"server": SERVER_TOKEN}
    for member in MEMBERS:
        extra = ("--admin",) if member.role == "admin" else ()
        cli(home, "user", "add", member.email, "--password-stdin", *extra, stdin="correct horse battery\n")
        tokens[member.email.split("@")[0]] = cli(home, "user", "token", "create", member.email).strip()
    bindings = home.parent / "bindings.yaml"  # JSON documents are YAML documents
    bindings.write_text("\n---\n".join(json.dumps(kfam_binding(m)) for m in MEMBERS if m.namespace))
    cli(home, "apply", "-f", str(bindings))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = open(home.parent / "server.log", "wb")  # noqa: SIM115 - the server's output while it runs
    process = subprocess.Popen(
        [str(MILLPOND), "server", "--multi-user", "--port", str(port), "--token", SERVER_TOKEN, *server_args],
        env={**os.environ, "MILLPOND_HOME": str(home)}, stdout=log, stderr=subprocess.STDOUT)
    team = Team(home, f"http://127.0.0.1:{port}", process, tokens)
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{team.url}{API}/healthz", timeout=5):
                return team
        except OSError:
            assert process.poll() is None, (home.parent / "server.log").read_text()
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.1)

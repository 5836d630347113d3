"""What identities and RBAC cost a request: the same server, single-user beside multi-user.

    .venv/bin/python benchmarks/authorization.py              # 300 requests per figure
    .venv/bin/python benchmarks/authorization.py --repeat 1000

One MILLPOND_HOME with a user ``alice`` (an API token, kubeflow-edit in ``team-a`` through a KFAM-shaped
RoleBinding) and 20 other RoleBindings. ``millpond server`` runs as its own process, first single-user
with a server token, then ``--multi-user``; each figure is the median (and p90) of ``--repeat`` requests over
one keep-alive connection, wall milliseconds on the client side, after 20 warm-ups. A multi-user request
pays for finding the token's user (a SHA-256 and one indexed row) and the RBAC decision (the policy is
read at most once a second). In Kubeflow the same decision is a SubjectAccessReview round trip from KFP's
API server to kube-apiserver per call, which cannot run here; the peer is the single-user server.
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MILLPOND = Path(sys.executable).parent / "millpond"
SERVER_TOKEN = "benchmark-server-token"
PATHS = [
    ("KFP: list runs", "/apis/v2beta1/runs?namespace=team-a&page_size=10"),
    ("Kubernetes: list configmaps", "/api/v1/namespaces/team-a/configmaps"),
    ("KFP: healthz", "/apis/v2beta1/healthz"),
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def millpond(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    done = subprocess.run([str(MILLPOND), *args], env=env, input=stdin, capture_output=True, text=True, check=True)
    return done.stdout


def prepare(env: dict[str, str], home: Path) -> str:
    millpond(env, "user", "add", "alice@example.org", "--password-stdin", stdin="benchmark-password\n")
    token = millpond(env, "user", "token", "create", "alice@example.org").strip()
    bindings = []
    for index in range(21):
        who = "alice@example.org" if index == 0 else f"user{index}@example.org"
        safe = who.replace("@", "-").replace(".", "-")
        bindings.append(f"""apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: user-{safe}-clusterrole-edit
  namespace: team-{'a' if index == 0 else index}
  annotations: {{user: "{who}", role: edit}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kubeflow-edit}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: "{who}"}}]
""")
    manifest = home / "bindings.yaml"
    manifest.write_text("---\n".join(bindings))
    millpond(env, "apply", "-f", str(manifest))
    return token


def measure(port: int, token: str, path: str, repeat: int) -> list[float]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Bearer {token}"}
    times = []
    for index in range(repeat + 20):
        start = time.perf_counter()
        connection.request("GET", path, headers=headers)
        answer = connection.getresponse()
        answer.read()
        if answer.status != 200:
            raise SystemExit(f"{path}: HTTP {answer.status}")
        if index >= 20:
            times.append((time.perf_counter() - start) * 1000)
    connection.close()
    return times


def served(env: dict[str, str], extra: list[str], token: str, repeat: int) -> dict[str, list[float]]:
    port = free_port()
    process = subprocess.Popen([str(MILLPOND), "server", "--port", str(port), *extra],
                               env={**env, "MILLPOND_TOKEN": SERVER_TOKEN}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SystemExit("the server did not start") from None
                time.sleep(0.2)
        return {label: measure(port, token, path, repeat) for label, path in PATHS}
    finally:
        process.terminate()
        process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=300)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="millpond-bench-auth-") as folder:
        home = Path(folder)
        env = {**os.environ, "MILLPOND_HOME": str(home), "MILLPOND_SERVER_RESUME": "0"}
        token = prepare(env, home)
        single = served(env, [], SERVER_TOKEN, options.repeat)
        multi = served(env, ["--multi-user"], token, options.repeat)
    print(f"{'request':<30} {'single-user (peer) ms':>22} {'multi-user ms':>15} {'ratio':>7}")
    for label, _ in PATHS:
        peer, ours = statistics.median(single[label]), statistics.median(multi[label])
        p90 = sorted(multi[label])[int(len(multi[label]) * 0.9)]
        print(f"{label:<30} {peer:>22.2f} {ours:>9.2f} (p90 {p90:.2f}) {ours / peer:>5.2f}x")


if __name__ == "__main__":
    main()

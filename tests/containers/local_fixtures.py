"""Stand-ins for the shared container fixtures (tests/containers/conftest.py, being written elsewhere), with
the same names and shapes, so these tests switch over by deleting the import:

- ``python_image``: the Debian Python 3.11 base made with mmdebstrap (``localhost/debian-python:test``);
- ``build_image(tag, containerfile, files)``: ``podman build`` of a folder holding ``files``;
- ``registry``: Debian's distribution registry on a free port behind htpasswd (``.host``, ``.user``,
  ``.password``, ``.push(local, repo_tag)``, ``.registries_conf`` marking it insecure: plain HTTP);
- ``dockerconfigjson(host, user, password)``: a ``.dockerconfigjson`` value for a pull secret.

Every test here is skipped when no container runtime works or the base image is not there.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from millpond.runners.containers import runtimes
from millpond.runners.containers.runtimes import ContainerRuntime

BASE = "localhost/debian-python:test"


def _runtime() -> ContainerRuntime:
    found = runtimes.find("podman")
    if isinstance(found, str):
        pytest.skip(f"no container runtime: {found}")
    return found


@pytest.fixture(scope="session")
def python_image() -> str:
    runtime = _runtime()
    if subprocess.run(runtime.argv("image", "exists", BASE), check=False).returncode != 0:
        pytest.skip(f"{BASE} is not built here (see ../shared/notes/containers.md)")
    return BASE


@pytest.fixture(scope="session")
def build_image() -> Callable[[str, str, dict[str, str]], str]:
    runtime = _runtime()

    def build(tag: str, containerfile: str, files: dict[str, str]) -> str:
        with tempfile.TemporaryDirectory(prefix="millpond-build-") as folder:
            (Path(folder) / "Containerfile").write_text(containerfile)
            for name, text in files.items():
                (Path(folder) / name).write_text(text)
            done = subprocess.run(runtime.argv("build", "-q", "-t", tag, "-f", f"{folder}/Containerfile", folder),
                                  capture_output=True, text=True, timeout=300, check=False)
            assert done.returncode == 0, done.stderr
        return tag

    return build


@dataclass
class Registry:
    host: str
    user: str
    password: str
    registries_conf: Path
    runtime: ContainerRuntime

    def push(self, local: str, repo_tag: str) -> None:
        done = subprocess.run(self.runtime.argv("push", "--tls-verify=false", "--creds",
                                                f"{self.user}:{self.password}", local, repo_tag),
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    runtime = _runtime()
    binary = shutil.which("docker-registry") or shutil.which("registry")
    if binary is None or shutil.which("htpasswd") is None:
        pytest.skip("no docker-registry or htpasswd (apt-get install docker-registry apache2-utils)")
    folder = tmp_path_factory.mktemp("registry")
    user, password = "millpond", "s3cret-pull"
    hashed = subprocess.run(["htpasswd", "-Bbn", user, password], capture_output=True, text=True, check=True).stdout
    (folder / "htpasswd").write_text(hashed)
    port = _free_port()
    (folder / "config.yml").write_text(
        "version: 0.1\n"
        f"storage: {{filesystem: {{rootdirectory: {folder / 'data'}}}, delete: {{enabled: true}}}}\n"
        f"http: {{addr: 127.0.0.1:{port}}}\n"
        f"auth: {{htpasswd: {{realm: millpond-test, path: {folder / 'htpasswd'}}}}}\n")
    conf = folder / "registries.conf"
    conf.write_text(f'[[registry]]\nlocation = "127.0.0.1:{port}"\ninsecure = true\n')
    log = open(folder / "registry.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen([binary, "serve", str(folder / "config.yml")], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail(f"the registry did not start: {(folder / 'registry.log').read_text()[-500:]}")
            time.sleep(0.1)
    try:
        yield Registry(f"127.0.0.1:{port}", user, password, conf, runtime)
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


@pytest.fixture(scope="session")
def dockerconfigjson() -> Callable[[str, str, str], str]:
    def make(host: str, user: str, password: str) -> str:
        auth = base64.b64encode(f"{user}:{password}".encode()).decode()
        return json.dumps({"auths": {host: {"username": user, "password": password, "auth": auth}}})

    return make

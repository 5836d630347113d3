"""What a notebook's kernel finds without being told, on a real ``millpond server`` (HTTPS, with a token): a
kubeconfig for its namespace, so ``kfp.Client()`` with no arguments lists this server's experiments (through the
service proxy to ``ml-pipeline``) and ``kubectl get pods`` shows the namespace's pods; the Fluid SDK and
``arena`` act on the same millpond. The token is in a 0600 file of the notebook's own folder, never in the
environment, the status or the server's log."""

from __future__ import annotations

import json
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millpond.notebooks import defaults, paths
from millpond.runners.listening import ServerAddress, record
from millpond.runners.processes import ProcessIdentity
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore
from tests.kube_support import Kubectl
from tests.notebooks.support import ending_notebooks, execute
from tests.server_support import Served, module_home

pytestmark = pytest.mark.timeout(600)
TOKEN = "server-token-for-the-defaults-test"
NAMESPACE = "research"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "notebook-defaults")


@pytest.fixture(scope="module")
def served(home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = Served(token=TOKEN, tls=True)
    token_file = tmp_path_factory.mktemp("token") / "token"
    token_file.write_text(TOKEN + "\n")
    own = ProcessIdentity.own()  # what `millpond server --tls --token-file F` records as it starts
    record(ServerAddress(server.url, str(server.ca), True, str(token_file), own.pid, own.start, "now"))
    yield from ending_notebooks(server)


@pytest.fixture(scope="module")
def kubectl(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    folder = tmp_path_factory.mktemp("kubectl")
    config = folder / "kubeconfig"
    address = ServerAddress(served.url, str(served.ca), True, None, 0, None)
    config.write_text(json.dumps(defaults.kubeconfig(address, "default", TOKEN)))
    return Kubectl(config, folder / "cache")


def test_kfp_client_kubectl_and_fluid_in_a_kernel_reach_this_server(served: Served, kubectl: Kubectl,
                                                                     home: Path) -> None:
    import kfp

    client = kfp.Client(host=served.url, existing_token=TOKEN, ssl_ca_cert=str(served.ca))
    client.create_experiment("from-the-test", namespace=NAMESPACE)
    kubectl.ok("create", "namespace", NAMESPACE)
    kubectl.ok("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": {"name": "lab", "namespace": NAMESPACE},
        "spec": {"template": {"spec": {"containers": [{"name": "lab", "image": "jupyter-scipy"}]}}}}))
    deadline = time.monotonic() + 180
    while kubectl.json("get", "notebook", "lab", "-n", NAMESPACE).get("status", {}).get("readyReplicas") != 1:
        assert time.monotonic() < deadline
        time.sleep(0.5)
    base = f"{served.url}/notebook/{NAMESPACE}/lab"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    status, text = request_tls(served, f"{base}/api/kernels", "POST", {"name": "python3"}, auth)
    assert status == 201, text
    channels = base.replace("https://", "wss://") + f"/api/kernels/{json.loads(text)['id']}/channels"

    def run(code: str) -> str:
        return execute(channels, code, headers=auth, timeout=120, ca=str(served.ca))

    names = run("import kfp; sorted(e.display_name for e in kfp.Client().list_experiments(namespace="
                f"{NAMESPACE!r}).experiments or [])")
    assert "from-the-test" in names, names
    assert run("import subprocess; subprocess.run(['kubectl', 'get', 'pods', '-o', 'name'], capture_output=True, "
               "text=True).stdout") == repr("pod/lab-0\n")
    assert run("from kubernetes import config, client as k8s; config.load_kube_config(); "
               "[p.metadata.name for p in k8s.CoreV1Api().list_namespaced_pod(config.list_kube_config_contexts()"
               "[1]['context']['namespace']).items]") == "['lab-0']"
    # the Fluid SDK and arena act on this millpond's home
    run("from millpond import fluid; fluid.FluidClient(fluid.ClientConfig(namespace='research')).create_dataset("
        "'made-in-lab', mount_name='t', mount_point='local:///tmp'); 1")
    assert ResourceStore(load_settings()).get("Dataset", "made-in-lab", NAMESPACE) is not None
    assert "made-in-lab" in kubectl.ok("get", "datasets", "-n", NAMESPACE)

    # the token: in a 0600 file of the notebook's own folder, not in the environment nor the status
    resource = ResourceStore(load_settings()).get("Notebook", "lab", NAMESPACE)
    assert resource is not None
    config = paths.folder(load_settings(), resource.uid) / "kube" / "config"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600 and TOKEN in config.read_text()
    assert run("import os; os.environ['KUBECONFIG']") == repr(str(config))
    pid = json.loads(paths.endpoint_file(load_settings(), resource.uid).read_text())["pid"]
    assert TOKEN.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
    assert TOKEN not in json.dumps(kubectl.json("get", "notebook", "lab", "-n", NAMESPACE))
    assert TOKEN not in paths.server_log(load_settings(), resource.uid).read_text()
    kubectl.ok("delete", "notebook", "lab", "-n", NAMESPACE)


def request_tls(served: Served, url: str, method: str, body: Any, headers: dict[str, str]) -> tuple[int, str]:
    import ssl
    import urllib.error
    import urllib.request

    context = ssl.create_default_context(cafile=str(served.ca))
    data = json.dumps(body).encode()
    sent = urllib.request.Request(url, data=data, method=method,
                                  headers={**headers, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(sent, timeout=30, context=context) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


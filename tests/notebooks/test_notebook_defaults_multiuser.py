"""A notebook's default credential on a multi-user server: its kernel acts as ``system:serviceaccount:team-a:
default-editor`` (bound to kubeflow-edit in team-a by the profile controller), so ``kfp.Client()`` and the
``kubernetes`` client reach team-a and are refused in team-b (403); the token is revoked with the Notebook,
and the ServiceAccount is no user ``millpond user list`` shows."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from millpond.notebooks import objects, paths
from millpond.runners.isolation import isolation_problem
from millpond.runners.listening import ServerAddress, record
from millpond.runners.processes import ProcessIdentity
from millpond.settings import load_settings
from millpond.store.identities import IdentityStore
from millpond.store.resources import ResourceStore
from tests.notebooks.support import ending_notebooks, execute, kernel_channels
from tests.routes_multiuser.support import ALICE, API, BOB, TEAM_A, TEAM_B, Caller, MultiUserServer, team
from tests.server_support import module_home

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(isolation_problem() is not None, reason=f"no sandbox here: {isolation_problem()}")]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    old = os.environ.get("MILLPOND_MULTI_USER")
    os.environ["MILLPOND_MULTI_USER"] = "1"
    yield from module_home(tmp_path_factory, "notebook-defaults-multiuser")
    if old is None:
        os.environ.pop("MILLPOND_MULTI_USER", None)
    else:
        os.environ["MILLPOND_MULTI_USER"] = old


@pytest.fixture(scope="module")
def callers(home: Path) -> Iterator[dict[str, Caller]]:
    server = MultiUserServer()
    own = ProcessIdentity.own()  # what `millpond server --multi-user` records as it starts
    record(ServerAddress(server.url, None, True, None, own.pid, own.start, "now"))
    found = team(server)
    for _ in ending_notebooks(server):
        yield found


def profile(name: str, owner: str) -> dict[str, object]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "Profile", "metadata": {"name": name},
            "spec": {"owner": {"kind": "User", "name": owner}}}


def test_the_notebook_acts_as_default_editor_of_its_namespace_only(callers: dict[str, Caller]) -> None:
    admin, alice = callers["admin"], callers[ALICE.name]
    applied = admin.apply(profile(TEAM_A, ALICE.name), profile(TEAM_B, BOB.name))
    assert applied.status == 200, applied.text
    document = {"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": {"name": "lab", "namespace": TEAM_A},
                "spec": {"template": {"spec": {"containers": [{"name": "lab", "image": "jupyter-scipy"}]}}}}
    applied = alice.apply(document)
    assert applied.status == 200, applied.text
    notebook_status(alice, "lab", ready=True)
    as_alice = {"Authorization": f"Bearer {alice.token}"}
    channels = kernel_channels(f"{alice.server.url}/notebook/{TEAM_A}/lab", as_alice)

    def run(code: str) -> str:
        return execute(channels, code, headers=as_alice, timeout=120)

    run("from kubernetes import client, config; "
        "config.load_kube_config(); core = client.CoreV1Api(); import kfp; kfp_client = kfp.Client(); 1")
    assert run(f"[p.metadata.name for p in core.list_namespaced_pod({TEAM_A!r}).items]") == "['lab-0']"
    refused = ("try:\n    {call}\n    r = 'allowed'\n"  # kubernetes' and kfp_server_api's ApiException have a status
               "except Exception as e:\n    r = getattr(e, 'status', repr(e))\nr")
    assert run(refused.format(call=f"core.list_namespaced_pod({TEAM_B!r})")) == "403"
    assert run(refused.format(call=f"core.list_namespaced_config_map({TEAM_A!r})")) == "'allowed'"
    assert run(f"kfp_client.create_experiment('from-lab', namespace={TEAM_A!r}).display_name") == "'from-lab'"
    assert run(refused.format(call=f"kfp_client.list_experiments(namespace={TEAM_B!r})")) == "403"
    assert run("open('/var/run/secrets/kubernetes.io/serviceaccount/namespace').read()") == repr(TEAM_A)

    settings = load_settings()
    resource = ResourceStore(settings).get("Notebook", "lab", TEAM_A)
    assert resource is not None
    token = (paths.folder(settings, resource.uid) / "serviceaccount" / "token").read_text()
    assert token.startswith("mpt_")
    whoami = Caller(alice.server, token, "lab").call(f"/api/v1/namespaces/{TEAM_B}/secrets")
    assert whoami.status == 403 and "system:serviceaccount:team-a:default-editor" in whoami.text, whoami.text
    assert not any(user.name.startswith("system:") for user in IdentityStore(settings).users())
    # kill -9 of the supervisor: the server's reconcile starts another, whose token replaces (revokes) this one
    [supervisor] = objects.supervisors(TEAM_A, "lab")
    os.kill(supervisor.pid, signal.SIGKILL)
    token_file = paths.folder(settings, resource.uid) / "serviceaccount" / "token"
    deadline = time.monotonic() + 120
    while not token_file.is_file() or token_file.read_text() == token:
        assert time.monotonic() < deadline, "no new supervisor issued a new token"
        time.sleep(0.5)
    assert Caller(alice.server, token, "lab").call(f"/api/v1/namespaces/{TEAM_A}/pods").status == 401
    token = token_file.read_text()
    assert Caller(alice.server, token, "lab").call(f"/api/v1/namespaces/{TEAM_A}/pods").status == 200
    assert alice.call(f"{API}/notebooks.kubeflow.org/lab?namespace={TEAM_A}", "DELETE").status == 200
    assert Caller(alice.server, token, "lab").call(f"/api/v1/namespaces/{TEAM_A}/pods").status == 401  # revoked


def claim(name: str, namespace: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}


def notebook_status(caller: Caller, name: str, ready: bool | None = None, timeout: float = 180) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        status = (caller.call(f"{API}/notebooks.kubeflow.org/{name}?namespace={TEAM_A}").body or {}).get("status") or {}
        if (status.get("readyReplicas") == 1) == ready if ready is not None else status.get("conditions"):
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.5)


def test_the_sandbox_shows_its_own_volumes_only_and_another_namespace_s_claim_is_not_found(
        callers: dict[str, Caller], home: Path) -> None:
    admin, alice, bob = callers["admin"], callers[ALICE.name], callers[BOB.name]
    assert admin.apply(profile(TEAM_A, ALICE.name), profile(TEAM_B, BOB.name)).status == 200
    assert bob.apply(claim("b-data", TEAM_B)).status == 200
    assert alice.apply(claim("ws-lab2", TEAM_A)).status == 200
    (home / "volumes" / TEAM_B / "b-data" / "secret.txt").write_text("team-b's")
    volumes = [{"name": "ws", "persistentVolumeClaim": {"claimName": "ws-lab2"}}]
    mounts = [{"name": "ws", "mountPath": "/home/jovyan"}]

    def document(name: str, extra_volumes: list[dict[str, object]], extra_mounts: list[dict[str, object]]) -> dict:
        return {"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": {"name": name, "namespace": TEAM_A},
                "spec": {"template": {"spec": {"volumes": [*volumes, *extra_volumes], "containers": [{
                    "name": name, "image": "jupyter-scipy", "volumeMounts": [*mounts, *extra_mounts]}]}}}}

    assert alice.apply(document("peek", [{"name": "b", "persistentVolumeClaim": {"claimName": "b-data"}}],
                                [{"name": "b", "mountPath": "/data"}])).status == 200
    status = notebook_status(alice, "peek")
    scheduled = next(c for c in status["conditions"] if c["type"] == "PodScheduled")  # type: ignore[union-attr]
    assert scheduled["message"] == '0/1 nodes are available: persistentvolumeclaim "b-data" not found', status
    assert alice.call(f"{API}/notebooks.kubeflow.org/peek?namespace={TEAM_A}", "DELETE").status == 200

    assert alice.apply(document("lab2", [], [])).status == 200
    notebook_status(alice, "lab2", ready=True)
    as_alice = {"Authorization": f"Bearer {alice.token}"}
    channels = kernel_channels(f"{alice.server.url}/notebook/{TEAM_A}/lab2", as_alice)
    other = home / "volumes" / TEAM_B / "b-data"
    probe = (f"import os; open('/home/jovyan/mine.txt', 'w').write('x'); "
             f"os.path.exists({str(other)!r}), os.path.exists({str(home / 'secrets')!r}), "
             f"sorted(os.listdir({str(home)!r}))")
    assert execute(channels, probe, headers=as_alice) == "(False, False, ['notebooks'])"
    assert (home / "volumes" / TEAM_A / "ws-lab2" / "mine.txt").read_text() == "x"
    assert alice.call(f"{API}/notebooks.kubeflow.org/lab2?namespace={TEAM_A}", "DELETE").status == 200

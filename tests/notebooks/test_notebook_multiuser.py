"""A Notebook on a multi-user server (``MILLPOND_MULTI_USER=1``): its Jupyter server runs in the namespace's
sandbox (the millpond home hidden), a contributor of the namespace reaches a kernel through the proxy with
her own millpond token, and a member of another team, or nobody, is refused (HTTP and WebSocket alike)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import websocket

from millpond.notebooks import objects
from millpond.runners.isolation import isolation_problem
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore
from tests.notebooks.support import execute, request
from tests.routes_multiuser.support import ALICE, API, BOB, CAROL, TEAM_A, Caller, MultiUserServer, team
from tests.server_support import module_home

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(isolation_problem() is not None, reason=f"no sandbox here: {isolation_problem()}")]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    old = os.environ.get("MILLPOND_MULTI_USER")
    os.environ["MILLPOND_MULTI_USER"] = "1"  # the supervisors the server starts run notebooks sandboxed
    yield from module_home(tmp_path_factory, "notebooks-multiuser")
    if old is None:
        os.environ.pop("MILLPOND_MULTI_USER", None)
    else:
        os.environ["MILLPOND_MULTI_USER"] = old


@pytest.fixture(scope="module")
def callers(home: Path) -> Iterator[dict[str, Caller]]:
    server = MultiUserServer()
    found = team(server)
    yield found
    for resource in ResourceStore(load_settings()).list("Notebook", None):
        objects.delete(load_settings(), resource.namespace, resource.name)
    server.stop()


def test_only_the_namespaces_contributors_reach_the_notebook(callers: dict[str, Caller], home: Path) -> None:
    alice, bob, carol, nobody = callers[ALICE.name], callers[BOB.name], callers[CAROL.name], callers["nobody"]
    document = {"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": {"name": "lab", "namespace": TEAM_A},
                "spec": {"template": {"spec": {"containers": [{"name": "lab", "image": "jupyter-scipy"}]}}}}
    applied = alice.apply(document)
    assert applied.status == 200, applied.text
    deadline = time.monotonic() + 180
    while (alice.call(f"{API}/notebooks.kubeflow.org/lab?namespace={TEAM_A}").body or {}).get(
            "status", {}).get("readyReplicas") != 1:
        assert time.monotonic() < deadline, alice.call(f"{API}/notebooks.kubeflow.org/lab?namespace={TEAM_A}").text
        time.sleep(0.5)
    base = f"{alice.server.url}/notebook/{TEAM_A}/lab"
    as_alice = {"Authorization": f"Bearer {alice.token}"}

    status, text = request(f"{base}/api/kernels", "POST", {"name": "python3"}, headers=as_alice)
    assert status == 201, text
    channels = base.replace("http://", "ws://") + f"/api/kernels/{json.loads(text)['id']}/channels"
    assert execute(channels, "1+1", headers=as_alice) == "2"
    # the sandbox: the millpond home (its database, other namespaces' files) is not there for the kernel
    assert execute(channels, f"import os; os.path.exists({str(home / 'notebooks' / 'workspaces')!r}), "
                             f"sorted(os.listdir({str(home)!r}))", headers=as_alice) == "(True, ['notebooks'])"
    assert request(f"{base}/api/status", headers={"Authorization": f"Bearer {carol.token}"})[0] == 200  # a viewer

    for refused, expected in ((bob, 403), (nobody, 401)):
        headers = {"Authorization": f"Bearer {refused.token}"} if refused.token else {}
        status, text = request(f"{base}/api/status", headers=headers)
        assert status == expected, text
        with pytest.raises(websocket.WebSocketBadStatusException) as closed:
            execute(channels, "1+1", headers=headers)
        assert closed.value.status_code == expected  # the handshake answers as HTTP does: 401 nobody, 403 bob

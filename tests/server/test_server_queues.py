"""Kueue's queueing objects through the server's resource routes: ``POST /fluid/apply`` checks and stores
them as ``millpond apply -f`` does, ``GET /{kind}`` and ``DELETE /{kind}/{name}`` find them by
kubectl's names, and a refused or bad document is a 400 on one line with nothing stored."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millpond.scheduling.queues.cycle import run_cycle, submit
from millpond.settings import load_settings
from tests.server_support import Served, module_home, serving

FLAVOR = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}}
QUEUE = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "team"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
             {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": 9}]}]}]}}
LOCAL = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "user-queue", "namespace": "project-a"}, "spec": {"clusterQueue": "team"}}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "queues-server")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[Served]:
    yield from serving()


def call(server: Served, path: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{server.url}/apis/millpond/v1{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_apply_list_get_delete_queues_through_the_api(server: Served) -> None:
    status, answer = call(server, "/fluid/apply", "POST", [FLAVOR, QUEUE, LOCAL])
    assert status == 200, answer
    assert [item["message"] for item in answer["items"]] == [
        "resourceflavor.kueue.x-k8s.io/default-flavor created", "clusterqueue.kueue.x-k8s.io/team created",
        "localqueue.kueue.x-k8s.io/user-queue created"]
    status, listing = call(server, "/clusterqueues")
    assert status == 200 and [item["metadata"]["name"] for item in listing["items"]] == ["team"]
    assert "namespace" not in listing["items"][0]["metadata"]
    status, one = call(server, "/lq/user-queue?namespace=project-a")
    assert status == 200 and one["spec"]["clusterQueue"] == "team"
    assert call(server, "/localqueues/user-queue", "DELETE")[0] == 404  # namespace default: not there
    assert call(server, "/localqueues/user-queue?namespace=project-a", "DELETE")[0] == 200
    status, answer = call(server, "/localqueues/user-queue?namespace=project-a")
    assert status == 404 and answer["message"] == \
        'localqueues.kueue.x-k8s.io "user-queue" not found in namespace "project-a"'


def test_refused_and_bad_queue_documents_are_400_on_one_line(server: Served) -> None:
    check = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "prov"},
             "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}}
    duplicate = {**QUEUE, "metadata": {"name": "twice"}, "spec": {**QUEUE["spec"], "resourceGroups": [
        *QUEUE["spec"]["resourceGroups"], *QUEUE["spec"]["resourceGroups"]]}}
    for body, says in (([{**FLAVOR, "metadata": {"name": "other"}}, check], "ProvisioningRequests ask a cluster"),
                       ([{**FLAVOR, "metadata": {"name": "other"}}, duplicate], 'Duplicate value: "cpu"')):
        status, answer = call(server, "/fluid/apply", "POST", body)
        assert status == 400 and says in answer["message"] and "\n" not in answer["message"], answer
    assert call(server, "/resourceflavors/other")[0] == 404  # all or nothing
    status, answer = call(server, "/topologies")
    assert status == 404 and "topology-aware scheduling" in answer["message"]


def test_queues_page_shows_quota_policies_and_local_queues(server: Served, tmp_path: Path) -> None:
    """The UI's Queues page (and its JSON, /ui-api/queues): a queue made by `millpond queue create`'s objects."""
    from tests.ui.test_server_ui import _browser, chromium_page

    gpu = {**QUEUE, "metadata": {"name": "alice"}, "spec": {
        "cohort": "project-a", "namespaceSelector": {}, "queueingStrategy": "StrictFIFO",
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
        "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [
            {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": "1500m", "borrowingLimit": 2},
                                                     {"name": "memory", "nominalQuota": "32Gi"},
                                                     {"name": "nvidia.com/gpu", "nominalQuota": 4}]}]}]}}
    local = {**LOCAL, "metadata": {"name": "alice", "namespace": "project-a"}, "spec": {"clusterQueue": "alice"}}
    assert call(server, "/fluid/apply", "POST", [FLAVOR, gpu, local])[0] == 200
    settings = load_settings()
    for name in ("first", "second"):  # 1 CPU each: the first is admitted, the second waits
        submit(settings, kind="job", name=name, namespace="project-a", user="<b>bob</b>", queue="alice",
               requests={"cpu": 1000})
        run_cycle(settings)
    with urllib.request.urlopen(f"{server.url}/ui-api/queues") as response:
        answer = json.loads(response.read())
    [alice] = [queue for queue in answer["queues"] if queue["name"] == "alice"]
    assert alice["totals"]["cpu"] == {"nominal": "1500m", "used": "1"}
    assert alice["totals"]["nvidia.com/gpu"] == {"nominal": "4", "used": "0"}
    assert alice["localQueues"] == ["project-a/alice"]
    assert (alice["admittedWorkloads"], alice["pendingWorkloads"]) == (1, 1)
    [waiting] = alice["pending"]
    assert waiting["name"] == "second" and waiting["position"] == 0 and "cpu" in waiting["reason"]
    status, shown = call(server, "/clusterqueues/alice")  # Kueue's status fields on the object too
    assert status == 200 and (shown["status"]["pendingWorkloads"], shown["status"]["admittedWorkloads"]) == (1, 1)
    sync_api = _browser()
    with chromium_page() as (page, errors):
        page.goto(server.url + "/#/runs")
        page.click("header nav a[data-nav=queues]")
        row = page.locator('tr.queue-row[data-queue="alice"]')
        sync_api.expect(row).to_contain_text("StrictFIFO", timeout=15_000)
        sync_api.expect(row).to_contain_text("default-flavor: cpu 1 / 1500m (borrow ≤ 2)")
        sync_api.expect(row).to_contain_text("project-a/alice")
        sync_api.expect(row).to_contain_text("within LowerPriority, reclaim Any")
        sync_api.expect(row.locator(".pending")).to_have_text("1")
        waiting_row = page.locator('tr.pending-row[data-workload="project-a/second"]')
        sync_api.expect(waiting_row).to_contain_text("job project-a/second (<b>bob</b>)")  # text, not HTML
        sync_api.expect(waiting_row.locator(".reason")).to_contain_text("cpu")
        assert page.locator("#queues-pending b").count() == 0
        page.screenshot(path=str(tmp_path / "queues.png"), full_page=True)
        assert not errors, errors

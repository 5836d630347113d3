"""The Kubernetes API read on the wire as the clients read it: the official ``kubernetes`` Python client
(CustomObjectsApi CRUD, ``watch.Watch``), and raw HTTP for what it leaves implicit — resource versions
and 409 on a stale update, watch from a version with 410 Expired, bookmarks and initial events,
paging, dry runs, null pruning, tables and errors as ``Status`` objects (never a 500)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.server_support import Served, module_home

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
BASE = f"/apis/{GROUP}/{VERSION}"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "kube-protocol")


@pytest.fixture(scope="module")
def served(home: Path) -> Iterator[Served]:
    server = Served()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def custom(served: Served) -> client.CustomObjectsApi:
    configuration = client.Configuration()
    configuration.host = served.url
    return client.CustomObjectsApi(client.ApiClient(configuration))


def flavor(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor",
            "metadata": {"name": name, "labels": labels}, "spec": {}}


def local_queue(name: str, namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": "cq"}}


def call(served: Served, path: str, method: str = "GET", body: Any = None,
         content_type: str = "application/json", accept: str = "application/json") -> tuple[int, Any, Any]:
    data = json.dumps(body).encode() if body is not None and not isinstance(body, bytes) else body
    request = urllib.request.Request(served.url + path, data=data, method=method,
                                     headers={"Content-Type": content_type, "Accept": accept})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null"), response.headers
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null"), error.headers


def test_custom_objects_crud_with_the_kubernetes_client(custom: client.CustomObjectsApi) -> None:
    created = custom.create_cluster_custom_object(GROUP, VERSION, "resourceflavors", flavor("gpu-a", tier="gold"))
    assert created["metadata"]["name"] == "gpu-a" and created["metadata"]["uid"]
    listed = custom.list_cluster_custom_object(GROUP, VERSION, "resourceflavors", label_selector="tier=gold")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["gpu-a"]
    assert listed["metadata"]["resourceVersion"]
    patched = custom.patch_cluster_custom_object(GROUP, VERSION, "resourceflavors", "gpu-a",
                                                 {"metadata": {"labels": {"tier": "silver"}}})
    assert patched["metadata"]["labels"] == {"tier": "silver"}
    got = custom.get_cluster_custom_object(GROUP, VERSION, "resourceflavors", "gpu-a")
    assert got["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    custom.create_namespaced_custom_object(GROUP, VERSION, "team-a", "localqueues", local_queue("lq", "team-a"))
    assert custom.get_namespaced_custom_object(GROUP, VERSION, "team-a", "localqueues", "lq")["metadata"][
        "namespace"] == "team-a"
    with pytest.raises(ApiException) as missing:
        custom.get_namespaced_custom_object(GROUP, VERSION, "team-b", "localqueues", "lq")
    assert missing.value.status == 404 and json.loads(missing.value.body)["reason"] == "NotFound"
    custom.delete_cluster_custom_object(GROUP, VERSION, "resourceflavors", "gpu-a")
    custom.delete_namespaced_custom_object(GROUP, VERSION, "team-a", "localqueues", "lq")
    with pytest.raises(ApiException) as gone:
        custom.get_cluster_custom_object(GROUP, VERSION, "resourceflavors", "gpu-a")
    assert gone.value.status == 404


def test_watch_with_the_kubernetes_client(custom: client.CustomObjectsApi) -> None:
    seen: list[tuple[str, str]] = []
    ready = threading.Event()
    stream = watch.Watch()

    def follow() -> None:
        listing = custom.list_cluster_custom_object(GROUP, VERSION, "resourceflavors")
        ready.set()
        for event in stream.stream(custom.list_cluster_custom_object, GROUP, VERSION, "resourceflavors",
                                   resource_version=listing["metadata"]["resourceVersion"], timeout_seconds=20):
            seen.append((event["type"], event["object"]["metadata"]["name"]))
            if event["type"] == "DELETED":
                stream.stop()

    follower = threading.Thread(target=follow)
    follower.start()
    assert ready.wait(10)
    custom.create_cluster_custom_object(GROUP, VERSION, "resourceflavors", flavor("watched"))
    custom.patch_cluster_custom_object(GROUP, VERSION, "resourceflavors", "watched",
                                       {"metadata": {"labels": {"x": "y"}}})
    custom.delete_cluster_custom_object(GROUP, VERSION, "resourceflavors", "watched")
    follower.join(30)
    assert seen == [("ADDED", "watched"), ("MODIFIED", "watched"), ("DELETED", "watched")]


def test_a_stale_update_is_a_conflict_and_a_dry_run_stores_nothing(served: Served) -> None:
    status, created, _ = call(served, f"{BASE}/resourceflavors", "POST", flavor("cas"))
    assert status == 201
    stale = created["metadata"]["resourceVersion"]
    status, updated, _ = call(served, f"{BASE}/resourceflavors/cas", "PUT", {**created, "metadata": {
        **created["metadata"], "labels": {"v": "2"}}})
    assert status == 200 and updated["metadata"]["resourceVersion"] != stale
    status, refused, _ = call(served, f"{BASE}/resourceflavors/cas", "PUT", {**created, "metadata": {
        **created["metadata"], "resourceVersion": stale, "labels": {"v": "3"}}})
    assert status == 409 and refused["kind"] == "Status" and refused["reason"] == "Conflict"
    assert "the object has been modified" in refused["message"]
    status, dry, _ = call(served, f"{BASE}/resourceflavors?dryRun=All", "POST", flavor("dry"))
    assert status == 201 and dry["metadata"]["name"] == "dry"
    assert call(served, f"{BASE}/resourceflavors/dry")[0] == 404
    status, again, _ = call(served, f"{BASE}/resourceflavors", "POST", flavor("cas"))
    assert status == 409 and again["reason"] == "AlreadyExists"


def test_watch_from_a_version_replays_and_an_expired_one_is_410(served: Served) -> None:
    call(served, f"{BASE}/resourceflavors", "POST", flavor("replayed"))
    _, listing, _ = call(served, f"{BASE}/resourceflavors")
    version = listing["metadata"]["resourceVersion"]
    call(served, f"{BASE}/resourceflavors/replayed", "PATCH", {"metadata": {"labels": {"a": "b"}}},
         "application/merge-patch+json")
    with urllib.request.urlopen(f"{served.url}{BASE}/resourceflavors?watch=1&resourceVersion={version}"
                                "&timeoutSeconds=1", timeout=30) as response:
        events = [json.loads(line) for line in response.read().splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("MODIFIED", "replayed")]
    with urllib.request.urlopen(f"{served.url}{BASE}/resourceflavors?watch=1&resourceVersion=5&timeoutSeconds=1",
                                timeout=30) as response:
        expired = [json.loads(line) for line in response.read().splitlines()]
    assert expired[0]["type"] == "ERROR" and expired[0]["object"]["code"] == 410
    assert expired[0]["object"]["reason"] == "Expired"
    with urllib.request.urlopen(f"{served.url}{BASE}/resourceflavors?watch=1&sendInitialEvents=true"
                                "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1",
                                timeout=30) as response:
        initial = [json.loads(line) for line in response.read().splitlines()]
    assert ("ADDED", "replayed") in [(e["type"], e["object"]["metadata"].get("name")) for e in initial]
    bookmark = next(e for e in initial if e["type"] == "BOOKMARK")
    assert bookmark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_paging_and_field_selectors(served: Served) -> None:
    for index in range(5):
        call(served, f"{BASE}/resourceflavors", "POST", flavor(f"page-{index}", paged="yes"))
    names: list[str] = []
    token = ""
    while True:
        _, page, _ = call(served, f"{BASE}/resourceflavors?labelSelector=paged%3Dyes&limit=2&continue={token}")
        names += [item["metadata"]["name"] for item in page["items"]]
        token = page["metadata"].get("continue", "")
        if not token:
            break
        assert page["metadata"]["remainingItemCount"] > 0
    assert names == [f"page-{index}" for index in range(5)]
    _, one, _ = call(served, f"{BASE}/resourceflavors?fieldSelector=metadata.name%3Dpage-3")
    assert [item["metadata"]["name"] for item in one["items"]] == ["page-3"]
    status, bad, _ = call(served, f"{BASE}/resourceflavors?labelSelector=%28%28")
    assert status == 400 and bad["kind"] == "Status"


def test_nulls_are_pruned_and_tables_carry_printer_columns(served: Served) -> None:
    body = local_queue("nulls")
    body["spec"]["stopPolicy"] = None
    body["metadata"]["labels"] = None
    status, created, _ = call(served, f"{BASE}/namespaces/default/localqueues", "POST", body)
    assert status == 201, created
    assert "stopPolicy" not in created["spec"]
    status, table, _ = call(served, f"{BASE}/namespaces/default/localqueues", accept=(
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"))
    assert status == 200 and table["kind"] == "Table"
    columns = [column["name"].upper() for column in table["columnDefinitions"]]  # kubectl prints them upper-cased
    assert columns == ["NAME", "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "AGE"]
    row = next(row for row in table["rows"] if row["cells"][0] == "nulls")
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "nulls"


@pytest.mark.parametrize(("method", "path", "body", "content_type", "code", "reason"), [
    ("GET", "/apis/nothing.example.com/v1/widgets", None, "application/json", 404, "NotFound"),
    ("GET", f"{BASE}/namespaces/default/resourceflavors", None, "application/json", 404, "NotFound"),
    ("POST", f"{BASE}/resourceflavors", b"{not json", "application/json", 400, "BadRequest"),
    ("POST", f"{BASE}/resourceflavors", [1, 2], "application/json", 400, "BadRequest"),
    ("POST", f"{BASE}/resourceflavors", {"apiVersion": "v1", "kind": "ResourceFlavor", "metadata": {"name": "x"}},
     "application/json", 400, "BadRequest"),
    ("POST", f"{BASE}/resourceflavors", {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor",
                                          "metadata": {"name": "UPPER"}}, "application/json", 422, "Invalid"),
    ("POST", f"{BASE}/resourceflavors", {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor",
                                          "metadata": {}}, "application/json", 422, "Invalid"),
    ("PATCH", f"{BASE}/resourceflavors/missing", {}, "application/merge-patch+json", 404, "NotFound"),
    ("PATCH", f"{BASE}/resourceflavors/cas", {}, "application/strategic-merge-patch+json", 415,
     "UnsupportedMediaType"),
    ("PUT", f"{BASE}/resourceflavors/cas/status", {}, "application/json", 405, "MethodNotAllowed"),
    ("GET", "/api/v1/namespaces/default/pods/x/exec", None, "application/json", 404, "NotFound"),
])
def test_refusals_are_status_objects(served: Served, method: str, path: str, body: Any, content_type: str,
                                     code: int, reason: str) -> None:
    call(served, f"{BASE}/resourceflavors", "POST", flavor("cas"))
    status, answer, _ = call(served, path, method, body, content_type)
    assert status == code, answer
    assert answer["kind"] == "Status" and answer["status"] == "Failure" and answer["reason"] == reason
    assert answer["code"] == code and answer["message"] and "\n" not in answer["message"]


def test_the_kfp_api_keeps_its_own_paths(served: Served) -> None:
    status, answer, _ = call(served, "/apis/v2beta1/healthz")
    assert status == 200 and "multi_user" in answer
    status, discovery, _ = call(served, "/apis")
    assert {group["name"] for group in discovery["groups"]} >= {"data.fluid.io", "kubeflow.org", GROUP}
    assert "v2beta1" not in {group["name"] for group in discovery["groups"]}


def test_the_guard_refuses_kube_requests_with_a_status(home: Path) -> None:
    guarded = Served(token="s3cret")
    try:
        status, answer, _ = call(guarded, f"{BASE}/resourceflavors")
        assert status == 401 and answer["kind"] == "Status" and answer["reason"] == "Unauthorized"
        request = urllib.request.Request(f"{guarded.url}{BASE}/resourceflavors", data=b"{}", method="POST",
                                         headers={"Authorization": "Bearer s3cret", "Content-Type": "text/plain"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 415 and json.loads(refused.value.read())["reason"] == "UnsupportedMediaType"
        request = urllib.request.Request(f"{guarded.url}/apis/v2beta1/healthz")
        with pytest.raises(urllib.error.HTTPError) as kfp:
            urllib.request.urlopen(request, timeout=10)
        assert kfp.value.code == 401 and "error" in json.loads(kfp.value.read())  # KFP's shape stays KFP's
    finally:
        guarded.stop()


def test_a_thousand_watches_do_not_stall_the_server_and_abandoned_ones_are_freed(served: Served) -> None:
    import asyncio

    port = served.port
    watched = f"{BASE}/resourceflavors?watch=1&fieldSelector=metadata.name%3Dthousand"
    history = served.app.state.kube.histories.of("ResourceFlavor")

    async def open_watch() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET {watched} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        await writer.drain()
        return reader, writer

    async def scenario() -> int:
        streams = [await open_watch() for _ in range(1000)]
        for reader, _ in streams[:5]:  # the headers of a few: the watches are open
            assert (await asyncio.wait_for(reader.readline(), 30)).startswith(b"HTTP/1.1 200")
        status, _, _ = await asyncio.to_thread(call, served, f"{BASE}/resourceflavors/cas")
        assert status in (200, 404)
        await asyncio.to_thread(call, served, f"{BASE}/resourceflavors", "POST", flavor("thousand"))

        async def event_of(reader: asyncio.StreamReader) -> bytes:
            while True:
                line = await reader.readline()
                if b'"ADDED"' in line:
                    return line
        delivered = await asyncio.wait_for(asyncio.gather(*(event_of(reader) for reader, _ in streams)), 120)
        for _, writer in streams:
            writer.close()
        return len(delivered)

    delivered = asyncio.run(scenario())  # the GET among them answered within call()'s own timeout
    assert delivered == 1000
    deadline = time.monotonic() + 30
    while history.listeners() and time.monotonic() < deadline:  # every closed watch lets go of the log
        time.sleep(0.2)
    assert history.listeners() == 0


def test_a_table_watch_shows_a_deleted_objects_last_row(served: Served) -> None:
    import http.client

    call(served, f"{BASE}/namespaces/default/localqueues", "POST", local_queue("table-watched"))
    _, listing, _ = call(served, f"{BASE}/namespaces/default/localqueues")
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    connection.request("GET", f"{BASE}/namespaces/default/localqueues?watch=1&timeoutSeconds=20&resourceVersion="
                       f"{listing['metadata']['resourceVersion']}",
                       headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    stream = connection.getresponse()
    call(served, f"{BASE}/namespaces/default/localqueues/table-watched", "PATCH",
         {"metadata": {"labels": {"seen": "yes"}}}, "application/merge-patch+json")
    modified = json.loads(stream.readline())
    call(served, f"{BASE}/namespaces/default/localqueues/table-watched", "DELETE")
    deleted = json.loads(stream.readline())
    connection.close()
    assert (modified["type"], deleted["type"]) == ("MODIFIED", "DELETED")
    row = modified["object"]["rows"][0]
    assert row["cells"][0] == "table-watched" and "<unknown>" not in row["cells"]
    assert deleted["object"]["rows"][0]["cells"] == row["cells"]  # the last row it had
    assert len(deleted["object"]["columnDefinitions"]) == len(row["cells"])

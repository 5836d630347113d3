"""millpond's own routes (/apis/millpond/v1): apply Fluid manifests, follow a DataLoad, list secrets' names."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millpond.store.secrets import ConfigStore
from tests.datasets_support import manifest, payload

pytest.importorskip("kfp")  # tests.server.test_server_api's Served needs it
from tests.server_support import Served, module_home

SECRET_VALUES = ("AKIA-do-not-show-me", "s3cr3t-value-never-shown", "config-value-also-hidden")
_ANSWERS: list[str] = []  # every body the server sent in this module


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "fluid-server")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[Served]:
    store = ConfigStore(home)
    store.create("secret", "s3-keys", {"aws.accessKeyId": SECRET_VALUES[0], "aws.secretKey": SECRET_VALUES[1]})
    store.create("configmap", "settings", {"endpoint": SECRET_VALUES[2]})
    served = Served()
    yield served
    served.stop()


def call(
    server: Served, path: str, method: str = "GET", body: Any = None, content_type: str = "application/json"
) -> tuple[int, Any]:
    data = None
    if body is not None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    request = urllib.request.Request(f"{server.url}/apis/millpond/v1{path}", data=data, method=method,
                                     headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    _ANSWERS.append(text)
    return status, json.loads(text or "{}")


def _dataload(name: str, dataset: str) -> dict[str, Any]:
    return {"apiVersion": "data.fluid.io/v1alpha1", "kind": "DataLoad", "metadata": {"name": name},
            "spec": {"dataset": {"name": dataset, "namespace": "default"}, "target": [{"path": "/"}]}}


def test_apply_dataset_runtime_and_dataload_through_the_api(server: Served, tmp_path: Path) -> None:
    source = tmp_path / "source"
    (source / "sub").mkdir(parents=True)
    for key, size in (("a.bin", 70_000), ("b.bin", 5_000), ("sub/c.bin", 123_456)):
        (source / key).write_bytes(payload(key, size))
    levels = [{"mediumtype": "MEM", "path": str(tmp_path / "shm"), "quota": "64Mi"}]
    text = manifest("api-ds", f"local://{source}", secret=False, levels=levels)
    status, answer = call(server, "/fluid/apply", "POST", text, "application/yaml")
    assert status == 200, answer
    assert [(i["kind"], i["action"]) for i in answer["items"]] == [
        ("Dataset", "created"), ("AlluxioRuntime", "created")
    ]

    status, answer = call(server, "/datasets/api-ds")
    assert status == 200 and answer["status"]["phase"] == "Bound", answer
    assert answer["status"]["cacheStates"]["cachedPercentage"] == "0.0%"

    status, answer = call(server, "/fluid/apply", "POST", [_dataload("api-load", "api-ds")])
    assert status == 200, answer
    assert answer["items"][0]["action"] == "created" and answer["items"][0]["started"] is True

    deadline = time.monotonic() + 60
    while True:
        status, load = call(server, "/dataloads/api-load")
        assert status == 200, load
        if load["status"].get("phase") in ("Complete", "Failed"):
            break
        assert time.monotonic() < deadline, load["status"]
        time.sleep(0.2)
    assert load["status"]["phase"] == "Complete", load["status"]
    assert load["kind"] == "DataLoad" and load["metadata"]["name"] == "api-load"

    status, dataset = call(server, "/datasets/api-ds")
    assert status == 200 and dataset["status"]["cacheStates"]["cachedPercentage"] == "100.0%", dataset["status"]
    assert dataset["status"]["fileNum"] == "3"
    status, listed = call(server, "/datasets")
    assert status == 200 and listed["kind"] == "List" and "api-ds" in [d["metadata"]["name"] for d in listed["items"]]
    for kind in ("alluxioruntimes", "alluxio", "AlluxioRuntime"):
        status, runtime = call(server, f"/{kind}/api-ds")
        assert status == 200 and runtime["status"]["masterPhase"] == "Ready", (kind, runtime)
    status, loads = call(server, "/load")
    assert status == 200 and [item["metadata"]["name"] for item in loads["items"]] == ["api-load"]

    status, again = call(server, "/fluid/apply", "POST", [_dataload("api-load", "api-ds")])
    assert status == 200 and again["items"][0]["action"] == "unchanged" and again["items"][0]["started"] is False

    status, deleted = call(server, "/datasets/api-ds", "DELETE")
    assert status == 200 and deleted["message"] == 'dataset.data.fluid.io "api-ds" deleted'
    assert call(server, "/datasets/api-ds")[0] == 404
    assert not list((Path(os.environ["MILLPOND_HOME"]) / "datasets" / "default").glob("api-ds-*"))
    assert call(server, "/dataloads/api-load")[0] == 404  # the dataset's operations went with it, as in Fluid
    assert call(server, "/dataloads/api-load", "DELETE")[0] == 404


def test_secrets_and_config_maps_show_names_and_keys_only(server: Served) -> None:
    status, answer = call(server, "/secrets")
    assert status == 200 and answer == {"secrets": [{"name": "s3-keys", "keys": ["aws.accessKeyId", "aws.secretKey"]}]}
    status, answer = call(server, "/configmaps")
    assert status == 200 and answer == {"configmaps": [{"name": "settings", "keys": ["endpoint"]}]}


def test_bad_manifests_answer_400_on_one_line_and_store_nothing(server: Served) -> None:
    good = {"apiVersion": "data.fluid.io/v1alpha1", "kind": "Dataset", "metadata": {"name": "fine"},
            "spec": {"mounts": [{"mountPoint": "local:///tmp", "name": "x"}]}}
    bad = {"apiVersion": "data.fluid.io/v1alpha1", "kind": "Dataset", "metadata": {"name": "broken"},
           "spec": {"mounts": [{"name": "x"}]}}
    for body, content_type, expected in (
        ([good, bad], "application/json", "Dataset broken"),
        ([good, {**good, "kind": "Datset"}], "application/json", "unknown kind"),
        ("kind: [unclosed\n", "application/yaml", "malformed YAML"),
        ("{not json", "application/json", "malformed JSON"),
        ([], "application/json", "no manifests"),
        ([good, {**bad, "spec": {"mounts": [{"mountPoint": "s3://bucket/p", "name": "x", "encryptOptions": [
            {"name": "aws.secretKey", "valueFrom": {"secretKeyRef": {"name": "nosuch", "key": "k"}}}]}]}}],
         "application/json", "nosuch"),
    ):
        status, answer = call(server, "/fluid/apply", "POST", body, content_type)
        assert status == 400, (body, answer)
        assert expected in answer["message"] and "\n" not in answer["message"], answer["message"]
    assert call(server, "/datasets/fine")[0] == 404  # all or nothing


def test_unknown_kinds_and_names(server: Served) -> None:
    for method, path in (("GET", "/widgets"), ("GET", "/widgets/x"), ("DELETE", "/widgets/x")):
        status, answer = call(server, path, method)
        assert status == 404 and "unknown resource type 'widgets'" in answer["message"], (path, answer)
    status, answer = call(server, "/dataloads/nothing-here")
    assert status == 404 and answer["message"] == 'dataloads.data.fluid.io "nothing-here" not found'
    status, answer = call(server, "/cacheruntimeclass")
    assert status == 404 and "one machine" in answer["message"]


def test_no_answer_carries_a_secret_value(server: Served) -> None:
    call(server, "/secrets")
    call(server, "/configmaps")
    assert _ANSWERS
    for text in _ANSWERS:
        for value in SECRET_VALUES:
            assert value not in text

"""KServe's InferenceService through the server's resource routes: ``POST /fluid/apply`` checks and stores
it as ``millpond apply -f`` does (with KServe's status), ``GET /{kind}`` and ``DELETE /{kind}/{name}``
find it by kubectl's names (``isvc`` too), and a refused or bad document is a 400 on one line with
nothing stored."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import joblib
import pytest
from sklearn.dummy import DummyClassifier

from millpond.serving import endpoints, lifecycle
from tests.server_support import Served, module_home, serving

ISVC = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": {"name": "digits"},
        "spec": {"predictor": {"sklearn": {"storageUri": "s3://models/digits"}, "minReplicas": 2}}}
XGB = {**ISVC, "metadata": {"name": "trees"}, "spec": {"predictor": {"xgboost": {"storageUri": "gs://b/m"}}}}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "isvc-server")


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


def test_apply_list_get_delete_inference_services_through_the_api(server: Served) -> None:
    status, answer = call(server, "/fluid/apply", "POST", [ISVC, XGB])
    assert status == 200, answer
    assert [item["message"] for item in answer["items"]] == [
        "inferenceservice.serving.kserve.io/digits created", "inferenceservice.serving.kserve.io/trees created"]
    assert len(answer["notes"]) == 1 and answer["notes"][0].startswith("InferenceService trees: accepted, not served")
    status, listing = call(server, "/isvc")
    assert status == 200 and [item["metadata"]["name"] for item in listing["items"]] == ["digits", "trees"]
    ready = {item["metadata"]["name"]: item["status"]["conditions"][-1] for item in listing["items"]}
    assert ready["trees"]["status"] == "False"
    # digits' supervisor started at apply: NotStarted or Loading until it finds no bucket models to read from
    assert (ready["digits"]["status"], ready["digits"].get("reason")) in (
        ("Unknown", "NotStarted"), ("Unknown", "Loading"), ("False", "ModelLoadFailed"))
    assert ready["trees"]["reason"] == "NoSupportingRuntime"
    status, one = call(server, "/inferenceservices.serving.kserve.io/digits")
    assert status == 200 and one["spec"]["predictor"]["minReplicas"] == 2
    assert call(server, "/isvc/digits", "DELETE")[1]["message"] == 'inferenceservice.serving.kserve.io "digits" deleted'
    status, gone = call(server, "/isvc/digits")
    assert status == 404 and gone["error"] == 'inferenceservices.serving.kserve.io "digits" not found'
    assert call(server, "/isvc/trees", "DELETE")[0] == 200


@pytest.mark.parametrize(("documents", "says"), [
    ([ISVC, {**ISVC, "metadata": {"name": "both"}, "spec": {"predictor": {
        "sklearn": {"storageUri": "s3://a/b"}, "pytorch": {"storageUri": "s3://a/b"}}}}], "exactly one of"),
    ([ISVC, {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "InferenceGraph", "metadata": {"name": "g"},
             "spec": {"nodes": {}}}], "InferenceGraph: routing"),
])
def test_a_bad_or_refused_document_is_a_400_on_one_line_and_nothing_is_stored(
        server: Served, documents: list[dict[str, Any]], says: str) -> None:
    status, answer = call(server, "/fluid/apply", "POST", documents)
    assert status == 400 and says in answer["error"] and "\n" not in answer["error"]
    assert call(server, "/isvc")[1]["items"] == []


def test_the_server_starts_a_supervisor_again_after_kill_9(server: Served, tmp_path: Path) -> None:
    """What apply started, the server's reconcile loop (every 10 s) starts again once its supervisor is gone."""
    joblib.dump(DummyClassifier(strategy="constant", constant=7).fit([[0], [1]], [7, 7]), tmp_path / "model.joblib")
    document = {**ISVC, "metadata": {"name": "sevens"},
                "spec": {"predictor": {"sklearn": {"storageUri": f"file://{tmp_path}"}}}}
    assert call(server, "/fluid/apply", "POST", [document])[0] == 200

    def ready() -> tuple[str, str]:
        condition = call(server, "/isvc/sevens")[1]["status"]["conditions"][-1]
        return condition["status"], condition.get("reason", "")

    def until(wanted: tuple[str, str], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while ready() != wanted:
            assert time.monotonic() < deadline, f"not {wanted} within {timeout_s}s: {ready()}"
            time.sleep(0.2)

    try:
        until(("True", ""), 60)
        first = endpoints.read("default", "sevens")
        assert first is not None
        os.kill(first.supervisor_pid, signal.SIGKILL)
        until(("False", "SupervisorNotRunning"), 10)
        until(("True", ""), 40)
        again = endpoints.read("default", "sevens")
        assert again is not None and again.supervisor_pid != first.supervisor_pid and again.port == first.port
    finally:
        assert call(server, "/isvc/sevens", "DELETE")[0] == 200
    assert not lifecycle.supervisors("sevens") and endpoints.read_file("default", "sevens") is None

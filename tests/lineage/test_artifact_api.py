"""Lineage through KFP master's native artifact API (``/apis/v2beta1/artifacts``, ``/artifact_tasks``), on SQLite
and PostgreSQL: the demo's model traced back to the dataset it was trained on, a cache hit pointing at the
execution it reused, paging and filters, and bad input (4xx with a message, never a 500)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from millpond.store.lineage_store import LineageStore
from tests.lineage.pipelines import fanout, fit_one
from tests.lineage.support import ROOT, compiled, filtered, get, links, ok
from tests.server_support import Served, call, serving

pytestmark = pytest.mark.usefixtures("database")


@pytest.fixture
def server(home: Path, database: str) -> Iterator[Served]:
    yield from serving()


def run(cli: Callable[..., Any], *args: Any) -> dict[str, Any]:
    ran = cli("run", *args, "-o", "json")
    assert ran.code == 0, ran.err
    result: dict[str, Any] = json.loads(ran.out)
    assert result["state"] == "SUCCEEDED", result
    return result


def by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in result["tasks"]}


def test_the_demo_model_traced_back_to_the_dataset_it_was_trained_on(
        cli: Callable[..., Any], server: Served, database: str, tmp_path: Path) -> None:
    result = run(cli, ROOT / "examples" / "digits_pipeline.py", "-p", "n_estimators=5")
    tasks = by_name(result)
    is_model = {"key": "type", "operation": "EQUALS", "string_value": "Model"}
    models = ok(server, "/artifacts?filter=" + filtered(is_model))
    assert [a["uri"] for a in models["artifacts"]] == [tasks["train"]["outputs"]["model"]]
    model = models["artifacts"][0]
    assert (model["type"], model["name"], model["namespace"]) == ("Model", "model", "")
    assert model["metadata"]["framework"] == "scikit-learn" and model["metadata"]["n_estimators"] == 5
    assert ok(server, f"/artifacts/{model['artifact_id']}") == model

    # the task that produced the model ...
    [made] = links(server, "OUTPUT", artifact_ids=[model["artifact_id"]])
    assert (made["task_id"], made["run_id"], made["key"]) == (tasks["train"]["id"], result["run_id"], "model")
    assert made["producer"] == {"task_name": "train"}
    # ... read one artifact: the training split preprocess wrote
    [read] = [link for link in links(server, task_ids=[made["task_id"]]) if link["type"] != "OUTPUT"]
    assert (read["key"], read["type"]) == ("train_data", "TASK_OUTPUT_INPUT")
    assert read["producer"] == {"task_name": "preprocess"}
    dataset = ok(server, f"/artifacts/{read['artifact_id']}")
    assert (dataset["type"], dataset["uri"]) == ("Dataset", tasks["preprocess"]["outputs"]["train_data"])
    assert dataset["metadata"]["rows"] > 0
    # ... which preprocess wrote, from no artifact at all: the start of the model's lineage
    [wrote] = links(server, "OUTPUT", artifact_ids=[dataset["artifact_id"]])
    assert wrote["task_id"] == tasks["preprocess"]["id"]
    assert [link for link in links(server, task_ids=[wrote["task_id"]]) if link["type"] != "OUTPUT"] == []

    # forwards: who else used the model (evaluate), and the run's links by kind
    users = links(server, "TASK_OUTPUT_INPUT", artifact_ids=[model["artifact_id"]])
    assert sorted(tasks_by_id(result)[u["task_id"]] for u in users) == ["evaluate"]
    in_run = links(server, run_ids=[result["run_id"]])
    assert sorted((tasks_by_id(result)[link["task_id"]], link["type"], link["key"]) for link in in_run) == [
        ("evaluate", "OUTPUT", "metrics"), ("evaluate", "TASK_OUTPUT_INPUT", "model"),
        ("evaluate", "TASK_OUTPUT_INPUT", "test_data"), ("preprocess", "OUTPUT", "test_data"),
        ("preprocess", "OUTPUT", "train_data"), ("train", "OUTPUT", "model"),
        ("train", "TASK_OUTPUT_INPUT", "train_data")]
    metrics = ok(server, f"/artifacts/{next(link for link in in_run if link['key'] == 'metrics')['artifact_id']}")
    assert metrics["type"] == "Metric" and 0 < metrics["metadata"]["accuracy"] <= 1

    # an InferenceService serving the model is an execution that reads it: the lineage goes on to the service
    service = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
               "metadata": {"name": "digits", "namespace": "default"},
               "spec": {"predictor": {"sklearn": {"storageUri": f"file://{model['uri']}"}}}}
    (tmp_path / "digits.yaml").write_text(json.dumps(service))
    applied = cli("apply", "-f", tmp_path / "digits.yaml")
    assert applied.code == 0, applied.err
    try:
        [served] = links(server, "COMPONENT_INPUT", artifact_ids=[model["artifact_id"]])
        assert (served["key"], served["run_id"]) == ("model", "")
        deployment = LineageStore(database).find_execution(served["task_id"])
        assert (deployment.type, deployment.name, deployment.state) == ("millpond.Deployment", "default/digits",
                                                                        "RUNNING")
        assert cli("apply", "-f", tmp_path / "digits.yaml").code == 0  # unchanged: recorded once
        assert links(server, "COMPONENT_INPUT", artifact_ids=[model["artifact_id"]]) == [served]
    finally:
        assert cli("delete", "inferenceservice", "digits").code == 0


def tasks_by_id(result: dict[str, Any]) -> dict[str, str]:
    return {t["id"]: t["name"] for t in result["tasks"]}


def test_a_cached_execution_points_at_the_execution_it_reused(
        cli: Callable[..., Any], server: Served, database: str) -> None:
    first = run(cli, ROOT / "examples" / "digits_pipeline.py", "-p", "n_estimators=5")
    second = run(cli, ROOT / "examples" / "digits_pipeline.py", "-p", "n_estimators=5")
    before, after = by_name(first), by_name(second)
    assert after["train"]["cached"]
    lineage = LineageStore(database)
    reused, original = lineage.find_execution(after["train"]["id"]), lineage.find_execution(before["train"]["id"])
    assert (reused.type, reused.state, original.state) == ("system.ContainerExecution", "CACHED", "COMPLETE")
    assert reused.custom_properties["cached_execution_id"] == before["train"]["id"]
    assert reused.custom_properties["cache_fingerprint"] == original.custom_properties["cache_fingerprint"]
    assert reused.custom_properties["task_name"] == "train" and reused.run_id == second["run_id"]
    # the cached task's output is the first run's artifact itself, read from the same dataset artifact
    [was] = links(server, "OUTPUT", task_ids=[before["train"]["id"]])
    [now] = links(server, "OUTPUT", task_ids=[after["train"]["id"]])
    assert now["artifact_id"] == was["artifact_id"] and now["run_id"] == second["run_id"]
    assert len(ok(server, "/artifacts?page_size=100")["artifacts"]) == 4  # two datasets, a model, metrics: once

    # deleting the first run forgets its executions and links, not the artifacts the second run still names
    status, answer = call(server.url, "DELETE", f"/apis/v2beta1/runs/{first['run_id']}")
    assert status == 200, answer
    assert links(server, run_ids=[first["run_id"]]) == []
    assert get(server, f"/artifact_tasks?task_ids={before['train']['id']}")[0] == 404
    assert ok(server, f"/artifacts/{was['artifact_id']}")["uri"] == before["train"]["outputs"]["model"]


def test_pages_sorting_and_filters(cli: Callable[..., Any], server: Served, tmp_path: Path) -> None:
    result = run(cli, compiled(fanout, tmp_path))
    seen, token, pages = [], "", 0
    while True:
        page = ok(server, f"/artifacts?page_size=4&page_token={token}")
        assert page["total_size"] == 6
        seen += page["artifacts"]
        pages += 1
        token = page["next_page_token"]
        if not token:
            break
    assert pages == 2 and len({a["artifact_id"] for a in seen}) == 6
    assert sorted(a["metadata"]["index"] for a in seen) == [0, 1, 2, 3, 4, 5]
    by_uri = ok(server, "/artifacts?sort_by=uri%20desc")["artifacts"]
    assert [a["uri"] for a in by_uri] == sorted((a["uri"] for a in seen), reverse=True)
    one = seen[3]
    assert ok(server, "/artifacts?filter=" + filtered(
        {"key": "uri", "operation": "EQUALS", "string_value": one["uri"]}))["artifacts"] == [one]
    later = {"key": "created_at", "operation": "GREATER_THAN", "timestamp_value": "2999-01-01T00:00:00Z"}
    assert ok(server, "/artifacts?filter=" + filtered(later))["artifacts"] == []
    assert ok(server, "/artifacts?filter=" + filtered(
        {"key": "type", "operation": "IN", "string_values": {"values": ["Model", "Metric"]}}))["total_size"] == 0
    # the links of a run, two to a page, and of one IOType by its number (9: OUTPUT), as grpc-gateway takes enums
    outputs, token = [], ""
    while True:
        page = ok(server, f"/artifact_tasks?run_ids={result['run_id']}&type=9&page_size=2&page_token={token}")
        outputs += page["artifact_tasks"]
        token = page["next_page_token"]
        if not token:
            break
    assert sorted(link["artifact_id"] for link in outputs) == sorted(a["artifact_id"] for a in seen)
    assert {link["key"] for link in outputs} == {"data"}


def test_bad_input_is_a_400_or_404_with_a_message(cli: Callable[..., Any], server: Served, tmp_path: Path) -> None:
    result = run(cli, compiled(fanout, tmp_path))
    unknown = "00000000-0000-0000-0000-000000000000"
    refused = {
        f"/artifacts/{unknown}": 404,
        f"/artifact_tasks?task_ids={unknown}": 404,
        f"/artifact_tasks?artifact_ids={unknown}": 404,
        "/artifact_tasks": 400,  # no ids at all: KFP asks for one
        "/artifact_tasks?page_size=10": 400,
        f"/artifact_tasks?run_ids={result['run_id']}&type=SIDEWAYS": 400,
        f"/artifact_tasks?run_ids={result['run_id']}&type=99": 400,
        "/artifacts?page_size=100000000": 400,
        "/artifacts?page_size=99999999999999999999": 400,
        "/artifacts?page_size=ten": 400,
        "/artifacts?page_token=not-a-token": 400,
        "/artifacts?sort_by=colour": 400,
        "/artifacts?sort_by=uri%20sideways": 400,
        "/artifacts?filter=%7Bnot%20json": 400,
        "/artifacts?filter=" + filtered({"key": "colour", "operation": "EQUALS", "string_value": "red"}): 400,
        "/artifacts?filter=" + filtered({"key": "created_at", "operation": "EQUALS", "string_value": "yesterday"}): 400,
        "/artifacts?filter=" + filtered({"key": "created_at", "operation": "IS_SUBSTRING", "string_value": "2"}): 400,
        "/artifacts?filter=" + filtered({"key": "uri", "operation": "EQUALS", "string_value": "a\u0000b"}): 400,
        "/artifacts?filter=" + filtered({"key": "uri", "operation": "EQUALS"}): 400,
        "/artifact_tasks?" + "&".join(f"run_ids=r{i}" for i in range(1001)): 400,
    }
    for path, status in refused.items():
        answered, body = get(server, path)
        assert answered == status, (path, answered, body)
        assert isinstance(body, dict) and body["message"], (path, body)
    assert ok(server, f"/artifact_tasks?run_ids={unknown}")["artifact_tasks"] == []  # single-user: no run lookup
    task = result["tasks"][-1]
    artifact = {"name": "x", "type": "Artifact", "namespace": "kubeflow"}
    mine = {"run_id": result["run_id"], "task_id": task["id"]}
    link = {**mine, "artifact_id": unknown, "producer": {}, "key": "k"}
    creates = [
        ("/artifacts", {"artifact": {"name": "x"}}, 400),  # no namespace, as KFP requires one
        ("/artifacts", {"artifact": {**artifact, "type": "TYPE_UNSPECIFIED"}, "run_id": result["run_id"],
                        "task_id": task["id"], "producer_key": "x"}, 400),
        ("/artifacts", {"artifact": {**artifact, "type": "Metric"}, "run_id": result["run_id"], "task_id": task["id"],
                        "producer_key": "x"}, 400),  # a Metric needs its number_value
        ("/artifacts", {"artifact": artifact, **mine, "task_id": unknown, "producer_key": "x"}, 404),
        ("/artifacts", {"artifact": artifact, "run_id": unknown, "task_id": task["id"], "producer_key": "x"}, 400),
        ("/artifacts", {"artifact": artifact, "run_id": result["run_id"], "task_id": task["id"]}, 400),
        ("/artifacts", {"artifact": {**artifact, "colour": "red"}}, 400),  # unknown fields are refused
        ("/artifacts:batchCreate", {"artifacts": []}, 400),
        ("/artifact_tasks", {}, 400),
        ("/artifact_tasks", {"artifact_task": {**link, "type": "OUTPUT"}}, 404),
        ("/artifact_tasks", {"artifact_task": link}, 400),  # no type
        ("/artifact_tasks:batchCreate", {"artifact_tasks": []}, 400),
    ]
    for path, body, status in creates:
        answered, answer = call(server.url, "POST", "/apis/v2beta1" + path, body=body)
        assert answered == status, (path, body, answered, answer)
        assert answer["message"], answer
    assert ok(server, "/artifacts")["total_size"] == 6  # nothing stored by any of it


def test_artifacts_and_links_created_as_kfp_launcher_reports_them(
        cli: Callable[..., Any], server: Served, tmp_path: Path) -> None:
    result = run(cli, compiled(fit_one, tmp_path))
    tasks = by_name(result)
    report = {"artifact": {"name": "report", "type": "HTML", "uri": str(tmp_path / "report.html"),
                           "namespace": "kubeflow", "description": "a page", "metadata": {"pages": 2}},
              "run_id": result["run_id"], "task_id": tasks["fit"]["id"], "producer_key": "report"}
    status, made = call(server.url, "POST", "/apis/v2beta1/artifacts", body=report)
    assert status == 200, made
    assert (made["type"], made["name"], made["namespace"], made["description"]) == ("HTML", "report", "", "a page")
    assert made["metadata"]["pages"] == 2 and made["uri"] == str(tmp_path / "report.html")
    assert ok(server, f"/artifacts/{made['artifact_id']}") == made
    [link] = links(server, "OUTPUT", artifact_ids=[made["artifact_id"]])
    assert (link["task_id"], link["key"], link["producer"]) == (tasks["fit"]["id"], "report", {"task_name": "fit"})
    status, again = call(server.url, "POST", "/apis/v2beta1/artifacts", body=report)
    assert status == 409 and made["artifact_id"] in again["message"]

    read = {"artifact_id": made["artifact_id"], "run_id": result["run_id"], "task_id": tasks["make"]["id"],
            "type": "COMPONENT_INPUT", "producer": {"task_name": "fit"}, "key": "extra"}
    status, created = call(server.url, "POST", "/apis/v2beta1/artifact_tasks", body={"artifact_task": read})
    assert status == 200, created
    assert (created["type"], created["task_id"], created["key"]) == ("COMPONENT_INPUT", tasks["make"]["id"], "extra")
    assert created in links(server, task_ids=[tasks["make"]["id"]])

    metrics = {"artifacts": [
        {"artifact": {"name": name, "type": 6, "number_value": value, "namespace": "kubeflow"},
         "run_id": result["run_id"], "task_id": tasks["fit"]["id"], "producer_key": "metrics"}
        for name, value in (("accuracy", 0.75), ("loss", 0.5))]}
    status, body = call(server.url, "POST", "/apis/v2beta1/artifacts:batchCreate", body=metrics)
    assert status == 200, body
    assert [(a["name"], a["type"], a["number_value"]) for a in body["artifacts"]] == [
        ("accuracy", "Metric", 0.75), ("loss", "Metric", 0.5)]
    status, body = call(server.url, "POST", "/apis/v2beta1/artifact_tasks:batchCreate", body={"artifact_tasks": [
        {**read, "artifact_id": a["artifact_id"], "key": a["name"]} for a in body["artifacts"]]})
    assert status == 200 and len(body["artifact_tasks"]) == 2, body

"""millpond's read-only lineage routes for the UI (``/ui-api/lineage/``): the executions list (paged, filtered,
sorted), one execution with its declared and actual inputs and outputs, one artifact's neighbourhood; after a real
run of a four-step pipeline and a second run of it that the cache answers. Bad input is a 4xx with a message
(unknown ids 404, bad paging 400), never a 500; on a multi-user server another namespace's lineage is a 403."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kfp_multiuser.team import Team, start_team
from tests.lineage.chain import chain
from tests.lineage.support import compiled, filtered
from tests.lineage.test_lineage_multiuser import _run as team_run
from tests.server_support import Served, call, module_home, serving

LINEAGE = "/ui-api/lineage"


def get(server: Served, path: str) -> tuple[int, Any]:
    return call(server.url, "GET", LINEAGE + path)


def ok(server: Served, path: str) -> dict[str, Any]:
    status, body = get(server, path)
    assert status == 200, body
    return body


@pytest.fixture
def server(home: Path, database: str) -> Iterator[Served]:
    yield from serving()


def run(cli: Callable[..., Any], package: Path) -> dict[str, Any]:
    ran = cli("run", package, "-o", "json")
    assert ran.code == 0, ran.err
    result: dict[str, Any] = json.loads(ran.out)
    assert result["state"] == "SUCCEEDED", result
    return result


@pytest.mark.usefixtures("database")
def test_executions_an_execution_and_an_artifacts_neighbourhood(
        cli: Callable[..., Any], server: Served, tmp_path: Path) -> None:
    package = compiled(chain, tmp_path)
    first, second = run(cli, package), run(cli, package)
    tasks = {t["name"]: t for t in first["tasks"]}
    again = {t["name"]: t for t in second["tasks"]}
    assert all(again[name]["cached"] for name in ("gather", "clean", "train", "score"))

    # the list: newest first; each task of each run, the second run's CACHED naming the execution it reused
    containers = filtered({"key": "type", "operation": "EQUALS", "string_value": "system.ContainerExecution"})
    listed = ok(server, f"/executions?page_size=100&filter={containers}")
    assert listed["total_size"] == 8 and listed["next_page_token"] == ""
    by_id = {x["execution_id"]: x for x in listed["executions"]}
    for name in ("gather", "clean", "train", "score"):
        done, reused = by_id[tasks[name]["id"]], by_id[again[name]["id"]]
        assert (done["state"], done["run_id"], done["display_name"]) == ("COMPLETE", first["run_id"], name)
        assert (reused["state"], reused["cached_execution_id"]) == ("CACHED", tasks[name]["id"])
    cached = filtered({"key": "state", "operation": "EQUALS", "string_value": "CACHED"},
                      {"key": "run_id", "operation": "EQUALS", "string_value": second["run_id"]})
    assert {x["display_name"] for x in ok(server, f"/executions?filter={cached}")["executions"]} == {
        "gather", "clean", "train", "score"}
    named = filtered({"key": "name", "operation": "IS_SUBSTRING", "string_value": "rai"})
    assert {x["execution_id"] for x in ok(server, f"/executions?filter={named}")["executions"]} == {
        tasks["train"]["id"], again["train"]["id"]}
    by_name = ok(server, f"/executions?filter={containers}&sort_by=name&page_size=100")["executions"]
    assert [x["name"] for x in by_name] == sorted(x["name"] for x in by_name)
    # paging: three at a time, every execution once
    seen, token = [], ""
    while True:
        page = ok(server, f"/executions?filter={containers}&page_size=3&page_token={token}")
        seen += [x["execution_id"] for x in page["executions"]]
        token = page["next_page_token"]
        if not token:
            break
    assert sorted(seen) == sorted(by_id)

    # one execution: what its component declares, and what it read and wrote
    trained = ok(server, f"/executions/{tasks['train']['id']}")
    assert trained["execution"]["task_name"] == "train"
    assert [(d["name"], d["kind"], d["type"]) for d in trained["declared_inputs"]] == [
        ("cleaned", "artifact", "system.Dataset")]
    assert [(d["name"], d["type"]) for d in trained["declared_outputs"]] == [("model", "system.Model")]
    [read] = trained["inputs"]
    assert (read["key"], read["io_type"], read["producer_task"]) == ("cleaned", "TASK_OUTPUT_INPUT", "clean")
    assert read["artifact"]["uri"] == tasks["clean"]["outputs"]["cleaned"]
    [wrote] = trained["outputs"]
    assert (wrote["key"], wrote["artifact"]["type"], wrote["artifact"]["run_id"]) == ("model", "Model", first["run_id"])
    gathered = ok(server, f"/executions/{tasks['gather']['id']}")
    assert [(d["name"], d["kind"], d.get("value")) for d in gathered["declared_inputs"]] == [("rows", "parameter", 3)]
    assert gathered["inputs"] == []
    reused = ok(server, f"/executions/{again['train']['id']}")  # a cache hit: the same artifacts
    assert [o["artifact"]["artifact_id"] for o in reused["outputs"]] == [wrote["artifact"]["artifact_id"]]

    # an artifact's neighbourhood: who wrote it (the task, and the cache hit that reused it) and who read it
    near = ok(server, f"/artifacts/{read['artifact']['artifact_id']}")
    assert near["artifact"]["name"] == "cleaned" and near["artifact"]["metadata"]["rows"] == 3
    assert {p["execution"]["execution_id"] for p in near["producers"]} == {tasks["clean"]["id"], again["clean"]["id"]}
    assert {c["execution"]["execution_id"] for c in near["consumers"]} == {tasks["train"]["id"], again["train"]["id"]}
    producer = next(p for p in near["producers"] if p["execution"]["execution_id"] == tasks["clean"]["id"])
    assert [link["key"] for link in producer["inputs"]] == ["raw"]
    consumer = next(c for c in near["consumers"] if c["execution"]["execution_id"] == tasks["train"]["id"])
    assert [link["artifact"]["type"] for link in consumer["outputs"]] == ["Model"]


@pytest.mark.usefixtures("database")
def test_bad_ids_and_bad_paging_are_4xx_never_500(server: Served) -> None:
    for path in ("/executions/no-such", "/artifacts/no-such", "/executions/%2E%2E", "/artifacts/" + "x" * 4000):
        status, body = get(server, path)
        assert status == 404 and body["message"], (path, body)
    unknown_key = filtered({"key": "colour", "operation": "EQUALS", "string_value": "red"})
    bad_time = filtered({"key": "created_at", "operation": "GREATER_THAN", "string_value": "yesterday"})
    for query in ("page_size=5000", "page_size=many", "page_token=not-a-token", "filter=%7Bnot%20json",
                  f"filter={unknown_key}", "sort_by=colour", "sort_by=name%20sideways", f"filter={bad_time}"):
        status, body = get(server, f"/executions?{query}")
        assert status == 400 and body["message"], (query, body)
    assert ok(server, "/executions") == {"executions": [], "total_size": 0, "next_page_token": ""}


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    for home in module_home(tmp_path_factory, "lineage-ui-team"):
        started = start_team(home)
        yield started
        started.stop()


def test_another_namespaces_lineage_is_refused(team: Team, tmp_path: Path) -> None:
    spec = yaml.safe_load(compiled(chain, tmp_path).read_text())
    runs = {namespace: team_run(team, namespace, spec) for namespace in ("team-a", "team-b")}
    b_execution = next(x for x in json_ok(team.call("bob", "GET", f"{LINEAGE}/executions?namespace=team-b"))[
        "executions"] if x["run_id"] == runs["team-b"])
    b_artifact = json_ok(team.call("bob", "GET", "/apis/v2beta1/artifacts?namespace=team-b"))["artifacts"][0]
    a_listed = json_ok(team.call("carol", "GET", f"{LINEAGE}/executions?namespace=team-a"))["executions"]
    assert {x["namespace"] for x in a_listed} == {"team-a"} and len(a_listed) >= 4

    for who, status in (("alice", 403), ("carol", 403), ("bob", 200), ("root", 200)):
        for path in (f"{LINEAGE}/executions?namespace=team-b", f"{LINEAGE}/executions/{b_execution['execution_id']}",
                     f"{LINEAGE}/artifacts/{b_artifact['artifact_id']}"):
            answered, body = team.call(who, "GET", path)
            assert answered == status, (who, path, body)
            if status == 403:
                assert "team-b" in body["message"] and "executions" not in body and "artifact" not in body
    assert team.call("alice", "GET", f"{LINEAGE}/executions")[0] == 400  # a namespace must be named
    assert team.call("alice", "GET", f"{LINEAGE}/executions/no-such")[0] == 404
    quoted = urllib.parse.quote(json.dumps({"predicates": []}))
    assert team.call("carol", "GET", f"{LINEAGE}/executions?namespace=team-a&filter={quoted}")[0] == 200


def json_ok(answer: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    status, body = answer
    assert status == 200, body
    return body

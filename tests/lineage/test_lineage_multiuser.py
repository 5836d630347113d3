"""The artifact API on a team's server (``millpond server --multi-user``), authorized as KFP's artifact server does:
artifacts on ``artifacts`` (get, list) in their namespace, artifact-task links on ``runs`` (get) of the runs they
belong to. alice edits team-a, bob team-b, carol views team-a; refusals are 403s worded as KFP's."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kfp_multiuser.team import API, Team, start_team
from tests.lineage.pipelines import fit_one
from tests.lineage.support import compiled
from tests.server_support import module_home


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    for home in module_home(tmp_path_factory, "lineage-team"):
        started = start_team(home)
        yield started
        started.stop()


def _ok(answer: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    status, body = answer
    assert status == 200, body
    return body


def _run(team: Team, namespace: str, spec: dict[str, Any]) -> str:
    experiment = _ok(team.call("server", "POST", f"{API}/experiments",
                               {"display_name": f"x-{uuid.uuid4().hex[:8]}", "namespace": namespace}))
    run_id: str = _ok(team.call("server", "POST", f"{API}/runs", {
        "display_name": "fit", "experiment_id": experiment["experiment_id"], "pipeline_spec": spec}))["run_id"]
    deadline = time.monotonic() + 120
    while (state := _ok(team.call("server", "GET", f"{API}/runs/{run_id}"))["state"]) not in (
            "SUCCEEDED", "FAILED", "CANCELED"):
        assert time.monotonic() < deadline, "the run did not finish"
        time.sleep(0.2)
    assert state == "SUCCEEDED"
    return run_id


def test_artifacts_and_their_links_are_authorized_in_their_namespace(team: Team, tmp_path: Path) -> None:
    spec = yaml.safe_load(compiled(fit_one, tmp_path).read_text())
    runs = {namespace: _run(team, namespace, spec) for namespace in ("team-a", "team-b")}
    listed = {ns: _ok(team.call("server", "GET", f"{API}/artifacts?namespace={ns}"))["artifacts"] for ns in runs}
    assert {ns: sorted(a["type"] for a in found) for ns, found in listed.items()} == {
        "team-a": ["Dataset", "Model"], "team-b": ["Dataset", "Model"]}
    assert all(a["namespace"] == ns for ns, found in listed.items() for a in found)
    a_model = next(a for a in listed["team-a"] if a["type"] == "Model")

    # listing: the members of the namespace (edit or view) may, others may not; a namespace must be named
    for who, namespace, status in (("alice", "team-a", 200), ("carol", "team-a", 200), ("bob", "team-a", 403),
                                   ("alice", "team-b", 403), ("carol", "team-b", 403), ("bob", "team-b", 200)):
        answered, body = team.call(who, "GET", f"{API}/artifacts?namespace={namespace}")
        assert answered == status, (who, namespace, body)
        if status == 403:
            assert "Failed to list artifacts" in body["message"] and namespace in body["message"]
        else:
            assert sorted(a["artifact_id"] for a in body["artifacts"]) == sorted(
                a["artifact_id"] for a in listed[namespace])
    assert team.call("alice", "GET", f"{API}/artifacts")[0] == 400

    # one artifact, and the links of a run, a task and an artifact
    assert team.call("carol", "GET", f"{API}/artifacts/{a_model['artifact_id']}") == (200, a_model)
    answered, body = team.call("bob", "GET", f"{API}/artifacts/{a_model['artifact_id']}")
    assert answered == 403 and f"Failed to access artifact {a_model['artifact_id']}" in body["message"]
    made = _ok(team.call("alice", "GET", f"{API}/artifact_tasks?artifact_ids={a_model['artifact_id']}&type=OUTPUT"))
    [link] = made["artifact_tasks"]
    assert link["run_id"] == runs["team-a"]
    for query in (f"run_ids={runs['team-a']}", f"task_ids={link['task_id']}",
                  f"artifact_ids={a_model['artifact_id']}"):
        assert team.call("carol", "GET", f"{API}/artifact_tasks?{query}")[0] == 200, query
        assert team.call("bob", "GET", f"{API}/artifact_tasks?{query}")[0] == 403, query
    # one id of another namespace among one's own refuses the whole list
    both = f"run_ids={runs['team-a']}&run_ids={runs['team-b']}"
    assert team.call("alice", "GET", f"{API}/artifact_tasks?{both}")[0] == 403
    assert team.call("server", "GET", f"{API}/artifact_tasks?{both}")[0] == 200
    assert team.call("alice", "GET", f"{API}/artifact_tasks?run_ids=no-such-run")[0] == 404

    # creating: ``update`` on the run is KFP's own service accounts' (no Kubeflow role grants it): administrators
    report = {"artifact": {"name": "report", "type": "HTML", "namespace": "team-a"}, "run_id": runs["team-a"],
              "task_id": link["task_id"], "producer_key": "report"}
    answered, body = team.call("alice", "POST", f"{API}/artifacts", report)
    assert answered == 403, body
    assert team.call("bob", "POST", f"{API}/artifacts", report)[0] == 403
    assert team.call("server", "POST", f"{API}/artifacts", {**report, "artifact": {
        **report["artifact"], "namespace": "team-b"}})[0] == 400  # not the run's namespace
    made = _ok(team.call("server", "POST", f"{API}/artifacts", report))
    assert made["namespace"] == "team-a"
    assert team.call("carol", "GET", f"{API}/artifacts/{made['artifact_id']}")[0] == 200

"""The Katib pages' reads on a multi-user server: an Experiment in team-a and one in team-b (each one trial, run to
its end); the Experiments list of every namespace shows a member only her namespace's (an administrator both); a
list or an experiment of another namespace is refused with Kubernetes' words, whether or not it exists."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest

from tests.routes_multiuser.support import ALICE, BOB, CAROL, DANA, TEAM_A, TEAM_B, Caller, MultiUserServer, team

LIST = "/ui-api/katib/experiments"


def experiment(namespace: str) -> dict[str, Any]:
    container = {"name": "training-container", "image": "python:3.12",
                 "command": [sys.executable, "-c", "import sys; print(f'loss={float(sys.argv[1]) ** 2}')",
                             "${trialParameters.x}"]}
    return {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment",
            "metadata": {"name": f"tune-{namespace[-1]}", "namespace": namespace},
            "spec": {"objective": {"type": "minimize", "objectiveMetricName": "loss"},
                     "algorithm": {"algorithmName": "random"}, "maxTrialCount": 1, "parallelTrialCount": 1,
                     "parameters": [{"name": "x", "parameterType": "double",
                                     "feasibleSpace": {"min": "-1", "max": "1"}}],
                     "trialTemplate": {"primaryContainerName": "training-container",
                                       "trialParameters": [{"name": "x", "reference": "x"}],
                                       "trialSpec": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {
                                           "spec": {"containers": [container], "restartPolicy": "Never"}}}}}}}


@pytest.fixture(scope="module")
def callers(server: MultiUserServer) -> dict[str, Caller]:
    found = team(server)
    applied = found["admin"].apply(experiment(TEAM_A), experiment(TEAM_B))
    assert applied.status == 200, applied.text
    deadline = time.monotonic() + 120
    for namespace in (TEAM_A, TEAM_B):  # each ran its trial to the end (its controller then ends)
        while (shown := found["admin"].call(f"{LIST}/{namespace}/tune-{namespace[-1]}")).body["condition"][
                "type"] != "Succeeded":
            assert time.monotonic() < deadline, shown.text
            time.sleep(0.5)
    return found


def refused(answer: Any, who: str, what: str) -> None:
    assert answer.status == 403, answer.text
    assert f'User "{who}" cannot {what}' in answer.body["message"], answer.body


def test_the_experiments_list_shows_only_the_callers_namespaces(callers: dict[str, Caller]) -> None:
    both = [(TEAM_A, "tune-a"), (TEAM_B, "tune-b")]
    for who, expected in ((ALICE.name, both[:1]), (BOB.name, both[1:]), (CAROL.name, both[:1]), (DANA.name, both),
                          ("admin", both)):
        listed = callers[who].call(f"{LIST}?all_namespaces=true")
        assert listed.status == 200, (who, listed.text)
        assert [(one["namespace"], one["name"]) for one in listed.body["experiments"]] == expected, who
    mine = callers[ALICE.name].call(f"{LIST}?namespace={TEAM_A}").body["experiments"]
    assert [one["name"] for one in mine] == ["tune-a"] and mine[0]["counts"]["trialsSucceeded"] == 1
    assert callers["nobody"].call(f"{LIST}?all_namespaces=true").status == 401


def test_another_namespaces_experiments_are_refused_whether_or_not_they_exist(callers: dict[str, Caller]) -> None:
    alice = callers[ALICE.name]
    refused(alice.call(f"{LIST}?namespace={TEAM_B}"), ALICE.name,
            f'list resource "experiments" in API group "kubeflow.org" in the namespace "{TEAM_B}"')
    get = f'get resource "experiments" in API group "kubeflow.org" in the namespace "{TEAM_B}"'
    refused(alice.call(f"{LIST}/{TEAM_B}/tune-b"), ALICE.name, get)
    refused(alice.call(f"{LIST}/{TEAM_B}/no-such"), ALICE.name, get)  # existence hidden
    assert callers[BOB.name].call(f"{LIST}/{TEAM_B}/no-such").status == 404
    # a viewer reads her namespace's experiment with its trials
    detail = callers[CAROL.name].call(f"{LIST}/{TEAM_A}/tune-a")
    assert detail.status == 200 and len(detail.body["trials"]) == 1, detail.text
    assert detail.body["best"]["name"] == detail.body["trials"][0]["name"]

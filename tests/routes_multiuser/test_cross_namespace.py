"""millpond's routes, the UI's helpers, the model gateway and ``/metrics`` on a multi-user server, as a team
uses them: alice (kubeflow-edit in team-a), bob (kubeflow-edit in team-b), carol (kubeflow-view in team-a),
dana (cluster-admin). Another namespace's ids are refused (403, Kubernetes' words) with nothing changed;
lists show only the caller's namespaces; the viewer reads and cannot write; ``/metrics`` is the admins'."""

from __future__ import annotations

import urllib.parse

from tests.routes_multiuser.conftest import StoredRun, config, dataset
from tests.routes_multiuser.support import ALICE, API, BOB, CAROL, DANA, TEAM_A, TEAM_B, Caller

Callers = dict[str, Caller]


def names(items: list[dict]) -> list[tuple[str, str]]:
    return sorted((item["metadata"].get("namespace", ""), item["metadata"]["name"]) for item in items)


def refused(answer, who: str, what: str) -> None:
    assert answer.status == 403, answer.text
    assert f'User "{who}" cannot {what}' in answer.body["message"], answer.body


def test_lists_show_only_the_callers_namespaces(callers: Callers) -> None:
    both = [(TEAM_A, "data"), (TEAM_B, "data")]
    for who, expected in ((ALICE.name, [(TEAM_A, "data")]), (BOB.name, [(TEAM_B, "data")]),
                          (CAROL.name, [(TEAM_A, "data")]), (DANA.name, both), ("admin", both)):
        listed = callers[who].call(f"{API}/datasets?all_namespaces=true")
        assert listed.status == 200 and names(listed.body["items"]) == expected, (who, listed.text)
        models = callers[who].call("/ui-api/models").body["models"]
        assert sorted((m["namespace"], m["name"]) for m in models) == [(ns, "model") for ns, _ in expected]
        jobs = callers[who].call(f"{API}/jobs?all_namespaces=true").body
        assert sorted(j["namespace"] for j in jobs["jobs"]) == [ns for ns, _ in expected]
        assert jobs["total_size"] == len(expected)  # the page counts what the caller may see, nothing else
    # secrets: names only, of the namespaces where the caller may list Secrets (kubeflow-view may not)
    assert [s["name"] for s in callers[ALICE.name].call(f"{API}/secrets").body["secrets"]] == ["creds-a"]
    assert [s["name"] for s in callers[BOB.name].call(f"{API}/secrets").body["secrets"]] == ["creds-b"]
    assert callers[CAROL.name].call(f"{API}/secrets").body["secrets"] == []
    assert [s["name"] for s in callers[CAROL.name].call(f"{API}/configmaps").body["configmaps"]] == ["settings-a"]
    # the Queues page: the shared ClusterQueue, with only the caller's own LocalQueue in it
    queues = callers[ALICE.name].call("/ui-api/queues").body["queues"]
    assert [(q["name"], q["localQueues"]) for q in queues] == [("shared", [f"{TEAM_A}/queue"])]
    assert [q["localQueues"] for q in callers[DANA.name].call("/ui-api/queues").body["queues"]] == [
        [f"{TEAM_A}/queue", f"{TEAM_B}/queue"]]


def test_a_list_of_another_namespace_is_refused(callers: Callers) -> None:
    refused(callers[ALICE.name].call(f"{API}/datasets?namespace={TEAM_B}"), ALICE.name,
            f'list resource "datasets" in API group "data.fluid.io" in the namespace "{TEAM_B}"')
    refused(callers[BOB.name].call(f"{API}/jobs?namespace={TEAM_A}"), BOB.name, "list resource")
    refused(callers[ALICE.name].call(f"{API}/isvc?namespace={TEAM_B}"), ALICE.name,
            'list resource "inferenceservices" in API group "serving.kserve.io"')


def test_another_namespaces_objects_are_refused_whether_or_not_they_exist(callers: Callers) -> None:
    alice = callers[ALICE.name]
    get = f'get resource "datasets" in API group "data.fluid.io" in the namespace "{TEAM_B}"'
    refused(alice.call(f"{API}/datasets/data?namespace={TEAM_B}"), ALICE.name, get)
    refused(alice.call(f"{API}/datasets/no-such-one?namespace={TEAM_B}"), ALICE.name, get)  # existence hidden
    assert callers[BOB.name].call(f"{API}/datasets/no-such-one?namespace={TEAM_B}").status == 404
    refused(alice.call(f"{API}/configmaps/settings-b?namespace={TEAM_B}"), ALICE.name, 'get resource "configmaps"')
    refused(alice.call(f"{API}/secrets/creds-b?namespace={TEAM_B}"), ALICE.name, 'get resource "secrets"')
    for path in (f"/jobs/{TEAM_B}/train", f"/jobs/{TEAM_B}/train/events", f"/jobs/{TEAM_B}/no-such-job"):
        refused(alice.call(API + path), ALICE.name, 'get resource "pytorchjobs" in API group "kubeflow.org"')
    refused(alice.call(f"{API}/jobs/{TEAM_B}/train/logs"), ALICE.name, 'get resource "pytorchjobs"')
    assert "trained in team-b" in callers[BOB.name].call(f"{API}/jobs/{TEAM_B}/train/logs").text
    refused(alice.call(f"/ui-api/models/{TEAM_B}/model"), ALICE.name, 'get resource "inferenceservices"')


def test_the_gateway_answers_only_the_models_namespace(callers: Callers) -> None:
    body = {"inputs": [{"name": "input-0", "shape": [1, 1], "datatype": "FP64", "data": [1.0]}]}
    queries = (f"/serving/{TEAM_B}/model/v2/models/model/infer", f"/seldon/{TEAM_B}/model/api/v0.1/predictions")
    for path in queries:
        answer = callers[ALICE.name].call(path, "POST", body)
        assert answer.status == 403 and 'cannot get resource "inferenceservices" in API group "serving.kserve.io" ' \
            f'in the namespace "{TEAM_B}"' in str(answer.body), answer.text
        assert callers[BOB.name].call(path, "POST", body).status == 503  # allowed: stored, not served
    # no namespace in the path: the model of "default", where nobody but an administrator is bound
    refused_default = callers[BOB.name].call("/v1/models/model:predict", "POST", {"instances": [[1.0]]})
    assert refused_default.status == 403 and 'in the namespace "default"' in str(refused_default.body)
    assert callers[DANA.name].call("/v1/models/model:predict", "POST", {"instances": [[1.0]]}).status == 404
    assert callers[CAROL.name].call(f"/serving/{TEAM_A}/model/v2/models/model").status == 503  # a viewer may query
    assert callers["nobody"].call(f"/serving/{TEAM_A}/model/v2/models/model").status == 401


def test_writes_to_another_namespace_change_nothing(callers: Callers, tmp_path) -> None:
    alice, bob = callers[ALICE.name], callers[BOB.name]
    refused(alice.call(f"{API}/datasets/data?namespace={TEAM_B}", "DELETE"), ALICE.name,
            f'delete resource "datasets" in API group "data.fluid.io" in the namespace "{TEAM_B}"')
    refused(alice.call(f"{API}/jobs/{TEAM_B}/train", "DELETE"), ALICE.name, 'delete resource "pytorchjobs"')
    refused(alice.call(f"{API}/isvc/model?namespace={TEAM_B}", "DELETE"), ALICE.name, 'delete resource')
    assert bob.call(f"{API}/datasets/data?namespace={TEAM_B}").status == 200
    assert bob.call(f"{API}/jobs/{TEAM_B}/train").status == 200
    assert bob.call(f"{API}/isvc/model?namespace={TEAM_B}").status == 200
    # a batch with one document of another namespace: refused whole, its allowed document not stored either
    batch = alice.apply(config("ConfigMap", "mine", TEAM_A), dataset("theirs", TEAM_B, tmp_path))
    refused(batch, ALICE.name, f'create resource "datasets" in API group "data.fluid.io" in the namespace "{TEAM_B}"')
    assert callers["admin"].call(f"{API}/configmaps/mine?namespace={TEAM_A}").status == 404
    assert callers["admin"].call(f"{API}/datasets/theirs?namespace={TEAM_B}").status == 404
    # an update of bob's stored object is a patch, refused too; his object keeps its value
    changed = config("ConfigMap", "settings-b", TEAM_B) | {"data": {"key": "alice was here"}}
    refused(alice.apply(changed), ALICE.name,
            f'patch resource "configmaps" in API group "" in the namespace "{TEAM_B}"')
    kept = bob.call(f"{API}/configmaps/settings-b?namespace={TEAM_B}").body
    assert kept["data"] == {"key": "value"}
    # alice may write her own namespace, and give herself no more (RBAC objects are the namespace admin's)
    assert alice.apply(config("ConfigMap", "mine", TEAM_A)).status == 200
    assert alice.call(f"{API}/configmaps/mine?namespace={TEAM_A}", "DELETE").status == 200
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "let-me-in", "namespace": TEAM_B},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kubeflow-admin"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": ALICE.name}]}
    refused(alice.apply(binding), ALICE.name, 'create resource "rolebindings"')
    refused(alice.apply(binding | {"metadata": {"name": "let-me-in", "namespace": TEAM_A}}), ALICE.name,
            'create resource "rolebindings"')


def test_a_viewer_reads_and_cannot_write(callers: Callers, tmp_path) -> None:
    carol = callers[CAROL.name]
    assert carol.call(f"{API}/datasets/data?namespace={TEAM_A}").status == 200
    assert carol.call(f"{API}/jobs/{TEAM_A}/train").status == 200
    assert "trained in team-a" in carol.call(f"{API}/jobs/{TEAM_A}/train/logs").text
    refused(carol.apply(dataset("new", TEAM_A, tmp_path)), CAROL.name, 'create resource "datasets"')
    refused(carol.apply(config("ConfigMap", "settings-a", TEAM_A)), CAROL.name, 'patch resource "configmaps"')
    refused(carol.call(f"{API}/datasets/data?namespace={TEAM_A}", "DELETE"), CAROL.name, 'delete resource "datasets"')
    refused(carol.call(f"{API}/jobs/{TEAM_A}/train", "DELETE"), CAROL.name, 'delete resource "pytorchjobs"')
    refused(carol.call(f"{API}/secrets/creds-a?namespace={TEAM_A}"), CAROL.name, 'get resource "secrets"')
    assert callers[ALICE.name].call(f"{API}/datasets/data?namespace={TEAM_A}").status == 200
    assert callers[ALICE.name].call(f"{API}/jobs/{TEAM_A}/train").status == 200
    assert callers["admin"].call(f"{API}/datasets/new?namespace={TEAM_A}").status == 404


def test_a_runs_logs_and_artifacts_follow_its_namespace(callers: Callers, run: StoredRun) -> None:
    """KFP's ``get``/``readArtifact`` on runs in the run's namespace: team-a's run is read by alice and carol
    (kubeflow-view has readArtifact), not by bob. A run of no namespace (before runs had one) is asked about
    at the cluster scope, which only an administrator passes."""
    paths = (f"/ui-api/runs/{run.id}/graph", f"/ui-api/runs/{run.id}/tasks/{run.task}/log",
             f"/ui-api/runs/{run.id}/artifacts?uri={urllib.parse.quote(run.uri)}",
             f"/ui-api/runs/{run.id}/tasks/{run.task}/v1-outputs", f"/ui-api/run-metrics?run_id={run.id}")
    readers = {DANA.name, "admin"} | ({ALICE.name, CAROL.name} if run.namespace == TEAM_A else set())
    for path in paths:
        for who in (ALICE.name, BOB.name, CAROL.name, DANA.name, "admin"):
            answer = callers[who].call(path)
            if who in readers:
                assert answer.status == 200, (who, path, answer.text)
                continue
            assert answer.status == 403 and "pipelines.kubeflow.org" in answer.body["message"], (path, answer.text)
            assert "only the run's readers" not in answer.text and "artifact content" not in answer.text
    assert "only the run's readers" in callers[DANA.name].call(paths[1]).body["text"]
    assert "artifact content" in callers[DANA.name].call(paths[2]).text
    assert callers[ALICE.name].call("/ui-api/runs/no-such-run/graph").status == 404  # KFP tells a missing run


def test_metrics_and_nodes_are_the_administrators(callers: Callers) -> None:
    for who in (ALICE.name, BOB.name, CAROL.name):
        refused(callers[who].call("/metrics"), who, 'get path "/metrics"')
        refused(callers[who].call("/ui-api/nodes"), who, 'list resource "nodes" in API group "" at the cluster scope')
    for who in (DANA.name, "admin"):
        scraped = callers[who].call("/metrics")
        assert scraped.status == 200 and "millpond_runs" in scraped.text
        assert callers[who].call("/ui-api/nodes").status == 200
    assert callers["nobody"].call("/metrics").status == 401

"""Every route of the app (but the KFP v2beta1 API, KFAM's and the Kubernetes API, tested with their own) × its
methods × each member of the team, against what the RBAC rules say.

Each route is classified here, by hand, with what it touches (``ROUTES``): the attributes Kubernetes would
ask for the same objects (all of them needed), or ``PUBLIC`` (the login page and its files: no identity
needed), ``AUTHENTICATED`` (anyone logged in: API descriptions, the gateway's own health), ``FILTERED`` (a
list cut to the caller's namespaces: always answered). The expectation is the RBAC policy's decision
(``Policy.decide``) for those attributes; the answer is the server's: allowed unless 401 or 403. A route
of the app that is not in ``ROUTES``, or an entry of ``ROUTES`` the app no longer has, fails the test, so a
new route is classified when it is added. ``/apis/millpond/v1/{kind}`` is probed for every kind of the
registry (list, get, delete), whatever family registered it.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from millpond.access import kfp, model_registry
from millpond.access.attributes import Attributes
from millpond.access.authorizer import Authorizer
from millpond.access.identity import user
from millpond.kind_handler import KindName
from millpond.kinds import REGISTRY
from millpond.settings import load_settings
from millpond.store.lineage import CONTAINER_EXECUTION, ArtifactLink, ExecutionRecord, RunScope
from millpond.store.lineage_store import LineageStore
from tests.routes_multiuser.conftest import StoredRun as Objects
from tests.routes_multiuser.support import ALICE, API, BOB, CAROL, DANA, TEAM_A, Caller, MultiUserServer

PUBLIC, AUTHENTICATED, FILTERED = "public", "authenticated", "filtered"
ISVC = ("serving.kserve.io", "inferenceservices")
ROLES = (ALICE.name, BOB.name, CAROL.name, DANA.name, "nobody")


@dataclass(frozen=True)
class Probe:
    """One request and what it needs: attributes (every one allowed) or a class of route."""

    method: str
    path: str
    needs: tuple[Attributes, ...] | str
    body: Any = None


def _isvc(verb: str, namespace: str, name: str = "model") -> tuple[Attributes, ...]:
    return (Attributes(verb, namespace, *ISVC, name=name),)


def _run(verb: str, objects: Objects) -> tuple[Attributes, ...]:
    return (Attributes(verb, objects.namespace, kfp.GROUP, kfp.RUNS, name="secret-run"),)


def _kind(entry: KindName, verb: str, name: str = "") -> tuple[Attributes, ...]:
    return (Attributes(verb, "" if entry.cluster_scoped else TEAM_A, entry.group, entry.plural, name=name),)


def _job(verb: str, name: str = "train", *more: Attributes) -> tuple[Attributes, ...]:
    return (Attributes(verb, TEAM_A, "kubeflow.org", "pytorchjobs", name=name), *more)


def _every_kind(make: Callable[[KindName], Probe]) -> Callable[[Objects], list[Probe]]:
    return lambda _objects: [make(entry) for entry in REGISTRY]


def _spelt(entry: KindName) -> str:
    """The kind's full name (``jobs.batch``, ``secrets.v1``): never one of the routes before ``/{kind}``
    (``/jobs`` is the training jobs', ``/secrets`` the names of Secrets)."""
    return f"{entry.plural}.{entry.group}" if entry.group else f"{entry.plural}.{entry.versions[0]}"


def _one(method: str, path: str, needs: Callable[[Objects], tuple[Attributes, ...] | str] | str,
         body: Any = None) -> Callable[[Objects], list[Probe]]:
    def probes(objects: Objects) -> list[Probe]:
        return [Probe(method, path.format(o=objects, ns=TEAM_A), needs(objects) if callable(needs) else needs, body)]
    return probes


def _recorded_lineage(objects: Objects) -> tuple[str, str]:
    """(execution id, artifact id) of the stored run's task and its output, recorded in its lineage (again: the same
    rows) as the engine records a task's end."""
    output = ArtifactLink("out", objects.uri, "system.Artifact")
    LineageStore(load_settings().database_url).record(ExecutionRecord(
        objects.task, CONTAINER_EXECUTION, "train", "SUCCEEDED", objects.namespace,
        RunScope(objects.id, objects.namespace, "p"), outputs=(output,)))
    return objects.task, output.artifact_id


def _apply(objects: Objects) -> list[Probe]:
    """A new ConfigMap of team-a, and a new ClusterQueue (cluster-scoped): ``create`` on each."""
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe-{who}", "namespace": TEAM_A},
              "data": {"k": "v"}}
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "probe-{who}"},
             "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                 {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]}}
    return [Probe("POST", f"{API}/fluid/apply", (Attributes("create", TEAM_A, "", "configmaps", name="probe-{who}"),),
                  [config]),
            Probe("POST", f"{API}/fluid/apply",
                  (Attributes("create", "", "kueue.x-k8s.io", "clusterqueues", name="probe-{who}"),), [queue])]


INFER = {"inputs": [{"name": "input-0", "shape": [1, 1], "datatype": "FP64", "data": [1.0]}]}
SELDON = {"data": {"ndarray": [[1]]}}
EVENTS, LOGS = Attributes("list", TEAM_A, "", "events"), Attributes("get", TEAM_A, "", "pods", "log")
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")

ROUTES: dict[tuple[str, str], Callable[[Objects], list[Probe]]] = {
    # FastAPI's own descriptions of the API: anyone logged in (Kubernetes' /openapi is system:discovery's)
    **{("GET", path): _one("GET", path, AUTHENTICATED) for path in ("/openapi.json", "/docs", "/redoc")},
    ("GET", "/docs/oauth2-redirect"): _one("GET", "/docs/oauth2-redirect", AUTHENTICATED),
    # the UI's page and files, and the login routes: no identity needed
    ("GET", "/"): _one("GET", "/", PUBLIC),
    ("GET", "/ui/{name:path}"): _one("GET", "/ui/app.js", PUBLIC),
    ("GET", "/favicon.ico"): _one("GET", "/favicon.ico", PUBLIC),
    ("POST", "/ui-api/login"): _one("POST", "/ui-api/login", PUBLIC, {"username": "x", "password": "y"}),
    ("POST", "/ui-api/logout"): _one("POST", "/ui-api/logout", PUBLIC, {}),
    ("GET", "/ui-api/whoami"): _one("GET", "/ui-api/whoami", PUBLIC),
    # the model gateway: get inferenceservices in the model's namespace (default when the path names none)
    ("GET", "/v1/models/{name}"): _one("GET", "/v1/models/model", lambda o: _isvc("get", "default")),
    ("POST", "/v1/models/{name}:predict"): _one("POST", "/v1/models/model:predict",
                                                lambda o: _isvc("get", "default"), {"instances": [[1.0]]}),
    **{("GET", path): _one("GET", path, AUTHENTICATED) for path in ("/v2", "/v2/health/live", "/v2/health/ready")},
    **{("GET", f"/v2/models/{{name}}{tail}"): _one("GET", f"/v2/models/model{tail.replace('{version}', '1')}",
                                                    lambda o: _isvc("get", "default"))
       for tail in ("", "/versions/{version}", "/ready", "/versions/{version}/ready")},
    **{("POST", f"/v2/models/{{name}}{tail}"): _one("POST", f"/v2/models/model{tail.replace('{version}', '1')}",
                                                     lambda o: _isvc("get", "default"), INFER)
       for tail in ("/infer", "/versions/{version}/infer")},
    ("POST", "/seldon/{name}/api/v0.1/predictions"): _one(
        "POST", "/seldon/model/api/v0.1/predictions", lambda o: _isvc("get", "default"), SELDON),
    ("POST", "/seldon/{namespace}/{name}/api/v0.1/predictions"): _one(
        "POST", "/seldon/{ns}/model/api/v0.1/predictions", lambda o: _isvc("get", TEAM_A), SELDON),
    # Seldon's v1.0 path: a SeldonDeployment of that name first (get on seldondeployments), else the InferenceService
    ("POST", "/seldon/{namespace}/{name}/api/v1.0/predictions"): _one(
        "POST", "/seldon/{ns}/model/api/v1.0/predictions", lambda o: _isvc("get", TEAM_A), SELDON),
    **{(method, "/serving/{namespace}/{name}/{path:path}"): _one(
        method, "/serving/{ns}/model/v2/models/model/infer", lambda o: _isvc("get", TEAM_A),
        INFER if method in ("POST", "PUT", "PATCH") else None) for method in METHODS},
    # a Kubeflow Notebook's server, through the proxy: get on notebooks of kubeflow.org in its namespace
    **{(method, "/notebook/{namespace}/{name}/{rest:path}"): _one(
        method, "/notebook/{ns}/lab/api/status", (Attributes("get", TEAM_A, "kubeflow.org", "notebooks", name="lab"),),
        {} if method in ("POST", "PUT", "PATCH") else None)
       for method in ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")},
    # the Notebooks page (the Jupyter web app's API): notebooks of kubeflow.org, PVCs, in the path's namespace
    ("GET", "/ui-api/notebooks/config"): _one("GET", "/ui-api/notebooks/config", AUTHENTICATED),
    ("GET", "/ui-api/namespaces/{namespace}/notebooks"): _one(
        "GET", "/ui-api/namespaces/{ns}/notebooks", (Attributes("list", TEAM_A, "kubeflow.org", "notebooks"),)),
    ("POST", "/ui-api/namespaces/{namespace}/notebooks"): _one(  # no image: 400 once allowed, nothing made
        "POST", "/ui-api/namespaces/{ns}/notebooks",
        (Attributes("create", TEAM_A, "kubeflow.org", "notebooks", name="probe-{who}"),), {"name": "probe-{who}"}),
    **{(method, "/ui-api/namespaces/{namespace}/notebooks/{name}"): _one(
        method, "/ui-api/namespaces/{ns}/notebooks/no-such",
        (Attributes(verb, TEAM_A, "kubeflow.org", "notebooks", name="no-such"),), body)
       for method, verb, body in (("PATCH", "patch", {"stopped": True}), ("DELETE", "delete", None))},
    ("GET", "/ui-api/namespaces/{namespace}/pvcs"): _one(
        "GET", "/ui-api/namespaces/{ns}/pvcs", (Attributes("list", TEAM_A, "", "persistentvolumeclaims"),)),
    # its prefix without the trailing slash: redirected to it, for the same callers
    **{(method, "/notebook/{namespace}/{name}"): _one(
        method, "/notebook/{ns}/lab", (Attributes("get", TEAM_A, "kubeflow.org", "notebooks", name="lab"),))
       for method in ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")},
    # the Katib pages: Katib's experiments and trials of kubeflow.org in the path's namespace
    ("GET", "/ui-api/katib/experiments"): lambda o: [
        Probe("GET", f"/ui-api/katib/experiments?namespace={TEAM_A}",
              (Attributes("list", TEAM_A, "kubeflow.org", "experiments"),)),
        Probe("GET", "/ui-api/katib/experiments?all_namespaces=true", FILTERED)],
    ("GET", "/ui-api/katib/experiments/{namespace}/{name}"): _one(
        "GET", "/ui-api/katib/experiments/{ns}/no-such",
        (Attributes("get", TEAM_A, "kubeflow.org", "experiments", name="no-such"),
         Attributes("list", TEAM_A, "kubeflow.org", "trials"))),
    ("GET", "/ui-api/models"): _one("GET", "/ui-api/models", FILTERED),
    ("GET", "/ui-api/models/{namespace}/{name}"): _one("GET", "/ui-api/models/{ns}/model",
                                                       lambda o: _isvc("get", TEAM_A)),
    # the UI's helpers over runs: KFP's verbs on runs in the run's namespace (team-a; none before runs had one)
    ("GET", "/ui-api/queues"): _one("GET", "/ui-api/queues", FILTERED),
    ("GET", "/ui-api/runs/{run_id}/graph"): _one("GET", "/ui-api/runs/{o.id}/graph", lambda o: _run("get", o)),
    ("GET", "/ui-api/runs/{run_id}/tasks/{task_id}/log"): _one(
        "GET", "/ui-api/runs/{o.id}/tasks/{o.task}/log", lambda o: _run(kfp.READ_ARTIFACT, o)),
    ("GET", "/ui-api/runs/{run_id}/artifacts"): lambda o: [Probe(
        "GET", f"/ui-api/runs/{o.id}/artifacts?uri={urllib.parse.quote(o.uri)}", _run(kfp.READ_ARTIFACT, o))],
    ("GET", "/ui-api/runs/{run_id}/tasks/{task_id}/v1-outputs"): _one(
        "GET", "/ui-api/runs/{o.id}/tasks/{o.task}/v1-outputs", lambda o: _run(kfp.READ_ARTIFACT, o)),
    ("GET", "/ui-api/run-metrics"): _one("GET", "/ui-api/run-metrics?run_id={o.id}",
                                         lambda o: _run(kfp.READ_ARTIFACT, o)),
    # lineage's reads for the UI: as the artifact API, get/list on runs (and get on artifacts) in the namespace
    ("GET", "/ui-api/lineage/executions"): _one(
        "GET", "/ui-api/lineage/executions?namespace={ns}", (Attributes("list", TEAM_A, kfp.GROUP, kfp.RUNS),)),
    ("GET", "/ui-api/lineage/executions/{execution_id}"): lambda o: [Probe(
        "GET", f"/ui-api/lineage/executions/{_recorded_lineage(o)[0]}",
        (Attributes("get", o.namespace, kfp.GROUP, kfp.RUNS),))],
    ("GET", "/ui-api/lineage/artifacts/{artifact_id}"): lambda o: [Probe(
        "GET", f"/ui-api/lineage/artifacts/{_recorded_lineage(o)[1]}",
        (Attributes("get", o.namespace, kfp.GROUP, kfp.RUNS),
         Attributes("get", o.namespace, kfp.GROUP, kfp.ARTIFACTS, name="out")))],
    # a shared pipeline's version (none stored: 404 for whoever is logged in)
    ("GET", "/ui-api/pipelines/{pipeline_id}/versions/{version_id}/graph"): _one(
        "GET", "/ui-api/pipelines/no-such/versions/no-such/graph", AUTHENTICATED),
    ("GET", "/metrics"): _one("GET", "/metrics", (Attributes("get", path="/metrics"),)),
    ("GET", "/ui-api/nodes"): _one("GET", "/ui-api/nodes", (Attributes("list", resource="nodes"),)),
    # training jobs: their Kubeflow kind in their namespace; logs are pods/log, events are events
    ("GET", f"{API}/jobs"): lambda o: [
        Probe("GET", f"{API}/jobs?namespace={TEAM_A}", (Attributes("list", TEAM_A, "kubeflow.org", "pytorchjobs"),)),
        Probe("GET", f"{API}/jobs?all_namespaces=true", FILTERED)],
    ("GET", f"{API}/jobs/{{namespace}}/{{name}}"): _one("GET", f"{API}/jobs/{{ns}}/train", lambda o: _job("get")),
    ("GET", f"{API}/jobs/{{namespace}}/{{name}}/events"): _one(
        "GET", f"{API}/jobs/{{ns}}/train/events", lambda o: _job("get", "train", EVENTS)),
    ("GET", f"{API}/jobs/{{namespace}}/{{name}}/logs"): _one(
        "GET", f"{API}/jobs/{{ns}}/train/logs", lambda o: _job("get", "train", LOGS)),
    ("DELETE", f"{API}/jobs/{{namespace}}/{{name}}"): _one("DELETE", f"{API}/jobs/{{ns}}/no-such",
                                                          lambda o: _job("delete", "no-such")),
    # every kind of the registry, by its group and plural (datasets: its own routes first)
    ("GET", f"{API}/datasets"): lambda o: [
        Probe("GET", f"{API}/datasets?namespace={TEAM_A}", _kind(REGISTRY["Dataset"], "list")),
        Probe("GET", f"{API}/datasets?all_namespaces=true", FILTERED)],
    ("GET", f"{API}/datasets/{{name}}"): _one("GET", f"{API}/datasets/data?namespace={TEAM_A}",
                                              lambda o: _kind(REGISTRY["Dataset"], "get", "data")),
    ("GET", f"{API}/secrets"): _one("GET", f"{API}/secrets", FILTERED),
    ("GET", f"{API}/configmaps"): _one("GET", f"{API}/configmaps", FILTERED),
    ("POST", f"{API}/fluid/apply"): _apply,
    ("GET", f"{API}/{{kind}}"): _every_kind(lambda entry: Probe(
        "GET", f"{API}/{_spelt(entry)}?namespace={TEAM_A}", _kind(entry, "list"))),
    ("GET", f"{API}/{{kind}}/{{name}}"): _every_kind(lambda entry: Probe(
        "GET", f"{API}/{_spelt(entry)}/no-such?namespace={TEAM_A}", _kind(entry, "get", "no-such"))),
    ("DELETE", f"{API}/{{kind}}/{{name}}"): _every_kind(lambda entry: Probe(
        "DELETE", f"{API}/{_spelt(entry)}/no-such?namespace={TEAM_A}", _kind(entry, "delete", "no-such"))),
}


# Kubeflow Model Registry's REST API under both prefixes: registeredmodels of modelregistry.kubeflow.org in the
# registry's namespace (?namespace=), the verb the method means; ids that are not there answer 404 once allowed.
_REGISTRY = (("GET", "/registered_models", "list"), ("POST", "/registered_models", "create"),
             ("GET", "/registered_models/{registeredmodelId}", "get"),
             ("PATCH", "/registered_models/{registeredmodelId}", "patch"),
             ("GET", "/registered_models/{registeredmodelId}/versions", "list"),
             ("POST", "/registered_models/{registeredmodelId}/versions", "create"),
             ("GET", "/registered_model", "get"), ("GET", "/model_versions", "list"),
             ("POST", "/model_versions", "create"), ("GET", "/model_versions/{modelversionId}", "get"),
             ("PATCH", "/model_versions/{modelversionId}", "patch"),
             ("GET", "/model_versions/{modelversionId}/artifacts", "list"),
             ("POST", "/model_versions/{modelversionId}/artifacts", "create"),
             ("GET", "/model_version", "get"), ("GET", "/model_artifacts", "list"),
             ("POST", "/model_artifacts", "create"), ("GET", "/model_artifacts/{modelartifactId}", "get"),
             ("PATCH", "/model_artifacts/{modelartifactId}", "patch"), ("GET", "/model_artifact", "get"),
             ("GET", "/artifacts", "list"), ("POST", "/artifacts", "create"), ("GET", "/artifacts/{id}", "get"),
             ("PATCH", "/artifacts/{id}", "patch"), ("GET", "/artifact", "get"))


_SEARCHES = ("/registered_model", "/model_version", "/model_artifact", "/artifact")


def _registry_probe(prefix: str, method: str, path: str, verb: str) -> Callable[[Objects], list[Probe]]:
    concrete = path
    for name in ("{registeredmodelId}", "{modelversionId}", "{modelartifactId}", "{id}"):
        concrete = concrete.replace(name, "999")
    query = "?name=x&parentResourceId=999&namespace=" if path in _SEARCHES else "?namespace="
    needs = (Attributes(verb, TEAM_A, model_registry.GROUP, model_registry.RESOURCE),)
    body = {} if method in ("POST", "PATCH") else None
    return lambda _objects: [Probe(method, f"{prefix}{concrete}{query}{TEAM_A}", needs, body)]


ROUTES.update({(method, f"{prefix}{path}"): _registry_probe(prefix, method, path, verb)
               for prefix in ("/api/model_registry/v1alpha3", "/api/model_registry/v1")
               for method, path, verb in _REGISTRY})


# Routes whose decisions are tested elsewhere, with rules of their own (the Kubernetes API is a middleware in
# front of the routes: it has none here).
ELSEWHERE = {
    "/apis/v2beta1": "the KFP API: KFP's SubjectAccessReview attributes, tests/kfp_multiuser",
    "/kfam/": "Kubeflow's contributors API (KFAM): the profile's owner decides, the Profiles part's tests",
}


def app_routes(server: MultiUserServer) -> set[tuple[str, str]]:
    """(method, path template) of every route of the app, but those of ``ELSEWHERE``."""
    def walk(routes: list[Any]) -> Iterator[Any]:
        for route in routes:
            nested = getattr(route, "effective_route_contexts", None)
            yield from (nested() if nested is not None else [route])

    def methods(route: Any) -> set[str]:
        """Its methods (the HEAD Starlette adds beside a GET is that GET; the gateway's HEAD is its own)."""
        found = set(getattr(route, "methods", None) or ())
        return found if route.path.startswith("/serving/") or "GET" not in found else found - {"HEAD"}

    return {(method, route.path) for route in walk(server.app.routes)
            if not route.path.startswith(tuple(ELSEWHERE)) for method in methods(route)}


def expected(policy: Authorizer, who: str, needs: tuple[Attributes, ...] | str) -> bool:
    """Whether the RBAC rules let ``who`` through (``nobody``: only to public routes)."""
    if needs == PUBLIC:
        return True
    if who == "nobody":
        return False
    if needs in (AUTHENTICATED, FILTERED):
        return True
    assert isinstance(needs, tuple)
    identity = user(who, "token")
    return all(policy.decide(identity, asked).allowed for asked in needs)


def test_every_route_is_classified(server: MultiUserServer) -> None:
    routes = app_routes(server)
    assert not routes - set(ROUTES), f"routes nobody classified (add them to ROUTES): {sorted(routes - set(ROUTES))}"
    assert not set(ROUTES) - routes, f"classified routes the app no longer has: {sorted(set(ROUTES) - routes)}"


def test_every_route_answers_as_the_rbac_rules_say(callers: dict[str, Caller], run: Objects) -> None:
    objects = run
    policy = Authorizer(load_settings(), multi_user=True)
    wrong: list[str] = []
    asked = 0
    for (_method, _template), make in sorted(ROUTES.items()):
        for probe in make(objects):
            for who in ROLES:
                safe = who.split("@")[0]
                path = probe.path.replace("{who}", safe)
                body = _with_who(probe.body, safe)
                needs = probe.needs if isinstance(probe.needs, str) else tuple(
                    Attributes(a.verb, a.namespace, a.api_group, a.resource, a.subresource,
                               a.name.replace("{who}", safe), a.path) for a in probe.needs)
                answer = callers[who].call(path, probe.method, body)
                asked += 1
                allowed = answer.status not in (401, 403)
                if probe.needs == PUBLIC:
                    allowed = answer.status != 403
                # 503 is the gateway's "stored, not served": the query passed the check
                if answer.status in (500, 502) or allowed != expected(policy, who, needs):
                    wrong.append(f"{probe.method} {path} as {who}: {answer.status} {answer.text[:160]}")
    assert asked > 5 * len(ROUTES)
    assert not wrong, "\n".join(wrong)


def _with_who(body: Any, who: str) -> Any:
    if isinstance(body, str):
        return body.replace("{who}", who)
    if isinstance(body, list):
        return [_with_who(item, who) for item in body]
    if isinstance(body, dict):
        return {key: _with_who(value, who) for key, value in body.items()}
    return body

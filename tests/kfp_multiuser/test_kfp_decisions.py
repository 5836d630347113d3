"""A property test: every KFP route × verb × member, against the RBAC rules Kubeflow's roles grant.

The expected decision is written here from KFP's own manifests (``manifests/kustomize/base/installs/
multi-user/view-edit-cluster-roles.yaml``: what ``kubeflow-view`` and ``kubeflow-edit`` aggregate from
``kubeflow-pipelines-view``/``-edit``), not from millpond's code: a member may act on an object when bound in
the object's namespace to a role granting the verb on the resource; the administrators (the server token,
a ``--admin`` user) always may. The server must answer 403 exactly when that says no.
"""


import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

kfp = pytest.importorskip("kfp")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.kfp_multiuser.adder import adder  # noqa: E402
from tests.kfp_multiuser.team import API, Team  # noqa: E402

NAMESPACES = ("team-a", "team-b")
VIEW = {"experiments": {"get", "list"}, "runs": {"get", "list", "readArtifact"}, "jobs": {"get", "list"},
        "pipelines": {"get", "list"}}
EDIT_WRITES = {"experiments": {"archive", "create", "delete", "unarchive"},
               "runs": {"archive", "create", "delete", "retry", "terminate", "unarchive", "reportMetrics",
                        "readArtifact"},
               "jobs": {"create", "delete", "disable", "enable"}, "pipelines": {"create", "delete", "update"}}
ROLES = {"edit": {resource: VIEW[resource] | EDIT_WRITES[resource] for resource in VIEW}, "view": VIEW}
BINDINGS = {"alice": {"team-a": "edit"}, "bob": {"team-b": "edit"}, "carol": {"team-a": "view"}}
ADMINS = ("server", "root")


def expected(who: str, namespace: str, resource: str, verb: str) -> bool:
    if who in ADMINS:
        return True
    role = BINDINGS[who].get(namespace)
    return role is not None and verb in ROLES[role][resource]


@dataclass
class Place:
    """One namespace's objects, made by the administrator."""

    experiment: str
    run: str
    job: str
    pipeline: str


@dataclass
class World:
    team: Team
    spec: dict[str, Any]
    places: dict[str, Place]

    def ok(self, status: int, body: dict[str, Any]) -> dict[str, Any]:
        assert status == 200, body
        return body

    def experiment(self, namespace: str) -> str:
        body = {"display_name": f"x-{uuid.uuid4().hex[:8]}", "namespace": namespace}
        return self.ok(*self.team.call("server", "POST", f"{API}/experiments", body))["experiment_id"]

    def run(self, experiment: str) -> str:
        body = {"display_name": "r", "experiment_id": experiment, "pipeline_spec": self.spec}
        run_id = self.ok(*self.team.call("server", "POST", f"{API}/runs", body))["run_id"]
        deadline = time.monotonic() + 120
        while self.ok(*self.team.call("server", "GET", f"{API}/runs/{run_id}"))["state"] not in (
                "SUCCEEDED", "FAILED", "CANCELED"):
            assert time.monotonic() < deadline, "the run did not finish"
            time.sleep(0.2)
        return run_id

    def job(self, experiment: str) -> str:
        body = {"display_name": "nightly", "experiment_id": experiment, "pipeline_spec": self.spec, "mode": "DISABLE",
                "trigger": {"cron_schedule": {"cron": "0 0 3 * * *"}}}
        return self.ok(*self.team.call("server", "POST", f"{API}/recurringruns", body))["recurring_run_id"]

    def pipeline(self, namespace: str) -> str:
        body = {"display_name": f"p-{uuid.uuid4().hex[:8]}", "namespace": namespace}
        return self.ok(*self.team.call("server", "POST", f"{API}/pipelines", body))["pipeline_id"]


@pytest.fixture(scope="module")
def world(team: Team) -> World:
    package = team.home.parent / "decisions-adder.yaml"
    kfp.compiler.Compiler().compile(adder, str(package))
    made = World(team, yaml.safe_load(package.read_text()), {})
    for namespace in NAMESPACES:
        experiment = made.experiment(namespace)
        made.places[namespace] = Place(experiment, made.run(experiment), made.job(experiment),
                                       made.pipeline(namespace))
    return made


Act = Callable[[World, str, str], int]  # (world, who, namespace) -> the HTTP status


def _call(method: str, path: Callable[[Place, str], str], body: Callable[[World, Place, str], Any] = lambda *_: None
          ) -> Act:
    def act(world: World, who: str, namespace: str) -> int:
        place = world.places[namespace]
        where = path(place, namespace)
        where = where if where.startswith("/ui-api/") else API + where  # the UI's helpers are beside the API
        return world.team.call(who, method, where, body(world, place, namespace))[0]
    return act


def _throwaway(make: Callable[[World, str], str], method: str, path: str) -> Act:
    """An action on an object made for it alone (a delete must not take the shared ones)."""
    def act(world: World, who: str, namespace: str) -> int:
        return world.team.call(who, method, API + path.format(make(world, namespace)))[0]
    return act


ACTIONS: dict[tuple[str, str], Act] = {
    ("experiments", "get"): _call("GET", lambda p, _: f"/experiments/{p.experiment}"),
    ("experiments", "list"): _call("GET", lambda _, ns: f"/experiments?namespace={ns}"),
    ("experiments", "create"): _call("POST", lambda *_: "/experiments",
                                     lambda _w, _p, ns: {"display_name": f"c-{uuid.uuid4().hex[:8]}", "namespace": ns}),
    ("experiments", "archive"): _throwaway(lambda w, ns: w.experiment(ns), "POST", "/experiments/{}:archive"),
    ("experiments", "unarchive"): _call("POST", lambda p, _: f"/experiments/{p.experiment}:unarchive"),
    ("experiments", "delete"): _throwaway(lambda w, ns: w.experiment(ns), "DELETE", "/experiments/{}"),
    ("runs", "get"): _call("GET", lambda p, _: f"/runs/{p.run}"),
    ("runs", "list"): _call("GET", lambda _, ns: f"/runs?namespace={ns}"),
    ("runs", "create"): _call("POST", lambda *_: "/runs",
                              lambda w, p, _: {"display_name": "r", "experiment_id": p.experiment,
                                               "pipeline_spec": {"not": "a pipeline"}}),  # authorized, then a 400
    ("runs", "terminate"): _call("POST", lambda p, _: f"/runs/{p.run}:terminate"),  # a finished run: nothing to do
    ("runs", "retry"): _call("POST", lambda p, _: f"/runs/{p.run}:retry"),  # a SUCCEEDED run: 412 when allowed
    ("runs", "archive"): _call("POST", lambda p, _: f"/runs/{p.run}:archive"),
    ("runs", "unarchive"): _call("POST", lambda p, _: f"/runs/{p.run}:unarchive"),
    ("runs", "readArtifact"): _call("GET", lambda p, _: f"/ui-api/run-metrics?run_id={p.run}"),
    ("jobs", "get"): _call("GET", lambda p, _: f"/recurringruns/{p.job}"),
    ("jobs", "list"): _call("GET", lambda _, ns: f"/recurringruns?namespace={ns}"),
    ("jobs", "disable"): _call("POST", lambda p, _: f"/recurringruns/{p.job}:disable"),
    ("jobs", "create"): _call("POST", lambda *_: "/recurringruns",
                              lambda w, p, _: {"display_name": "j", "experiment_id": p.experiment,
                                               "pipeline_spec": w.spec, "mode": "DISABLE",
                                               "trigger": {"periodic_schedule": {"interval_second": 86400}}}),
    ("jobs", "delete"): _throwaway(lambda w, ns: w.job(w.places[ns].experiment), "DELETE", "/recurringruns/{}"),
    ("pipelines", "get"): _call("GET", lambda p, _: f"/pipelines/{p.pipeline}"),
    ("pipelines", "list"): _call("GET", lambda _, ns: f"/pipelines?namespace={ns}"),
    ("pipelines", "create"): _call("POST", lambda *_: "/pipelines",
                                   lambda _w, _p, ns: {"display_name": f"c-{uuid.uuid4().hex[:8]}", "namespace": ns}),
    ("pipelines", "delete"): _throwaway(lambda w, ns: w.pipeline(ns), "DELETE", "/pipelines/{}"),
}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(who=st.sampled_from(("alice", "bob", "carol", *ADMINS)), namespace=st.sampled_from(NAMESPACES),
       action=st.sampled_from(sorted(ACTIONS)))
def test_every_decision_is_the_rbac_rules(world: World, who: str, namespace: str, action: tuple[str, str]) -> None:
    resource, verb = action
    status = ACTIONS[action](world, who, namespace)
    allowed = expected(who, namespace, resource, verb)
    assert (status != 403) == allowed, f"{who} {verb} {resource} in {namespace}: {status}"
    assert status < 500, f"{who} {verb} {resource} in {namespace}: {status}"

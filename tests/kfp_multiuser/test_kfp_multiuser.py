"""The KFP API in multi-user mode, driven by the real ``kfp.Client`` with each member's token.

Each member creates, lists and gets only in its namespaces; an id from another namespace is refused 403 with
KFP's words and nothing changes; a viewer reads and cannot write; the administrators see everything.
"""


import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

kfp = pytest.importorskip("kfp")
from kfp_server_api.exceptions import ApiException  # noqa: E402

from tests.kfp_multiuser.adder import adder  # noqa: E402
from tests.kfp_multiuser.team import API, Team  # noqa: E402


def client(team: Team, who: str, namespace: str = "kubeflow") -> Any:
    """``kfp.Client(host=..., existing_token=TOKEN, namespace=...)`` as ``who``."""
    return kfp.Client(host=team.url, existing_token=team.tokens[who], namespace=namespace)


@pytest.fixture(scope="module")
def alice_run(team: Team) -> Any:
    """A finished run of alice's, in her experiment ``exp`` of team-a."""
    alice = client(team, "alice", "team-a")
    result = alice.create_run_from_pipeline_func(adder, experiment_name="exp", arguments={"x": 2, "y": 3})
    run = alice.wait_for_run_completion(result.run_id, timeout=120, sleep_duration=0.2)
    assert run.state == "SUCCEEDED", run.error
    return run


def refused(call: Any, *args: Any, **kwargs: Any) -> str:
    """The message of the 403 ``call`` answers."""
    with pytest.raises(ApiException) as raised:
        call(*args, **kwargs)
    assert raised.value.status == 403, raised.value.body
    return json.loads(raised.value.body)["message"]


def test_healthz_says_multi_user(team: Team) -> None:
    assert client(team, "alice").get_kfp_healthz().multi_user is True


def test_experiments_are_per_namespace(team: Team, alice_run: Any) -> None:
    alice, bob = client(team, "alice", "team-a"), client(team, "bob", "team-b")
    bobs = bob.create_experiment("exp")  # the same name in another namespace is another experiment
    alices = alice.get_experiment(experiment_name="exp")
    assert alices.namespace == "team-a" and bobs.namespace == "team-b"
    assert alices.experiment_id != bobs.experiment_id
    listed = alice.list_experiments(page_size=100).experiments
    assert "exp" in [e.display_name for e in listed] and {e.namespace for e in listed} == {"team-a"}
    listed = bob.list_experiments(page_size=100).experiments
    assert bobs.experiment_id in {e.experiment_id for e in listed} and {e.namespace for e in listed} == {"team-b"}
    assert "namespace team-a" in refused(bob.list_experiments, namespace="team-a")
    message = refused(bob.get_experiment, experiment_id=alices.experiment_id)
    assert message.startswith(f"Failed to access experiment {alices.experiment_id}. "
                              "Check if you have access to namespace team-a")
    assert 'User "bob@example.com" cannot get resource "experiments"' in message
    for call in (bob.archive_experiment, bob.delete_experiment):
        refused(call, alices.experiment_id)
    assert alice.get_experiment(experiment_id=alices.experiment_id).storage_state == "AVAILABLE"


def test_a_list_needs_a_namespace_in_multi_user_mode(team: Team) -> None:
    status, body = team.call("alice", "GET", f"{API}/experiments")
    assert status == 400 and body["message"] == "An experiment cannot have an empty namespace in multi-user mode"
    status, body = team.call("alice", "GET", f"{API}/runs")
    assert status == 400 and body["message"] == "A run cannot have an empty namespace in multi-user mode"
    status, body = team.call("alice", "POST", f"{API}/experiments", {"display_name": "nowhere"})
    assert status == 400 and "empty namespace" in body["message"]
    status, body = team.call("alice", "POST", f"{API}/runs", {"display_name": "r", "pipeline_spec": {}})
    assert status == 400 and "Experiment id can not be empty in multi-user mode" in body["message"]


def test_runs_of_another_namespace_are_refused(team: Team, alice_run: Any) -> None:
    alice, bob = client(team, "alice", "team-a"), client(team, "bob", "team-b")
    run_id = alice_run.run_id
    assert run_id in {r.run_id for r in alice.list_runs(page_size=100).runs}
    assert run_id not in {r.run_id for r in bob.list_runs(page_size=100).runs or []}  # bob's namespace's only
    status, _body = team.call("bob", "GET", f"{API}/runs?experiment_id={alice_run.experiment_id}")
    assert status == 403  # filtering by alice's experiment lists in her namespace: refused
    message = refused(bob.get_run, run_id)
    assert message.startswith(f"Failed to access run {run_id}. Check if you have access to namespace team-a")
    for call in (bob.terminate_run, bob.archive_run, bob.delete_run, bob.unarchive_run):
        refused(call, run_id)
    status, _body = team.call("bob", "POST", f"{API}/runs/{run_id}:retry")
    assert status == 403
    kept = alice.get_run(run_id)
    assert kept.state == "SUCCEEDED" and kept.storage_state == "AVAILABLE"
    task = alice_run.run_details.task_details[0].task_id
    for path in (f"/ui-api/runs/{run_id}/graph", f"/ui-api/run-metrics?run_id={run_id}",
                 f"/ui-api/runs/{run_id}/tasks/{task}/log", f"/ui-api/runs/{run_id}/tasks/{task}/v1-outputs",
                 f"/ui-api/runs/{run_id}/artifacts?uri=/etc/hostname"):  # the UI's helpers: logs, artifacts
        status, _body = team.call("bob", "GET", path)
        assert status == 403, path
        assert team.call("alice", "GET", path)[0] != 403, path


def test_a_run_and_its_tasks_are_in_its_namespace(team: Team, alice_run: Any) -> None:
    from millpond.pipelines.queueing import run_namespace
    from millpond.settings import load_settings
    from millpond.store.runs import RunStore

    store = RunStore(load_settings().database_url)
    run = store.get_run(alice_run.run_id)
    assert run.namespace == "team-a" and run_namespace(run, store) == "team-a"
    status, pods = team.call("server", "GET", "/api/v1/namespaces/team-a/pods")  # through the Kubernetes API
    assert status == 200, pods
    assert any(pod["metadata"]["labels"].get("pipeline/runid") == run.id for pod in pods["items"])
    status, pods = team.call("server", "GET", "/api/v1/namespaces/exp/pods")  # not the experiment's name
    assert status == 200 and not [p for p in pods["items"] if p["metadata"]["labels"].get("pipeline/runid") == run.id]


def test_a_viewer_reads_and_cannot_write(team: Team, alice_run: Any) -> None:
    carol = client(team, "carol", "team-a")
    assert alice_run.run_id in {r.run_id for r in carol.list_runs(page_size=100).runs}
    assert carol.get_run(alice_run.run_id).state == "SUCCEEDED"
    assert "exp" in [e.display_name for e in carol.list_experiments(page_size=100).experiments]
    assert "Check if you have write permissions to namespace team-a" in refused(carol.create_experiment, "mine")
    for call in (carol.terminate_run, carol.archive_run, carol.delete_run):
        refused(call, alice_run.run_id)
    body = {"display_name": "r", "experiment_id": alice_run.experiment_id, "pipeline_spec": {}}
    status, _body = team.call("carol", "POST", f"{API}/runs", body)
    assert status == 403
    refused(client(team, "carol", "team-b").list_runs)
    assert client(team, "alice", "team-a").get_run(alice_run.run_id).storage_state == "AVAILABLE"


@pytest.mark.parametrize("who", ["server", "root"])
def test_administrators_see_every_namespace(team: Team, alice_run: Any, who: str) -> None:
    admin = client(team, who)
    assert alice_run.run_id in {r.run_id for r in admin.list_runs(namespace="team-a").runs}
    assert {e.namespace for e in admin.list_experiments(namespace="team-b").experiments} <= {"team-b"}
    assert admin.get_run(alice_run.run_id).run_id == alice_run.run_id


def test_recurring_runs_belong_to_their_experiments_namespace(team: Team, alice_run: Any) -> None:
    alice, bob = client(team, "alice", "team-a"), client(team, "bob", "team-b")
    experiment = alice.get_experiment(experiment_name="exp")
    package = team.home.parent / "adder.yaml"
    kfp.compiler.Compiler().compile(adder, str(package))
    job = alice.create_recurring_run(experiment_id=experiment.experiment_id, job_name="nightly",
                                     cron_expression="0 0 3 * * *", pipeline_package_path=str(package),
                                     enabled=False)
    assert job.namespace == "team-a"
    # kfp.Client sends no namespace of its own here: a list names one, or an experiment (KFP answers 400 else)
    for listed in (alice.list_recurring_runs(namespace="team-a"),
                   alice.list_recurring_runs(experiment_id=experiment.experiment_id)):
        assert job.recurring_run_id in [j.recurring_run_id for j in listed.recurring_runs]
        assert {j.namespace for j in listed.recurring_runs} == {"team-a"}
    assert job.recurring_run_id not in {j.recurring_run_id for j in
                                        bob.list_recurring_runs(namespace="team-b").recurring_runs or []}
    refused(bob.list_recurring_runs, namespace="team-a")
    status, body = team.call("alice", "GET", f"{API}/recurringruns")
    assert status == 400 and body["message"] == "A recurring run cannot have an empty namespace in multi-user mode"
    assert "namespace team-a" in refused(bob.get_recurring_run, job.recurring_run_id)
    for call in (bob.enable_recurring_run, bob.delete_recurring_run):
        refused(call, job.recurring_run_id)
    refused(client(team, "carol", "team-a").enable_recurring_run, job.recurring_run_id)
    assert alice.get_recurring_run(job.recurring_run_id).status == "DISABLED"


def test_pipelines_are_shared_or_namespaced(team: Team) -> None:
    package = team.home.parent / "adder-pipeline.yaml"
    kfp.compiler.Compiler().compile(adder, str(package))
    alice, bob = client(team, "alice", "team-a"), client(team, "bob", "team-b")
    mine = alice.upload_pipeline(str(package), pipeline_name="alices", namespace="team-a")
    assert mine.namespace == "team-a"
    assert "namespace team-a" in refused(bob.get_pipeline, mine.pipeline_id)
    refused(bob.delete_pipeline, mine.pipeline_id)
    listed = alice.list_pipelines(namespace="team-a", page_size=100).pipelines
    assert "alices" in [p.display_name for p in listed] and {p.namespace for p in listed} == {"team-a"}
    refused(bob.list_pipelines, namespace="team-a")
    assert "shared pipelines" in refused(alice.upload_pipeline, str(package), pipeline_name="for-all")
    refused(client(team, "carol", "team-a").upload_pipeline, str(package), pipeline_name="c", namespace="team-a")
    shared = client(team, "root").upload_pipeline(str(package), pipeline_name="for-all")
    assert shared.namespace == ""
    listed = bob.list_pipelines(page_size=100).pipelines  # no namespace: the shared ones, which every user reads
    assert "for-all" in {p.display_name for p in listed} and {p.namespace for p in listed} == {""}
    assert bob.get_pipeline(shared.pipeline_id).display_name == "for-all"
    refused(bob.delete_pipeline, shared.pipeline_id)
    assert alice.get_pipeline(mine.pipeline_id).display_name == "alices"


def test_the_context_file_names_the_namespace(team: Team, alice_run: Any, tmp_path: Path) -> None:
    """A client made without a namespace uses ``~/.config/kfp/context.json``'s (what ``set_user_namespace`` writes)."""
    (tmp_path / ".config" / "kfp").mkdir(parents=True)
    (tmp_path / ".config" / "kfp" / "context.json").write_text(json.dumps({"namespace": "team-a"}))
    script = ("import json, sys, kfp\n"
              "c = kfp.Client(host=sys.argv[1], existing_token=sys.argv[2])\n"
              "print(json.dumps([c.get_user_namespace(), [r.run_id for r in c.list_runs().runs or []]]))\n")
    done = subprocess.run([sys.executable, "-c", script, team.url, team.tokens["alice"]], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)}, check=False)
    assert done.returncode == 0, done.stderr
    namespace, runs = json.loads(done.stdout.strip().splitlines()[-1])
    assert namespace == "team-a" and alice_run.run_id in runs


def test_each_namespace_has_its_own_default_experiment(team: Team) -> None:
    """A run that names no experiment goes to its namespace's ``Default`` (``kfp.Client`` finds or makes it)."""
    bob = client(team, "bob", "team-b")
    result = bob.create_run_from_pipeline_func(adder, arguments={"x": 1, "y": 1})
    bobs_default = bob.get_experiment(experiment_name="Default")
    assert bobs_default.namespace == "team-b" and result.run_info.experiment_id == bobs_default.experiment_id
    alices_default = client(team, "alice", "team-a").create_experiment("Default")
    assert alices_default.experiment_id != bobs_default.experiment_id and alices_default.namespace == "team-a"
    run = bob.wait_for_run_completion(result.run_id, timeout=120, sleep_duration=0.2)
    assert run.state == "SUCCEEDED", run.error

"""The ML Metadata endpoint of a team's server (``millpond server --multi-user --mlmd-port``): nothing is answered
without an identity (``authorization: Bearer mpt_...`` as gRPC metadata), and each caller reads the lineage of the
namespaces where the server's one Authorizer lets it ``get`` artifacts and runs. alice edits team-a, carol views it,
bob edits team-b (``tests/kfp_multiuser/team.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
import yaml

from tests.kfp_multiuser.team import Team, start_team
from tests.lineage.pipelines import fit_one
from tests.lineage.support import compiled
from tests.mlmd.support import Stub, api, free_port, mlmd, refused
from tests.server_support import module_home


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Team, str, dict[str, str]]]:
    """The team's server, its ML Metadata target, and a run of the two-step pipeline in each namespace."""
    for home in module_home(tmp_path_factory, "mlmd-team"):
        port = free_port()
        started = start_team(home, "--mlmd-port", str(port))
        spec = yaml.safe_load(compiled(fit_one, home.parent).read_text())
        runs = {namespace: started.finished_run(namespace, spec) for namespace in ("team-a", "team-b")}
        yield started, f"127.0.0.1:{port}", runs
        started.stop()


def _stub(team: tuple[Team, str, dict[str, str]], who: str | None) -> Stub:
    served, target, _ = team
    return Stub(grpc.insecure_channel(target), served.tokens[who] if who else None)


def _artifacts(stub: Stub) -> list[mlmd.Artifact]:
    return list(stub.GetArtifacts(api.GetArtifactsRequest()).artifacts)


def _run_names(stub: Stub) -> set[str]:
    runs = stub.GetContextsByType(api.GetContextsByTypeRequest(type_name="system.PipelineRun"))
    return {c.name for c in runs.contexts}


def test_no_identity_no_answer(team: tuple[Team, str, dict[str, str]]) -> None:
    anonymous = _stub(team, None)
    for call, request in ((anonymous.GetArtifacts, api.GetArtifactsRequest()),
                          (anonymous.GetContextTypes, api.GetContextTypesRequest()),
                          (anonymous.PutArtifacts, api.PutArtifactsRequest())):
        error = refused(call, request)  # a write too: refused for want of an identity before being refused
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED and "authentication required" in error.details()
    wrong = Stub(grpc.insecure_channel(team[1]), "mpt_not-a-token")
    error = refused(wrong.GetArtifacts, api.GetArtifactsRequest())
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED and "invalid" in error.details()
    # the identity header of a proxy is trusted from the proxy's address only (none here)
    proxied = Stub(grpc.insecure_channel(team[1]), None, (("kubeflow-userid", "alice@example.com"),))
    assert refused(proxied.GetArtifacts, api.GetArtifactsRequest()).code() == grpc.StatusCode.PERMISSION_DENIED


def test_each_caller_reads_the_namespaces_it_may(team: tuple[Team, str, dict[str, str]]) -> None:
    _, _, runs = team
    admin = _stub(team, "server")
    everything = _artifacts(admin)
    assert len(everything) == 4 and _run_names(admin) == set(runs.values())
    seen = {}
    for who, namespace in (("alice", "team-a"), ("carol", "team-a"), ("bob", "team-b")):
        stub = _stub(team, who)
        seen[who] = {a.id for a in _artifacts(stub)}
        assert len(seen[who]) == 2 and _run_names(stub) == {runs[namespace]}, who
    assert seen["alice"] == seen["carol"] and not seen["alice"] & seen["bob"]
    assert seen["alice"] | seen["bob"] == {a.id for a in everything}
    # bob asks for team-a's model by id, its events, its contexts, its lineage: as if it were not there
    bob, alice = _stub(team, "bob"), _stub(team, "alice")
    [model] = [a for a in _artifacts(alice) if a.type == "system.Model"]
    assert len(bob.GetArtifactsByID(api.GetArtifactsByIDRequest(artifact_ids=[model.id])).artifacts) == 0
    assert len(bob.GetEventsByArtifactIDs(api.GetEventsByArtifactIDsRequest(artifact_ids=[model.id])).events) == 0
    assert len(bob.GetContextsByArtifact(api.GetContextsByArtifactRequest(artifact_id=model.id)).contexts) == 0
    traced = api.GetLineageSubgraphRequest(lineage_subgraph_query_options={
        "starting_artifacts": {"filter_query": f"id = {model.id}"}, "max_num_hops": 4})
    assert refused(bob.GetLineageSubgraph, traced).code() == grpc.StatusCode.NOT_FOUND
    assert len(alice.GetLineageSubgraph(traced).lineage_subgraph.artifacts) == 2  # the model and its dataset
    run_a = alice.GetContextByTypeAndName(api.GetContextByTypeAndNameRequest(
        type_name="system.PipelineRun", context_name=runs["team-a"])).context
    assert run_a.custom_properties["namespace"].string_value == "team-a"
    assert not bob.GetContextByTypeAndName(api.GetContextByTypeAndNameRequest(
        type_name="system.PipelineRun", context_name=runs["team-a"])).HasField("context")
    assert len(bob.GetExecutionsByContext(api.GetExecutionsByContextRequest(context_id=run_a.id)).executions) == 0
    assert len(alice.GetExecutionsByContext(api.GetExecutionsByContextRequest(context_id=run_a.id)).executions) >= 2

"""``millpond server --mlmd-port``: ML Metadata's gRPC service over the lineage of real runs, called with grpcio's
own client. KFP's types and properties, the run and pipeline contexts, events, a cache hit pointing at the execution
it reused, the lineage subgraph from the model to its dataset, paging, refused writes and bad input."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import grpc
import pytest

from millpond.store.lineage import mlmd_id
from tests.mlmd.support import MILLPOND, Recorded, Stub, api, free_port, millpond, mlmd, refused

ContainerExecution, PipelineRun, Pipeline = "system.ContainerExecution", "system.PipelineRun", "system.Pipeline"


@pytest.fixture
def stub(recorded: Recorded) -> Stub:
    return recorded.server.stub()


def run_context(stub: Stub, run: dict) -> mlmd.Context:
    found = stub.GetContextByTypeAndName(api.GetContextByTypeAndNameRequest(type_name=PipelineRun,
                                                                            context_name=run["run_id"]))
    assert found.HasField("context"), run["run_id"]
    return found.context


def executions(stub: Stub, run: dict) -> dict[str, mlmd.Execution]:
    """A run's container executions by task name."""
    answer = stub.GetExecutionsByContext(api.GetExecutionsByContextRequest(context_id=run_context(stub, run).id))
    return {e.custom_properties["task_name"].string_value: e for e in answer.executions if e.type == ContainerExecution}


def events(stub: Stub, execution: mlmd.Execution) -> dict[tuple[str, str], mlmd.Event]:
    """An execution's events by (INPUT/OUTPUT, the input's or output's name)."""
    answer = stub.GetEventsByExecutionIDs(api.GetEventsByExecutionIDsRequest(execution_ids=[execution.id]))
    return {(mlmd.Event.Type.Name(e.type), e.path.steps[0].key): e for e in answer.events}


def test_types_are_kfps(stub: Stub) -> None:
    artifact_types = {t.name: t.id for t in stub.GetArtifactTypes(api.GetArtifactTypesRequest()).artifact_types}
    assert {"system.Artifact", "system.Model", "system.Dataset", "system.Metrics"} <= set(artifact_types)
    execution_types = {t.name for t in stub.GetExecutionTypes(api.GetExecutionTypesRequest()).execution_types}
    assert {ContainerExecution, "system.DAGExecution", "system.ImporterExecution"} <= execution_types
    context_types = {t.name for t in stub.GetContextTypes(api.GetContextTypesRequest()).context_types}
    assert {PipelineRun, Pipeline} <= context_types
    model = stub.GetArtifactType(api.GetArtifactTypeRequest(type_name="system.Model")).artifact_type
    assert (model.name, model.id) == ("system.Model", artifact_types["system.Model"])
    by_id = stub.GetArtifactTypesByID(api.GetArtifactTypesByIDRequest(type_ids=[model.id, 12345]))
    assert [t.name for t in by_id.artifact_types] == ["system.Model"]
    missing = refused(stub.GetArtifactType, api.GetArtifactTypeRequest(type_name="system.Nothing"))
    assert missing.code() == grpc.StatusCode.NOT_FOUND and "system.Nothing" in missing.details()
    assert refused(stub.GetContextType, api.GetContextTypeRequest(type_name=PipelineRun, type_version="v9")).code() \
        == grpc.StatusCode.NOT_FOUND


def test_runs_are_contexts_under_their_pipeline(stub: Stub, recorded: Recorded) -> None:
    first, second = run_context(stub, recorded.first), run_context(stub, recorded.second)
    assert (first.type, first.name, first.id) == (PipelineRun, recorded.first["run_id"], first.id)
    [pipeline] = stub.GetParentContextsByContext(api.GetParentContextsByContextRequest(context_id=first.id)).contexts
    assert (pipeline.type, pipeline.name) == (Pipeline, "lineage-fit")
    children = stub.GetChildrenContextsByContext(api.GetChildrenContextsByContextRequest(context_id=pipeline.id))
    assert {c.id for c in children.contexts} == {first.id, second.id}
    parents = stub.GetParentContextsByContexts(api.GetParentContextsByContextsRequest(context_ids=[first.id, 99]))
    assert {key: [c.id for c in value.parent_contexts] for key, value in parents.contexts.items()} == {
        first.id: [pipeline.id]}
    kids = stub.GetChildrenContextsByContexts(api.GetChildrenContextsByContextsRequest(context_ids=[pipeline.id]))
    assert {c.id for c in kids.contexts[pipeline.id].children_contexts} == {first.id, second.id}
    by_type = stub.GetContextsByType(api.GetContextsByTypeRequest(type_name=PipelineRun)).contexts
    assert {c.id for c in by_type} == {first.id, second.id}
    assert [c.name for c in stub.GetContextsByID(api.GetContextsByIDRequest(context_ids=[second.id, 7])).contexts] \
        == [recorded.second["run_id"]]
    # what MLMD answers for what is not there: nothing, not an error
    assert not stub.GetContextByTypeAndName(api.GetContextByTypeAndNameRequest(
        type_name=PipelineRun, context_name="no-such-run")).HasField("context")
    assert len(stub.GetContextsByType(api.GetContextsByTypeRequest(type_name="no.Such")).contexts) == 0
    assert len(stub.GetParentContextsByContext(api.GetParentContextsByContextRequest(context_id=99)).contexts) == 0


def test_executions_artifacts_and_events_carry_kfps_properties(stub: Stub, recorded: Recorded) -> None:
    ran = executions(stub, recorded.first)
    make, fit = ran["make"], ran["fit"]
    assert fit.id == mlmd_id(recorded.task(recorded.first, "fit")["id"])
    assert (fit.type, mlmd.Execution.State.Name(fit.last_known_state)) == (ContainerExecution, "COMPLETE")
    custom = fit.custom_properties
    assert custom["display_name"].string_value == "fit" and custom["run_id"].string_value == recorded.first["run_id"]
    assert custom["cache_fingerprint"].string_value and custom["component_name"].string_value
    assert fit.create_time_since_epoch > 0 and fit.last_update_time_since_epoch >= fit.create_time_since_epoch

    made, fitted = events(stub, make), events(stub, fit)
    assert set(made) == {("OUTPUT", "data")} and set(fitted) == {("INPUT", "data"), ("OUTPUT", "model")}
    assert fitted[("INPUT", "data")].artifact_id == made[("OUTPUT", "data")].artifact_id
    found = stub.GetArtifactsByID(api.GetArtifactsByIDRequest(
        artifact_ids=[fitted[("INPUT", "data")].artifact_id, fitted[("OUTPUT", "model")].artifact_id, 424242],
        populate_artifact_types=True))
    by_type = {a.type: a for a in found.artifacts}
    dataset, model = by_type["system.Dataset"], by_type["system.Model"]
    assert {t.name for t in found.artifact_types} == {"system.Dataset", "system.Model"}
    assert dataset.uri == recorded.task(recorded.first, "make")["outputs"]["data"]
    assert model.uri == recorded.task(recorded.first, "fit")["outputs"]["model"]
    assert dataset.custom_properties["index"].int_value == 7  # what the task wrote in its artifact's metadata
    assert model.custom_properties["display_name"].string_value == "model"
    assert mlmd.Artifact.State.Name(model.state) == "LIVE"
    assert [a.id for a in stub.GetArtifactsByURI(api.GetArtifactsByURIRequest(uris=[model.uri, "s3://x"])).artifacts] \
        == [model.id]
    named = stub.GetArtifactByTypeAndName(api.GetArtifactByTypeAndNameRequest(type_name="system.Model",
                                                                              artifact_name="model"))
    assert named.artifact.id == model.id
    of_model = stub.GetEventsByArtifactIDs(api.GetEventsByArtifactIDsRequest(artifact_ids=[model.id])).events
    assert {(e.execution_id, mlmd.Event.Type.Name(e.type)) for e in of_model} == {
        (fit.id, "OUTPUT"), (executions(stub, recorded.second)["fit"].id, "OUTPUT")}
    contexts = stub.GetContextsByArtifact(api.GetContextsByArtifactRequest(artifact_id=model.id)).contexts
    assert {(c.type, c.name) for c in contexts} == {(PipelineRun, recorded.first["run_id"]),
                                                    (PipelineRun, recorded.second["run_id"]), (Pipeline, "lineage-fit")}
    of_fit = stub.GetContextsByExecution(api.GetContextsByExecutionRequest(execution_id=fit.id)).contexts
    assert {c.name for c in of_fit} == {recorded.first["run_id"], "lineage-fit"}
    first_run = run_context(stub, recorded.first).id
    in_run = stub.GetArtifactsByContext(api.GetArtifactsByContextRequest(context_id=first_run))
    assert {a.id for a in in_run.artifacts} == {dataset.id, model.id}


def test_a_cached_execution_points_at_the_execution_it_reused(stub: Stub, recorded: Recorded) -> None:
    original, reused = executions(stub, recorded.first)["fit"], executions(stub, recorded.second)["fit"]
    assert mlmd.Execution.State.Name(reused.last_known_state) == "CACHED"
    assert reused.custom_properties["cached_execution_id"].string_value == str(original.id)
    assert reused.custom_properties["cache_fingerprint"] == original.custom_properties["cache_fingerprint"]
    assert stub.GetExecutionsByID(api.GetExecutionsByIDRequest(
        execution_ids=[int(reused.custom_properties["cached_execution_id"].string_value)])).executions == [original]
    # the cache hit's output is the first run's model itself
    # a task's name is its run's; of the two runs' executions of that name, the newest is the one
    named = stub.GetExecutionByTypeAndName(api.GetExecutionByTypeAndNameRequest(type_name=ContainerExecution,
                                                                                execution_name=original.name))
    assert original.name == reused.name and named.execution.id == reused.id
    output = ("OUTPUT", "model")
    assert events(stub, reused)[output].artifact_id == events(stub, original)[output].artifact_id


def test_the_lineage_subgraph_from_the_model_reaches_its_dataset(stub: Stub, recorded: Recorded) -> None:
    fit = executions(stub, recorded.first)["fit"]
    model_id = events(stub, fit)[("OUTPUT", "model")].artifact_id
    dataset_id = events(stub, fit)[("INPUT", "data")].artifact_id
    upstream = mlmd.LineageSubgraphQueryOptions.Direction.Value("UPSTREAM")

    def subgraph(**options: object) -> mlmd.LineageGraph:
        query = mlmd.LineageSubgraphQueryOptions(**options)  # type: ignore[arg-type]
        return stub.GetLineageSubgraph(api.GetLineageSubgraphRequest(lineage_subgraph_query_options=query)) \
            .lineage_subgraph

    traced = subgraph(starting_artifacts={"filter_query": f"id = {model_id}"}, max_num_hops=2, direction=upstream)
    assert {a.id for a in traced.artifacts} == {model_id, dataset_id}
    reused = executions(stub, recorded.second)["fit"]
    assert {e.id for e in traced.executions} == {fit.id, reused.id}  # both wrote the model (one by the cache)
    assert {(e.execution_id, mlmd.Event.Type.Name(e.type)) for e in traced.events} >= {
        (fit.id, "OUTPUT"), (fit.id, "INPUT")}
    assert {c.id for c in traced.contexts} >= {run_context(stub, recorded.first).id}
    assert {t.name for t in traced.artifact_types} >= {"system.Model", "system.Dataset"}
    assert all(a.artifact_id in {model_id, dataset_id} for a in traced.attributions)
    # the whole way up, with no limit: the make executions too; none further
    whole = subgraph(starting_artifacts={"filter_query": f"id = {model_id}"}, direction=upstream)
    assert len(whole.executions) == 4 and {a.id for a in whole.artifacts} == {model_id, dataset_id}
    # downstream from the dataset reaches the model; zero hops, the starting node alone
    down = subgraph(starting_artifacts={"filter_query": f"id = {dataset_id}"}, max_num_hops=2,
                    direction=mlmd.LineageSubgraphQueryOptions.Direction.Value("DOWNSTREAM"))
    assert model_id in {a.id for a in down.artifacts}
    alone = subgraph(starting_artifacts={"filter_query": f"id = {model_id}"}, max_num_hops=0)
    assert [a.id for a in alone.artifacts] == [model_id] and not alone.executions
    masked = stub.GetLineageSubgraph(api.GetLineageSubgraphRequest(
        lineage_subgraph_query_options=mlmd.LineageSubgraphQueryOptions(
            starting_executions={"filter_query": f"id = {fit.id}"}, max_num_hops=1),
        read_mask={"paths": ["artifacts"]})).lineage_subgraph
    assert {a.id for a in masked.artifacts} == {model_id, dataset_id} and not masked.events and not masked.executions


def test_lists_page_with_list_operation_options(stub: Stub) -> None:
    everything = stub.GetArtifacts(api.GetArtifactsRequest()).artifacts
    assert len(everything) == 2
    executions_all = [e.id for e in stub.GetExecutions(api.GetExecutionsRequest()).executions]
    assert executions_all == sorted(executions_all) and len(executions_all) >= 4  # by id, ascending
    seen, token, pages = [], "", 0
    while True:
        options = mlmd.ListOperationOptions(max_result_size=1, next_page_token=token)
        page = stub.GetExecutions(api.GetExecutionsRequest(options=options))
        seen += [e.id for e in page.executions]
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert seen == executions_all and pages == len(executions_all)
    newest_first = mlmd.ListOperationOptions(max_result_size=100, order_by_field={
        "field": mlmd.ListOperationOptions.OrderByField.Field.Value("CREATE_TIME"), "is_asc": False})
    listed = stub.GetExecutions(api.GetExecutionsRequest(options=newest_first))
    times = [e.create_time_since_epoch for e in listed.executions]
    assert times == sorted(times, reverse=True) and not listed.next_page_token
    models = stub.GetArtifacts(api.GetArtifactsRequest(options=mlmd.ListOperationOptions(
        filter_query="type = 'system.Model' AND state = LIVE")))
    assert [a.type for a in models.artifacts] == ["system.Model"]
    [model] = models.artifacts  # a time filter holds for the millisecond the answer gave
    same = stub.GetArtifacts(api.GetArtifactsRequest(options=mlmd.ListOperationOptions(
        filter_query=f"create_time_since_epoch = {model.create_time_since_epoch} AND id = {model.id}")))
    assert [a.id for a in same.artifacts] == [model.id]
    by_type = stub.GetExecutionsByType(api.GetExecutionsByTypeRequest(
        type_name=ContainerExecution, options=mlmd.ListOperationOptions(max_result_size=3)))
    assert len(by_type.executions) == 3 and by_type.next_page_token


def test_writes_are_refused_with_a_message(stub: Stub) -> None:
    for call, request in ((stub.PutArtifacts, api.PutArtifactsRequest(artifacts=[mlmd.Artifact(uri="s3://x")])),
                          (stub.PutExecution, api.PutExecutionRequest()),
                          (stub.PutArtifactType, api.PutArtifactTypeRequest(artifact_type={"name": "x"}))):
        error = refused(call, request)
        assert error.code() == grpc.StatusCode.UNIMPLEMENTED and "read-only" in error.details()
    other = refused(stub.GetArtifactsByExternalIds, api.GetArtifactsByExternalIdsRequest(external_ids=["x"]))
    assert other.code() == grpc.StatusCode.UNIMPLEMENTED and "not served" in other.details()
    assert len(stub.GetArtifacts(api.GetArtifactsRequest()).artifacts) == 2  # nothing written


def test_bad_requests_are_invalid_arguments_and_the_server_keeps_serving(stub: Stub) -> None:
    def options(**given: object) -> api.GetArtifactsRequest:
        return api.GetArtifactsRequest(options=mlmd.ListOperationOptions(**given))  # type: ignore[arg-type]

    for request in (options(max_result_size=0), options(max_result_size=-5), options(next_page_token="not-a-token"),
                    options(filter_query="id = 1 OR id = 2"), options(filter_query="contexts_a.name = 'x'"),
                    options(filter_query="id = 'one'"), options(filter_query="(id = 1"),
                    options(filter_query="(" * 4000 + "id = 1" + ")" * 4000), options(filter_query="id = 1 AND"),
                    options(filter_query=f"id = {2**64}"), options(filter_query="name = 'unterminated"),
                    options(filter_query="name = 'x\x00'" + " AND name = 'y'" * 5000)):
        error = refused(stub.GetArtifacts, request)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details(), request
    for request in (api.GetLineageSubgraphRequest(),
                    api.GetLineageSubgraphRequest(lineage_subgraph_query_options={"starting_artifacts": {}}),
                    api.GetLineageSubgraphRequest(lineage_subgraph_query_options={
                        "starting_artifacts": {"filter_query": "id = 1"}, "max_num_hops": -1}),
                    api.GetLineageSubgraphRequest(lineage_subgraph_query_options={
                        "starting_executions": {"filter_query": "uri = 'x'"}})):  # executions have no URI
        assert refused(stub.GetLineageSubgraph, request).code() == grpc.StatusCode.INVALID_ARGUMENT, request
    nothing = refused(stub.GetLineageSubgraph, api.GetLineageSubgraphRequest(lineage_subgraph_query_options={
        "starting_artifacts": {"filter_query": "id = 1"}}))
    assert nothing.code() == grpc.StatusCode.NOT_FOUND  # MLMD: no node to start from
    assert refused(stub.GetArtifactsByID, api.GetArtifactsByIDRequest(artifact_ids=list(range(10_001)))).code() \
        == grpc.StatusCode.INVALID_ARGUMENT
    # many ids at once (read a thousand at a time): the known ones come back, in order
    known = sorted(a.id for a in stub.GetArtifacts(api.GetArtifactsRequest()).artifacts)
    many = stub.GetArtifactsByID(api.GetArtifactsByIDRequest(artifact_ids=[*range(1, 4000), *known, *known]))
    assert [a.id for a in many.artifacts] == known
    executions_known = [e.id for e in stub.GetExecutions(api.GetExecutionsRequest()).executions]
    by_many = stub.GetEventsByExecutionIDs(api.GetEventsByExecutionIDsRequest(
        execution_ids=[*range(1, 2500), *executions_known]))
    assert len(by_many.events) == len(stub.GetEventsByArtifactIDs(api.GetEventsByArtifactIDsRequest(
        artifact_ids=known)).events) > 0
    # unknown ids: empty answers, as MLMD's
    assert len(stub.GetArtifactsByID(api.GetArtifactsByIDRequest(artifact_ids=[1, 2, -3])).artifacts) == 0
    assert len(stub.GetEventsByExecutionIDs(api.GetEventsByExecutionIDsRequest(execution_ids=[5])).events) == 0
    assert len(stub.GetExecutionsByContext(api.GetExecutionsByContextRequest(context_id=5)).executions) == 0
    # bytes that are no request at all
    raw = stub.channel.unary_unary("/ml_metadata.MetadataStoreService/GetArtifacts")
    with pytest.raises(grpc.RpcError) as garbage:
        raw(b"\xff\xff\xff\xff", timeout=30)
    assert garbage.value.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT)
    assert len(stub.GetArtifacts(api.GetArtifactsRequest()).artifacts) == 2  # still serving


def test_the_flag_is_checked_and_a_port_in_use_is_one_error_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    bad = millpond(home, "server", "--port", str(free_port()), "--mlmd-port", "70000")
    assert bad.returncode == 2 and "--mlmd-port 70000" in bad.stderr and "Traceback" not in bad.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = millpond(home, "server", "--port", str(free_port()), "--mlmd-port", str(taken.getsockname()[1]),
                        timeout=60)
    assert busy.returncode == 1 and "error:" in busy.stderr and "--mlmd-port" in busy.stderr, busy.stderr
    assert "Traceback" not in busy.stderr


def test_over_tls_with_the_servers_token(tmp_path: Path) -> None:
    """``--tls --token-file``: the endpoint serves TLS with the server's certificate (clients trust millpond's CA)
    and, as the HTTP API, answers only who sends the server's token."""
    home = tmp_path / "home"
    token = tmp_path / "token"
    token.write_text("mlmd-test-token-0123456789\n")
    token.chmod(0o600)
    port = free_port()
    with open(tmp_path / "server.log", "wb") as log:
        process = subprocess.Popen([str(MILLPOND), "server", "--port", str(free_port()), "--mlmd-port", str(port),
                                    "--tls", "--token-file", str(token)],
                                   env={**os.environ, "MILLPOND_HOME": str(home)}, stdout=log, stderr=subprocess.STDOUT)
    try:
        authority = home / "tls" / "ca.crt"
        deadline = time.monotonic() + 60
        while not authority.exists():
            assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.1)
        credentials = grpc.ssl_channel_credentials(root_certificates=authority.read_bytes())
        channel = grpc.secure_channel(f"127.0.0.1:{port}", credentials)
        grpc.channel_ready_future(channel).result(timeout=60)
        error = refused(Stub(channel, None).GetArtifactTypes, api.GetArtifactTypesRequest())
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED and "token" in error.details()
        assert refused(Stub(channel, "wrong").GetArtifactTypes, api.GetArtifactTypesRequest()).code() == \
            grpc.StatusCode.UNAUTHENTICATED
        types = Stub(channel, "mlmd-test-token-0123456789").GetArtifactTypes(api.GetArtifactTypesRequest())
        assert "system.Model" in {t.name for t in types.artifact_types}
        with grpc.insecure_channel(f"127.0.0.1:{port}") as plain:  # no TLS: no answer
            assert refused(Stub(plain, "mlmd-test-token-0123456789").GetArtifactTypes,
                           api.GetArtifactTypesRequest()).code() == grpc.StatusCode.UNAVAILABLE
    finally:
        process.terminate()
        process.wait(30)

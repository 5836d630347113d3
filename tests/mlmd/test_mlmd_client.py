"""ML Metadata's own Python client (``ml-metadata`` 1.17.1, ``MetadataStore`` over gRPC) against
``millpond server --mlmd-port``: what a KFP user's notebook does to trace a model, run in the client's side
environment (``tests/mlmd_env.py``)."""

from __future__ import annotations

from pathlib import Path

from tests.kube_sdk_env import SdkEnv
from tests.mlmd.support import Recorded
from tests.mlmd_env import mlmd_client, run_client

__all__ = ["mlmd_client"]  # the fixture, used by name below

TRACE = """
    import json, sys
    from ml_metadata import errors
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2 as pb

    host, port, first_run, second_run = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    store = metadata_store.MetadataStore(pb.MetadataStoreClientConfig(host=host, port=port))
    run = store.get_context_by_type_and_name("system.PipelineRun", first_run)
    [pipeline] = store.get_parent_contexts_by_context(run.id)
    executions = {e.custom_properties["task_name"].string_value: e for e in store.get_executions_by_context(run.id)
                  if e.type == "system.ContainerExecution"}
    fit = executions["fit"]
    events = store.get_events_by_execution_ids([fit.id])
    [model_event] = [e for e in events if e.type == pb.Event.OUTPUT]
    [model] = store.get_artifacts_by_id([model_event.artifact_id])
    upstream = pb.LineageSubgraphQueryOptions(
        starting_artifacts=pb.LineageSubgraphQueryOptions.StartingNodes(filter_query=f"id = {model.id}"),
        max_num_hops=2, direction=pb.LineageSubgraphQueryOptions.UPSTREAM)
    graph = store.get_lineage_subgraph(upstream)
    cached_run = store.get_context_by_type_and_name("system.PipelineRun", second_run)
    [cached_fit] = [e for e in store.get_executions_by_context(cached_run.id)
                    if e.custom_properties["task_name"].string_value == "fit"]
    refusals = {}
    for name, call in (("put_artifacts", lambda: store.put_artifacts([pb.Artifact(uri="s3://x")])),
                       ("get_artifact_type", lambda: store.get_artifact_type("system.Nothing")),
                       ("bad_filter", lambda: store.get_artifacts(
                           list_options=metadata_store.ListOptions(filter_query="id = 1 OR id = 2")))):
        try:
            call()
            refusals[name] = None
        except errors.StatusError as error:
            refusals[name] = type(error).__name__
    print(json.dumps({
        "artifacts": sorted(a.type for a in store.get_artifacts()),
        "one": len(store.get_artifacts(list_options=metadata_store.ListOptions(limit=1))),
        "models": [a.uri for a in store.get_artifacts_by_type("system.Model")],
        "artifact_types": [t.name for t in store.get_artifact_types()],
        "pipeline": [pipeline.type, pipeline.name],
        "executions": sorted(executions),
        "fit": [fit.type, pb.Execution.State.Name(fit.last_known_state),
                fit.custom_properties["display_name"].string_value],
        "events": sorted([pb.Event.Type.Name(e.type), e.path.steps[0].key] for e in events),
        "model": [model.type, model.uri, model.id],
        "graph_artifacts": sorted(a.type for a in graph.artifacts),
        "graph_uris": sorted(a.uri for a in graph.artifacts),
        "graph_executions": sorted(e.custom_properties["task_name"].string_value for e in graph.executions),
        "graph_contexts": sorted(c.type for c in graph.contexts),
        "graph_types": sorted(t.name for t in graph.artifact_types),
        "cached": [pb.Execution.State.Name(cached_fit.last_known_state),
                   cached_fit.custom_properties["cached_execution_id"].string_value, str(fit.id)],
        "unknown": [len(store.get_artifacts_by_id([123456789])), len(store.get_events_by_artifact_ids([5]))],
        "refusals": refusals,
    }))
"""


def test_the_ml_metadata_client_traces_a_model_to_its_dataset(mlmd_client: SdkEnv, recorded: Recorded,
                                                              tmp_path: Path) -> None:
    host, port = recorded.server.target.rsplit(":", 1)
    found = run_client(mlmd_client, tmp_path, "trace", TRACE, host, port, recorded.first["run_id"],
                       recorded.second["run_id"])
    make, fit = recorded.task(recorded.first, "make"), recorded.task(recorded.first, "fit")
    assert found["artifacts"] == ["system.Dataset", "system.Model"] and found["one"] == 1
    assert found["models"] == [fit["outputs"]["model"]]
    assert {"system.Model", "system.Dataset", "system.Metrics"} <= set(found["artifact_types"])
    assert found["pipeline"] == ["system.Pipeline", "lineage-fit"]
    assert found["executions"] == ["fit", "make"]
    assert found["fit"] == ["system.ContainerExecution", "COMPLETE", "fit"]
    assert found["events"] == [["INPUT", "data"], ["OUTPUT", "model"]]
    assert found["model"][:2] == ["system.Model", fit["outputs"]["model"]]
    # the subgraph, hydrated by the client itself (GetArtifactsByID...): the model and the dataset it came from
    assert found["graph_artifacts"] == ["system.Dataset", "system.Model"]
    assert found["graph_uris"] == sorted([make["outputs"]["data"], fit["outputs"]["model"]])
    assert found["graph_executions"] == ["fit", "fit"]  # the run that fitted it, and the cache hit that reused it
    assert set(found["graph_contexts"]) == {"system.Pipeline", "system.PipelineRun"}
    assert found["graph_types"] == ["system.Dataset", "system.Model"]
    state, points_to, original = found["cached"]
    assert state == "CACHED" and points_to == original
    assert found["unknown"] == [0, 0]
    assert found["refusals"] == {"put_artifacts": "UnimplementedError", "get_artifact_type": "NotFoundError",
                                 "bad_filter": "InvalidArgumentError"}

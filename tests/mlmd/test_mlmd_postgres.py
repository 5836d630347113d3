"""The ML Metadata endpoint over a PostgreSQL metadata database (``MILLPOND_DATABASE_URL``): PostgreSQL compares
like with like, so ids, times and text in filters, pages and joins must reach it typed as their columns are."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from tests.lineage.pipelines import fit_one
from tests.lineage.support import compiled
from tests.mlmd.support import api, mlmd, refused, run_pipeline, start_server


def test_filters_pages_and_lineage_on_postgresql(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_DATABASE_URL", pg_url)  # the CLI's and the server's processes inherit it
    home = tmp_path / "home"
    ran = run_pipeline(home, compiled(fit_one, tmp_path))
    server = start_server(home)
    try:
        stub = server.stub()
        artifacts = stub.GetArtifacts(api.GetArtifactsRequest()).artifacts
        assert sorted(a.type for a in artifacts) == ["system.Dataset", "system.Model"]
        model = next(a for a in artifacts if a.type == "system.Model")
        filtered = stub.GetArtifacts(api.GetArtifactsRequest(options=mlmd.ListOperationOptions(filter_query=(
            f"id IN ({model.id}, 5) AND create_time_since_epoch > 0 AND uri LIKE '%/model' AND state = LIVE "
            f"AND last_update_time_since_epoch <= {model.last_update_time_since_epoch}"))))
        assert [a.id for a in filtered.artifacts] == [model.id]
        pages, token = [], ""
        while True:
            options = mlmd.ListOperationOptions(max_result_size=1, next_page_token=token, order_by_field={
                "field": mlmd.ListOperationOptions.OrderByField.Field.Value("LAST_UPDATE_TIME"), "is_asc": False})
            page = stub.GetExecutions(api.GetExecutionsRequest(options=options))
            pages += [e.id for e in page.executions]
            if not (token := page.next_page_token):
                break
        assert sorted(pages) == sorted(e.id for e in stub.GetExecutions(api.GetExecutionsRequest()).executions)
        [event] = stub.GetEventsByArtifactIDs(api.GetEventsByArtifactIDsRequest(artifact_ids=[model.id])).events
        [fit] = stub.GetExecutionsByID(api.GetExecutionsByIDRequest(execution_ids=[event.execution_id])).executions
        assert fit.custom_properties["run_id"].string_value == ran["run_id"]
        contexts = stub.GetContextsByArtifact(api.GetContextsByArtifactRequest(artifact_id=model.id)).contexts
        assert {c.type for c in contexts} == {"system.PipelineRun", "system.Pipeline"}
        graph = stub.GetLineageSubgraph(api.GetLineageSubgraphRequest(lineage_subgraph_query_options={
            "starting_artifacts": {"filter_query": f"id = {model.id}"}, "max_num_hops": 2})).lineage_subgraph
        assert {a.id for a in graph.artifacts} == {a.id for a in artifacts}
        assert [a.id for a in stub.GetArtifactsByURI(api.GetArtifactsByURIRequest(uris=[model.uri])).artifacts] == [
            model.id]
        late = refused(stub.GetArtifacts, api.GetArtifactsRequest(options=mlmd.ListOperationOptions(
            filter_query=f"create_time_since_epoch > {2**62}")))
        assert late.code() == grpc.StatusCode.INVALID_ARGUMENT and "milliseconds" in late.details()
    finally:
        server.stop()

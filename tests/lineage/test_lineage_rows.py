"""``store.lineage``: the rows a task's end becomes, decided before anything is written (no database here)."""

from __future__ import annotations

import datetime as dt

from millpond.store.lineage import (
    ARTIFACTS,
    EVENTS,
    EXECUTIONS,
    ExecutionRecord,
    RunScope,
    artifact_id,
    artifact_type_of,
    input_links,
    output_links,
    rows_of,
)

NOW = dt.datetime(2026, 11, 29, tzinfo=dt.timezone.utc)
RUN = RunScope("run-1", "team-a", "digits")
SPEC = {"inputs": {"artifacts": {"train_data": {"taskOutputArtifact": {"producerTask": "preprocess",
                                                                        "outputArtifactKey": "train_data"}},
                                 "extra": {"componentInputArtifact": "pipelinechannel--extra"}}}}


def dataset(uri: str) -> dict[str, object]:
    return {"name": "x", "uri": uri, "type": {"schemaTitle": "system.Dataset"}, "metadata": {"rows": 3}}


def tables(record: ExecutionRecord) -> dict[str, list[dict[str, object]]]:
    found: dict[str, list[dict[str, object]]] = {}
    for table in rows_of(record, NOW):
        found.setdefault(table.table, []).extend(table.rows)
    return found


def test_inputs_carry_kfps_io_type_and_producer_and_ids_follow_the_uri() -> None:
    links = input_links(SPEC, {"train_data": [dataset("/r/train")], "extra": [dataset("/r/extra")],
                               "no_uri": [{"name": "x"}]})
    assert [(link.key, link.io_type, link.producer_task) for link in links] == [
        ("train_data", "TASK_OUTPUT_INPUT", "preprocess"), ("extra", "COMPONENT_INPUT", "")]
    collected = input_links({}, {"many": [dataset("/a"), dataset("/b")]})
    assert {link.io_type for link in collected} == {"COLLECTED_INPUTS"}
    model = output_links({"model": [{"uri": "/r/model", "type": {"schemaTitle": "system.Model"}}]}, "train")
    record = ExecutionRecord("task-1", "system.ContainerExecution", "root/train", "SUCCEEDED", "team-a", RUN,
                             links, model)
    rows = tables(record)
    assert rows[EXECUTIONS][0]["state"] == "COMPLETE"
    assert {a["id"] for a in rows[ARTIFACTS]} == {artifact_id(u) for u in ("/r/train", "/r/extra", "/r/model")}
    assert sorted((e["type"], e["path"], e["io_type"]) for e in rows[EVENTS]) == [
        ("INPUT", "extra", "COMPONENT_INPUT"), ("INPUT", "train_data", "TASK_OUTPUT_INPUT"),
        ("OUTPUT", "model", "OUTPUT")]
    assert rows == tables(record)  # the same task's end again: the same rows, the same ids
    assert (artifact_type_of("system.Metrics"), artifact_type_of("google.VertexModel")) == ("Metric", "Artifact")


def test_a_cache_hit_reuses_the_artifacts_it_names_and_replaces_none() -> None:
    outputs = output_links({"model": [{"uri": "/r/model", "type": {"schemaTitle": "system.Model"}}]}, "train")
    hit = ExecutionRecord("task-2", "system.ContainerExecution", "root/train", "CACHED", "", RUN, (), outputs,
                          custom_properties={"cached_execution_id": "task-1"}, produced_here=False)
    written = rows_of(hit, NOW)
    artifacts = [t for t in written if t.table == ARTIFACTS]
    assert [(t.conflict, [r["id"] for r in t.rows]) for t in artifacts] == [("ignore", [artifact_id("/r/model")])]
    execution = next(t for t in written if t.table == EXECUTIONS).rows[0]
    assert (execution["state"], execution["custom_properties"]) == ("CACHED", {"cached_execution_id": "task-1"})

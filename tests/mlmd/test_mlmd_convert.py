"""Lineage rows as ML Metadata's messages: JSON values as MLMD's ``Value``, and the custom properties that name other
executions (``cached_execution_id``, ``parent_dag_id``) turned from the rows' text ids into MLMD ids, as KFP
writes them."""

from __future__ import annotations

import datetime as dt

from millpond.mlmd import convert
from millpond.mlmd.proto import metadata_store_pb2 as mlmd
from millpond.store.lineage import mlmd_id
from millpond.store.lineage_tables import LineageExecution

NOW = dt.datetime(2026, 11, 29, 14, 0, 0, 123456, tzinfo=dt.timezone.utc)


def test_values_are_mlmds() -> None:
    assert convert.value("text") == mlmd.Value(string_value="text")
    assert convert.value(True) == mlmd.Value(bool_value=True)
    assert convert.value(7) == mlmd.Value(int_value=7)
    assert convert.value(2**70) == mlmd.Value(string_value=str(2**70))  # no int64: its text
    assert convert.value(0.5) == mlmd.Value(double_value=0.5)
    assert convert.value(None) is None
    nested = convert.value({"a": [1, "x"], "b": {"c": None}})
    assert nested is not None and nested.struct_value["a"][1] == "x" and nested.struct_value["b"]["c"] is None
    assert convert.value([1, 2]) == mlmd.Value(string_value="[1, 2]")  # a Struct is an object; a list is its JSON


def test_an_execution_names_the_executions_it_points_at_by_their_mlmd_ids() -> None:
    row = LineageExecution(
        id="task-2", mlmd_id=mlmd_id("task-2"), type="system.ContainerExecution", name="root/train", state="CACHED",
        namespace="", run_id="run-2", properties={},
        custom_properties={"cached_execution_id": "task-1", "parent_dag_id": "dag-2", "task_name": "train"},
        created_at=NOW, updated_at=NOW)
    message = convert.execution(row)
    assert message.id == mlmd_id("task-2") and mlmd.Execution.State.Name(message.last_known_state) == "CACHED"
    assert message.custom_properties["cached_execution_id"] == mlmd.Value(string_value=str(mlmd_id("task-1")))
    assert message.custom_properties["parent_dag_id"] == mlmd.Value(int_value=mlmd_id("dag-2"))
    assert message.create_time_since_epoch == int(NOW.timestamp() * 1000)
    assert message.type_id == convert.type_id("execution", "system.ContainerExecution") > 0
    unknown = convert.execution(LineageExecution(
        id="t", mlmd_id=1, type="x", name="n", state="SOMETHING", namespace="", run_id=None, properties={},
        custom_properties={}, created_at=NOW.replace(tzinfo=None), updated_at=NOW.replace(tzinfo=None)))
    assert unknown.last_known_state == mlmd.Execution.UNKNOWN  # and a naive time is UTC, as SQLite gives it back
    assert unknown.create_time_since_epoch == int(NOW.timestamp() * 1000)

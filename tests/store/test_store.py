"""The store: migrations match the models, and the stdlib journal writes what the ORM reads.

Each test runs on SQLite and on PostgreSQL (the ``database`` fixture)."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from millpond.store.db import get_engine
from millpond.store.journal import open_journal
from millpond.store.models import Base
from millpond.store.runs import RunStore

pytestmark = pytest.mark.usefixtures("database")


def test_migrations_build_exactly_the_models_schema(database: str) -> None:
    engine = get_engine(database)  # an empty database: 0001 to head run here
    with engine.connect() as conn:
        differences = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert differences == []


def test_journal_rows_read_back_through_the_orm(database: str) -> None:
    url = database
    journal = open_journal(url)
    run = journal.create_run(name="r", experiment="exp", pipeline_name="p", pipeline_spec={"root": {}},
                             platform_spec=None, parameters={"n": 1}, pipeline_root="/tmp/x")
    task_id = journal.start_task(run_id=run.id, path="a", name="a", kind="container", component="comp-a",
                                 parent_id=None, inputs={"parameters": {"x": 2}}, image="python:3.11")
    journal.finish_task(task_id, state="SUCCEEDED", outputs={"parameters": {"Output": 3}, "artifacts": {}},
                        exit_code=0, run_id=run.id, attempts=2,
                        artifacts=[{"name": "m", "type": {"schemaTitle": "system.Model"}, "uri": "/tmp/x/m",
                                    "metadata": {"acc": 0.9}}],
                        cache_entry=("k" * 64, {"parameters": {"Output": 3}, "artifacts": {}, "present": []}))
    journal.update_run(run.id, state="SUCCEEDED", outputs={"parameters": {"Output": 3}, "artifacts": {}},
                       finished_at=dt.datetime.now(dt.timezone.utc))
    orm = RunStore(url)
    got = orm.get_run(run.id)
    assert (got.state, got.parameters, got.platform_spec, got.outputs["parameters"]) == (
        "SUCCEEDED", {"n": 1}, None, {"Output": 3}
    )
    assert orm.experiment_name(got.experiment_id) == "exp"
    [task] = orm.list_tasks(run.id)
    assert (task.state, task.exit_code, task.attempts, task.cached) == ("SUCCEEDED", 0, 2, False)
    assert task.inputs == {"parameters": {"x": 2}} and task.finished_at >= task.started_at
    [artifact] = orm.list_artifacts(run.id)
    assert (artifact.type, artifact.uri, artifact.artifact_metadata) == ("system.Model", "/tmp/x/m", {"acc": 0.9})
    assert orm.cache_get("k" * 64) == ({"parameters": {"Output": 3}, "artifacts": {}, "present": []}, task_id)
    # kfp 1.x's max_cache_staleness: an entry older than the age a task accepts is not reused, and is kept
    time.sleep(0.2)
    for reader in (orm, journal):
        assert reader.cache_get("k" * 64, max_age_s=0.1) is None
        assert reader.cache_get("k" * 64, max_age_s=3600) is not None
    # and the other way round: what the ORM wrote, the journal reads
    again = open_journal(url).list_tasks(run.id)
    assert again[0].outputs == {"parameters": {"Output": 3}, "artifacts": {}}


def test_a_cancel_reads_and_closes_every_unfinished_task_at_once(database: str) -> None:
    """``unfinished_tasks`` and ``cancel_tasks`` of both journals: 9,000 tasks (6,000 at once, in chunks
    under PostgreSQL's per-statement parameter limit), one final task left as it was."""
    journal = open_journal(database)
    run = journal.create_run(name="r", experiment="exp", pipeline_name="p", pipeline_spec={"root": {}},
                             platform_spec=None, parameters={}, pipeline_root="/tmp/x")
    done = journal.start_task(run_id=run.id, path="done", name="done", kind="container", component="c",
                              parent_id=None, inputs={}, image=None)
    journal.finish_task(done, state="SUCCEEDED")
    ids = [journal.start_task(run_id=run.id, path=f"t{i}", name="t", kind="container", component="c",
                              parent_id=None, inputs={}, image=None) for i in range(9000)]
    orm = RunStore(database)
    for store, count in ((journal, 3000), (orm, 6000)):
        assert sorted(task_id for task_id, _pid, _start in store.unfinished_tasks(run.id)) == sorted(ids)
        store.cancel_tasks(ids[:count], "cancelled by SIGTERM")
        ids = ids[count:]
        assert len(store.unfinished_tasks(run.id)) == len(ids)
    states = {t.id: (t.state, t.error) for t in orm.list_tasks(run.id)}
    assert states.pop(done) == ("SUCCEEDED", None) and len(states) == 9000
    assert set(states.values()) == {("CANCELED", "cancelled by SIGTERM")}

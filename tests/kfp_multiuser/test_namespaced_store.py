"""Migration 0013 on a home with records (SQLite and PostgreSQL): names become unique per namespace, nothing lost.

A database at 0012 holding an experiment with a run and a pipeline is brought to head the way every process
opens one (``get_engine``); the old rows are single-user's (namespace ``""``), the same names can then be
taken in another namespace and not twice in one, and the run still belongs to its experiment.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text

from millpond.store.catalog import NameTaken, PipelineStore
from millpond.store.db import MIGRATIONS_DIR, driver_url, forget_engines
from millpond.store.journal import open_journal
from millpond.store.listing import ListQuery
from millpond.store.models import Run
from millpond.store.runs import RunStore

STAMP = "'2026-01-01 00:00:00'"


def _at_0012_with_rows(url: str) -> None:
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    engine = create_engine(driver_url(url))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0012")
        conn.execute(text(f"INSERT INTO experiments (id, name, description, created_at, storage_state) "
                          f"VALUES ('e', 'exp', '', {STAMP}, 'AVAILABLE')"))
        conn.execute(text(f"INSERT INTO runs (id, name, experiment_id, pipeline_name, pipeline_spec, parameters, "
                          f"pipeline_root, state, outputs, created_at, storage_state) VALUES ('r', 'r', 'e', 'p', "
                          f"'{{}}', '{{}}', '/x', 'SUCCEEDED', '{{}}', {STAMP}, 'AVAILABLE')"))
        conn.execute(text(f"INSERT INTO pipelines (id, name, display_name, description, created_at) "
                          f"VALUES ('p', 'pipe', 'pipe', '', {STAMP})"))
    engine.dispose()


def test_names_become_unique_per_namespace(database: str) -> None:
    if database.startswith("postgresql"):  # a fresh database per test: drop what the fixture's engine made
        forget_engines()
        with create_engine(driver_url(database)).begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    _at_0012_with_rows(database)
    forget_engines()
    store = RunStore(database)  # brought to head here
    old = store.find_experiment("e")
    assert (old.name, old.namespace) == ("exp", "")
    assert store.get_run("r").namespace == "" and store.experiment_name("e") == "exp"
    theirs = store.create_experiment("exp", namespace="team-a")
    assert theirs.id != "e" and store.ensure_experiment("exp", namespace="team-a").id == theirs.id
    with pytest.raises(NameTaken, match="in namespace 'team-a'"):
        store.create_experiment("exp", namespace="team-a")
    with pytest.raises(NameTaken):
        store.create_experiment("exp")
    journal = open_journal(database)
    run = journal.create_run(name="n", experiment="exp", pipeline_name="p", pipeline_spec={}, platform_spec=None,
                             parameters={}, pipeline_root="/x", namespace="team-a")
    assert (run.namespace, run.experiment_id) == ("team-a", theirs.id)
    assert [r.id for r in store.page_runs(ListQuery(), namespace="team-a").items] == [run.id]
    assert [r.id for r in store.page_runs(ListQuery(), namespace="").items] == ["r"]
    catalog = PipelineStore(database)
    assert catalog.get_pipeline("p").namespace == ""
    assert catalog.create_pipeline("pipe", "pipe", None, namespace="team-a").namespace == "team-a"
    with pytest.raises(NameTaken):
        catalog.create_pipeline("pipe", "pipe", None)
    if database.startswith("sqlite"):  # the rebuilt table is still the one runs refer to, checked
        with store._engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall() == []
    assert isinstance(store.find_run("r"), Run)

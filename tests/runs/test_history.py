"""The run history: runs, tasks, logs and experiments outlive the process, and homes are shareable."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PIPELINES, spawn_cli, task

pytestmark = pytest.mark.usefixtures("database")  # on SQLite and on PostgreSQL


def test_runs_list_get_and_experiments(cli) -> None:
    first = cli("run", PIPELINES / "typed_params.py", "--pipeline", "returns_int", "--experiment", "exp-a",
                "--run-name", "first", "-o", "json").json()
    second = cli("run", PIPELINES / "typed_params.py", "--pipeline", "returns_int", "-p", "i=1", "-o", "json").json()

    listed = cli("runs", "list", "-o", "json").json()
    assert [r["run_id"] for r in listed] == [second["run_id"], first["run_id"]]  # newest first
    assert listed[1]["name"] == "first"
    assert listed[1]["experiment"] == "exp-a"
    assert listed[0]["experiment"] == "Default"
    assert all(r["state"] == "SUCCEEDED" for r in listed)

    only_a = cli("runs", "list", "--experiment", "exp-a", "-o", "json").json()
    assert [r["run_id"] for r in only_a] == [first["run_id"]]

    got = cli("runs", "get", first["run_id"], "-o", "json").json()
    assert got["state"] == "SUCCEEDED"
    assert got["parameters"] == {"i": 41}
    assert got["outputs"] == {"Output": 42}
    assert task(got, "add-one")["outputs"] == {"Output": 42}
    assert got["tasks"][0]["started_at"] <= got["tasks"][0]["finished_at"]

    by_prefix = cli("runs", "get", first["run_id"][:8], "-o", "json").json()
    assert by_prefix["run_id"] == first["run_id"]

    experiments = cli("experiments", "list", "-o", "json").json()
    assert sorted(e["name"] for e in experiments) == ["Default", "exp-a"]

    table = cli("runs", "get", second["run_id"])
    assert table.code == 0
    assert "add-one" in table.out and "SUCCEEDED" in table.out


def test_logs_of_all_tasks_and_follow(cli) -> None:
    data = cli("run", PIPELINES / "artifacts.py", "-p", "text=logme", "-o", "json").json()
    every = cli("runs", "logs", data["run_id"])
    assert every.code == 0
    assert "==> inner/produce <==" in every.out
    assert "==> consume <==" in every.out
    followed = cli("runs", "logs", data["run_id"], "consume", "-f")
    assert followed.code == 0
    assert "Got executor_input" in followed.out
    missing = cli("runs", "logs", data["run_id"], "nope")
    assert missing.code == 2
    assert "no task 'nope'" in missing.err


def test_two_concurrent_runs_on_one_home(home: Path, tmp_path: Path, cli) -> None:
    procs = [
        spawn_cli(home, "run", PIPELINES / "artifacts.py", "-p", f"text=run{i}", "--run-name", f"r{i}", "-o", "json")
        for i in range(2)
    ]
    results = [proc.communicate(timeout=300) for proc in procs]
    for proc, (_out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
    import json

    outputs = sorted(json.loads(out)["outputs"]["Output"] for out, _ in results)
    assert outputs == ["run0|4", "run1|4"]
    listed = cli("runs", "list", "-o", "json").json()
    assert sorted(r["name"] for r in listed) == ["r0", "r1"]
    assert all(r["state"] == "SUCCEEDED" for r in listed)

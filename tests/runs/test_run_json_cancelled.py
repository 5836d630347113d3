"""``millpond run -o json`` prints exactly one JSON object on stdout however the run ends, a cancel included.

A real ``millpond run -o json`` process is stopped by a real SIGINT (exit 130), or by ``millpond runs
terminate`` from another process, as a user or the server's terminate would: either way stdout holds the
run object, state CANCELED, and every task of it final.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from kfp import compiler

from tests.conftest import spawn_cli
from tests.pipelines import cancellable
from tests.runs.test_cancellation import assert_nothing_left, runs, started, until

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pipelines") / "cancellable.yaml"
    compiler.Compiler().compile(cancellable.cancellable, str(path))
    return path


def _one_cancelled_run(out: str, run_id: str) -> dict:
    """stdout is one JSON object: the run, CANCELED, with its tasks final."""
    data = json.loads(out)  # one object and nothing else, or this raises
    assert isinstance(data, dict) and data["run_id"] == run_id, data
    assert data["state"] == "CANCELED" and data["error"], data
    assert data["tasks"] and all(t["state"] in ("SUCCEEDED", "CANCELED", "SKIPPED") for t in data["tasks"]), data
    return data


def test_sigint_prints_the_cancelled_run_as_json(package: Path, home: Path, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    engine = spawn_cli(home, "run", package, "-p", f"folder={marks}", "-o", "json")
    until("the first task", lambda: started(marks) or engine.poll() is not None, 120)
    assert engine.poll() is None, engine.communicate()
    os.kill(engine.pid, signal.SIGINT)
    out, err = engine.communicate(timeout=120)
    assert engine.returncode == 130, err
    assert "cancelled by SIGINT" in err
    data = _one_cancelled_run(out, runs(home)[0]["id"])
    assert "SIGINT" in data["error"], data
    assert_nothing_left(home)


def test_runs_terminate_from_elsewhere_prints_the_cancelled_run_as_json(
        package: Path, home: Path, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    engine = spawn_cli(home, "run", package, "-p", f"folder={marks}", "-o", "json")
    until("the first task", lambda: started(marks) or engine.poll() is not None, 120)
    assert engine.poll() is None, engine.communicate()
    run_id = runs(home)[0]["id"]
    stopper = spawn_cli(home, "runs", "terminate", run_id, "-o", "json")
    stop_out, stop_err = stopper.communicate(timeout=120)
    assert stopper.returncode == 0, stop_err
    assert json.loads(stop_out)["state"] == "CANCELED"
    out, err = engine.communicate(timeout=120)
    assert engine.returncode != 0, (out, err)
    _one_cancelled_run(out, run_id)
    assert_nothing_left(home)

"""A kfp 1.x run is a run like any other: listed beside v2 runs, retried, resumed after kill -9, terminated.

The workflow is a kfp 1.x-compiled shape written out here: ``first`` leaves a mark, then ``gate``
fails until a file exists (so a retry can succeed), or, as ``slow``, sleeps until told not to
(so its engine can be killed or the run terminated while it runs).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import spawn_cli
from tests.runs.test_cancellation import assert_nothing_left, runs, tasks, until

pytestmark = pytest.mark.timeout(300)

_WORKFLOW = """\
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  generateName: gated-
  labels: {pipelines.kubeflow.org/kfp_sdk_version: 1.8.22}
spec:
  entrypoint: gated
  arguments:
    parameters:
    - {name: folder}
  templates:
  - name: gated
    inputs:
      parameters:
      - {name: folder}
    dag:
      tasks:
      - name: first
        template: first
        arguments: {parameters: [{name: folder, value: '{{inputs.parameters.folder}}'}]}
      - name: gate
        template: gate
        dependencies: [first]
        arguments: {parameters: [{name: folder, value: '{{inputs.parameters.folder}}'}]}
  - name: first
    inputs:
      parameters:
      - {name: folder}
    metadata:
      labels: {pipelines.kubeflow.org/enable_caching: "false"}
    container:
      image: alpine
      command: [sh, -c, 'mkdir -p "$0" && echo ran >> "$0/first"', '{{inputs.parameters.folder}}']
  - name: gate
    inputs:
      parameters:
      - {name: folder}
    metadata:
      labels: {pipelines.kubeflow.org/enable_caching: "false"}
    container:
      image: alpine
      command: [sh, -c, 'GATE', '{{inputs.parameters.folder}}']
"""
_GATE = 'test -f "$0/open" || { echo "the gate is shut" >&2; exit 3; }; echo through'
# Sleeps (in short steps, so a killed engine's guardian finds it at once) until "$0/open" exists.
_SLOW = 'echo $$ > "$0/slow.pids"; until [ -f "$0/open" ]; do sleep 0.1; done; echo through'


def _workflow(tmp_path: Path, gate: str) -> Path:
    path = tmp_path / "gated.yaml"
    path.write_text(_WORKFLOW.replace("GATE", gate.replace("'", "''")))
    return path


def test_a_failed_v1_run_is_retried_without_rerunning_what_succeeded(
    cli: Callable[..., Any], tmp_path: Path,
) -> None:
    folder = tmp_path / "marks"
    failed = cli("run", _workflow(tmp_path, _GATE), "-p", f"folder={folder}", "-o", "json")
    assert failed.code == 1, failed.err
    run = json.loads(failed.out)
    gate = [t for t in run["tasks"] if t["name"] == "gate"][0]
    assert gate["state"] == "FAILED" and "exited with status 3" in gate["error"], gate
    (folder / "open").touch()
    retried = cli("runs", "retry", run["run_id"], "-o", "json")
    assert retried.code == 0, retried.err
    assert json.loads(retried.out)["state"] == "SUCCEEDED"
    assert (folder / "first").read_text() == "ran\n"  # first succeeded the first time: not run again
    assert "through" in cli("runs", "logs", run["run_id"], "gate").out


def test_a_v1_run_whose_engine_is_killed_resumes_to_its_end(cli: Callable[..., Any], home: Path,
                                                            tmp_path: Path) -> None:
    folder = tmp_path / "marks"
    engine = spawn_cli(home, "run", _workflow(tmp_path, _SLOW), "-p", f"folder={folder}")
    until("the slow step", lambda: (folder / "slow.pids").exists() or engine.poll() is not None, 120)
    os.kill(engine.pid, signal.SIGKILL)
    engine.wait()
    assert_nothing_left(home)  # the guardian took the step with it
    run_id = runs(home)[0]["id"]
    assert runs(home)[0]["state"] == "RUNNING"  # what a killed engine leaves: to be resumed
    (folder / "open").touch()
    resumed = cli("runs", "resume", run_id, "-o", "json")
    assert resumed.code == 0, resumed.err
    assert json.loads(resumed.out)["state"] == "SUCCEEDED"
    assert (folder / "first").read_text() == "ran\n"
    assert {row["state"] for row in tasks(home, run_id).values()} == {"SUCCEEDED"}


def test_a_v1_run_is_terminated_with_its_tasks(cli: Callable[..., Any], home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "marks"
    engine = spawn_cli(home, "run", _workflow(tmp_path, _SLOW), "-p", f"folder={folder}")
    until("the slow step", lambda: (folder / "slow.pids").exists() or engine.poll() is not None, 120)
    run_id = runs(home)[0]["id"]
    assert cli("runs", "terminate", run_id).code == 0
    assert engine.wait(120) != 0
    assert runs(home)[0]["state"] == "CANCELED"
    assert_nothing_left(home)


def test_v1_and_v2_runs_list_side_by_side(cli: Callable[..., Any], tmp_path: Path) -> None:
    folder = tmp_path / "marks"
    folder.mkdir()
    (folder / "open").touch()
    v1 = cli("run", _workflow(tmp_path, _GATE), "-p", f"folder={folder}", "--run-name", "the-v1-run")
    (tmp_path / "v2.py").write_text(_V2)
    v2 = cli("run", tmp_path / "v2.py", "--run-name", "the-v2-run")
    assert v1.code == 0 and v2.code == 0, v1.err + v2.err
    listed = cli("runs", "list", "-o", "json")
    names = {run["name"]: run["state"] for run in json.loads(listed.out)}
    assert names == {"the-v1-run": "SUCCEEDED", "the-v2-run": "SUCCEEDED"}, listed.out


_V2 = """
from kfp import dsl


@dsl.component
def hello() -> str:
    return "hello from v2"


@dsl.pipeline
def v2_pipeline():
    hello()
"""

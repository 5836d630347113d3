"""A kfp 1.x workflow's limits, run for real: ``spec.parallelism``, ``spec.activeDeadlineSeconds``, a step's
``activeDeadlineSeconds`` (``op.set_timeout``) and ``max_cache_staleness`` (``pipelines.workflow_limits``)."""

from __future__ import annotations

import itertools
import json
import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millpond.durations import DurationError, parse_iso8601_duration
from millpond.errors import UserError
from millpond.pipelines.argo.reader import load_workflow
from millpond.pipelines.argo.to_ir import translate
from millpond.pipelines.workflow_limits import WorkflowLimits, workflow_limits

_WORKFLOW = """\
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  generateName: limits-
  labels: {{pipelines.kubeflow.org/kfp_sdk_version: 1.8.22}}
spec:
  entrypoint: limits
{spec}
  templates:
  - name: limits
    dag:
      tasks:
      - {{name: a, template: stamp, arguments: {{parameters: [{{name: who, value: a}}]}}}}
      - {{name: b, template: stamp, arguments: {{parameters: [{{name: who, value: b}}]}}}}
      - {{name: c, template: stamp, arguments: {{parameters: [{{name: who, value: c}}]}}}}
  - name: stamp
    inputs:
      parameters:
      - {{name: who}}
{step}
    metadata:
      labels: {{pipelines.kubeflow.org/enable_caching: "true"}}
      annotations: {{pipelines.kubeflow.org/max_cache_staleness: {staleness}}}
    container:
      image: alpine
      command: [sh, -c, 'echo "{{{{inputs.parameters.who}}}} start $(date +%s.%N)"; sleep {sleep};
        echo "{{{{inputs.parameters.who}}}} end $(date +%s.%N)"']
  - name: goodbye
    container:
      image: alpine
      command: [sh, -c, 'echo goodbye']
"""


def _workflow(tmp_path: Path, spec: str = "", step: str = "", staleness: str = "P30D", sleep: float = 0.4) -> Path:
    path = tmp_path / f"limits-{len(list(tmp_path.glob('limits-*.yaml')))}.yaml"
    path.write_text(_WORKFLOW.format(spec=spec, step=step, staleness=staleness, sleep=sleep))
    return path


def _run(cli, path: Path) -> dict:
    result = cli("run", path, "-o", "json")
    return json.loads(result.out)


def _spans(cli, run_id: str) -> list[tuple[float, float]]:
    logs = cli("runs", "logs", run_id).out
    starts = dict(re.findall(r"(\w) start ([\d.]+)", logs))
    ends = dict(re.findall(r"(\w) end ([\d.]+)", logs))
    assert sorted(starts) == ["a", "b", "c"] == sorted(ends), logs
    return sorted((float(starts[k]), float(ends[k])) for k in starts)


def test_workflow_parallelism_runs_one_step_at_a_time(cli, tmp_path: Path) -> None:
    run = _run(cli, _workflow(tmp_path, spec="  parallelism: 1"))
    assert run["state"] == "SUCCEEDED", run
    spans = _spans(cli, run["run_id"])
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, spans  # never two at once


def test_without_parallelism_steps_overlap(cli, tmp_path: Path) -> None:
    """The control: the same workflow with no limit runs its three steps at the same time."""
    run = _run(cli, _workflow(tmp_path, sleep=1.5))
    assert run["state"] == "SUCCEEDED", run
    spans = _spans(cli, run["run_id"])
    assert any(start < end for (_, end), (start, _) in itertools.pairwise(spans)), spans


def test_workflow_deadline_fails_the_run_naming_it_and_the_exit_handler_still_runs(cli, tmp_path: Path) -> None:
    path = _workflow(tmp_path, spec="  activeDeadlineSeconds: 2\n  parallelism: 1\n  onExit: goodbye", sleep=30)
    began = time.monotonic()
    run = _run(cli, path)
    assert time.monotonic() - began < 25  # stopped at the deadline, not after three 30 s steps
    assert run["state"] == "FAILED", run
    failed = [t for t in run["tasks"] if t["state"] == "FAILED"]
    assert failed and "the workflow's activeDeadlineSeconds (2s) passed" in failed[0]["error"], run["tasks"]
    exit_task = [t for t in run["tasks"] if t["name"] == "goodbye"]
    assert exit_task and exit_task[0]["state"] == "SUCCEEDED", run["tasks"]


def test_a_step_deadline_stops_that_step(cli, tmp_path: Path) -> None:
    run = _run(cli, _workflow(tmp_path, step="    activeDeadlineSeconds: 1", sleep=30))
    assert run["state"] == "FAILED", run
    errors = [t["error"] or "" for t in run["tasks"] if t["state"] == "FAILED"]
    assert errors and all("timed out after 1s" in e for e in errors), errors


def test_a_cached_result_is_reused_within_its_staleness_only(cli, tmp_path: Path) -> None:
    month = _workflow(tmp_path, staleness="P30D", sleep=0)
    first, second = _run(cli, month), _run(cli, month)
    assert first["state"] == second["state"] == "SUCCEEDED"
    steps = [t for t in second["tasks"] if t["name"] in ("a", "b", "c")]
    assert len(steps) == 3 and all(t["cached"] for t in steps), second["tasks"]
    # One second: the same steps (same cache keys) are older than that by the second run.
    second_old = _workflow(tmp_path, staleness="PT1S", sleep=0)
    _run(cli, second_old)
    time.sleep(1.3)
    again = _run(cli, second_old)
    steps = [t for t in again["tasks"] if t["name"] in ("a", "b", "c")]
    assert len(steps) == 3 and not any(t["cached"] for t in steps), again["tasks"]


def test_staleness_zero_never_caches(cli, tmp_path: Path) -> None:
    path = _workflow(tmp_path, staleness="P0D", sleep=0)
    _run(cli, path)
    again = _run(cli, path)
    assert not any(t["cached"] for t in again["tasks"]), again["tasks"]


def test_a_bad_staleness_is_refused_in_one_line(cli, tmp_path: Path) -> None:
    result = cli("run", _workflow(tmp_path, staleness="P1X"))
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert "max_cache_staleness 'P1X' is not an ISO 8601 duration" in result.err
    assert "template 'stamp'" in result.err


def test_translation_writes_the_limits_into_the_argo_platform(tmp_path: Path) -> None:
    path = _workflow(tmp_path, spec="  parallelism: 2\n  activeDeadlineSeconds: 60",
                     step="    activeDeadlineSeconds: 5", staleness="PT1H")
    _, platform = translate(load_workflow(path))
    limits = workflow_limits(platform)
    assert limits == WorkflowLimits(parallelism=2, deadline_s=60, cache_staleness_s={"comp-stamp": 3600.0})
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert executors["exec-stamp"]["activeDeadlineSeconds"] == 5


@pytest.mark.parametrize("config, problem", [
    ({"parallelism": 0}, "parallelism must be a whole number"),
    ({"parallelism": True}, "parallelism must be a whole number"),
    ({"activeDeadlineSeconds": "60"}, "activeDeadlineSeconds must be a whole number"),
    ({"maxCacheStalenessSeconds": {"comp-x": -1}}, "must be seconds"),
    ({"maxCacheStalenessSeconds": [1]}, "must map components to seconds"),
    ({"sneaky": 1}, "unknown field 'sneaky'"),
])
def test_a_malformed_argo_platform_is_refused(config: dict, problem: str) -> None:
    with pytest.raises(UserError, match=problem):
        workflow_limits({"platforms": {"argo": {"config": config}}})
    assert workflow_limits({"platforms": {"kubernetes": {}}}) == WorkflowLimits()


@pytest.mark.parametrize("text, seconds", [
    ("P0D", 0), ("PT0S", 0), ("P30D", 30 * 86400), ("PT1H30M", 5400), ("P1W", 7 * 86400),
    ("P1DT30H4S", 54 * 3600 + 4), ("P1M", 730.4841667 * 3600), ("P1Y", 8765.81 * 3600),
])
def test_iso8601_durations_read_as_kfp_v1s_cache_server_reads_them(text: str, seconds: float) -> None:
    assert parse_iso8601_duration(text).seconds == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "P", "PT", "30D", "P1H", "PT1D", "P1D1D", "P-1D", "P1.5D", "P1DT", "p1d"])
def test_what_is_not_an_iso8601_duration_is_refused_naming_it(text: str) -> None:
    with pytest.raises(DurationError, match="is not an ISO 8601 duration"):
        parse_iso8601_duration(text, "max_cache_staleness")


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(alphabet="PTYMWDHS0123456789.-", max_size=30), st.text(max_size=30), st.integers()))
def test_fuzzed_durations_parse_or_are_refused(text: object) -> None:
    try:
        assert parse_iso8601_duration(text).seconds >= 0
    except DurationError:
        pass

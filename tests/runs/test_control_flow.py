"""KFP control flow end to end: conditions, loops, fan-in, exit handlers, OneOf, retries, bad loops."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kfp import compiler

from tests.conftest import PIPELINES, task
from tests.pipelines import control_flow

FLOW = PIPELINES / "control_flow.py"


@pytest.mark.parametrize(("n", "word"), [(12, "big"), (7, "medium"), (1, "small")])
def test_if_elif_else_with_oneof(cli, n: int, word: str) -> None:
    result = cli("run", FLOW, "--pipeline", "branches", "-p", f"n={n}", "-o", "json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["outputs"] == {"Output": word}
    ran = sorted(t["outputs"]["Output"] for t in data["tasks"] if t["name"].startswith("say"))
    assert ran == [word]
    skipped = [t for t in data["tasks"] if t["state"] == "SKIPPED"]
    assert len(skipped) == 2
    assert all(t["error"] == "condition is false" for t in skipped)


def test_loops_parallelism_nesting_and_collected(cli) -> None:
    result = cli("run", FLOW, "--pipeline", "loops", "-p", "xs=[1, 2, 3, 4, 5]", "-o", "json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["outputs"] == {"Output": 55}
    squares = sorted(t["outputs"]["Output"] for t in data["tasks"] if t["name"] == "square")
    assert squares == [1, 4, 9, 16, 25]
    iterations = [t for t in data["tasks"] if t["kind"] == "iteration"]
    assert len(iterations) == 5 + 2 + 4  # 5 squares; 2 outer × 2 inner
    nested = [t["path"] for t in data["tasks"] if t["name"] == "number"]
    assert len(nested) == 4
    assert all(p.count("iteration-") == 2 for p in nested)


def test_loop_parallelism_limit_is_honoured(cli) -> None:
    data = cli("run", FLOW, "--pipeline", "loops", "-o", "json").json()
    spans = sorted(
        (t["started_at"], t["finished_at"]) for t in data["tasks"] if t["name"] == "square"
    )
    # parallelism=2: at no moment do three squares overlap
    for i in range(len(spans) - 2):
        assert not (spans[i + 2][0] < spans[i][1] and spans[i + 2][0] < spans[i + 1][1])


def test_collected_artifacts(cli) -> None:
    result = cli("run", FLOW, "--pipeline", "artifact-fan-in", "-o", "json")
    assert result.code == 0, result.err
    assert result.json()["outputs"] == {"Output": "x,y,z"}


def test_exit_handler_runs_after_a_failure_with_the_real_status(cli, tmp_path: Path) -> None:
    marker = tmp_path / "status.txt"
    result = cli("run", FLOW, "--pipeline", "exit-handling", "-p", f"marker={marker}", "-o", "json")
    assert result.code == 1
    data = result.json()
    assert data["state"] == "FAILED"
    assert "exploded on purpose" in data["error"]
    assert marker.read_text() == "FAILED|exit-handler-1|True"
    assert task(data, "record-status")["state"] == "SUCCEEDED"


def test_exit_handler_sees_success(cli, tmp_path: Path) -> None:
    marker = tmp_path / "status.txt"
    result = cli("run", FLOW, "--pipeline", "exit-handling", "-p", f"marker={marker}", "-p", "fail=false", "-o", "json")
    assert result.code == 0, result.err
    assert marker.read_text() == "COMPLETE|exit-handler-1|False"


def test_ignore_upstream_failure_runs_cleanup_and_run_still_fails(cli, tmp_path: Path) -> None:
    result = cli("run", FLOW, "--pipeline", "cleanup-after-failure", "-p", f"marker={tmp_path}", "-o", "json")
    assert result.code == 1
    data = result.json()
    assert task(data, "say")["state"] == "SUCCEEDED"
    assert task(data, "explode")["state"] == "FAILED"


def test_retries_until_success(cli, tmp_path: Path) -> None:
    counter = tmp_path / "count"
    result = cli("run", FLOW, "--pipeline", "retrying", "-p", f"counter={counter}", "-o", "json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["outputs"] == {"Output": "attempt=3"}
    log = Path(task(data, "flaky")["log"]).read_text()
    assert log.count("retrying in") == 2
    got = cli("runs", "get", data["run_id"], "-o", "json").json()
    assert got["tasks"][0]["state"] == "SUCCEEDED"


def test_retries_give_up(cli, tmp_path: Path) -> None:
    counter = tmp_path / "count"
    result = cli("run", FLOW, "--pipeline", "retrying", "-p", f"counter={counter}", "-p", "succeed_on=9", "-o", "json")
    assert result.code == 1
    assert counter.read_text() == "4"  # the first attempt and three retries
    assert "attempt 4 fails" in result.json()["error"]


def test_loop_over_a_non_list_fails_the_loop_clearly(cli, tmp_path: Path) -> None:
    package = tmp_path / "loops.yaml"
    compiler.Compiler().compile(control_flow.loops, str(package))
    text = package.read_text()
    root_inputs = text.rindex("parameterType: LIST")  # the root's xs input is the last LIST in the file
    package.write_text(text[:root_inputs] + "parameterType: STRING" + text[root_inputs + len("parameterType: LIST"):])
    result = cli("run", package, "-p", "xs=hello", "-o", "json")
    assert result.code == 1
    assert "is not a list (got the string 'hello')" in result.json()["error"]


def test_raw_loop_items_that_are_not_a_list_are_bad_input(cli, tmp_path: Path) -> None:
    package = tmp_path / "loops.yaml"
    compiler.Compiler().compile(control_flow.loops, str(package))
    package.write_text(package.read_text().replace("raw: '[\"a\", \"b\"]'", "raw: '\"ab\"'"))
    result = cli("run", package)
    assert result.code == 2
    assert "loops over '\"ab\"', which is not a JSON list" in result.err


def test_cel_condition_that_does_not_parse_is_bad_input(cli, tmp_path: Path) -> None:
    package = tmp_path / "branches.yaml"
    compiler.Compiler().compile(control_flow.branches, str(package))
    text = package.read_text()
    start = text.index("condition: ")
    end = text.index("\n", start)
    package.write_text(text[:start] + "condition: inputs.parameter_values[ ==" + text[end:])
    result = cli("run", package, "-p", "n=1")
    assert result.code == 2
    line = result.err.strip()
    assert line.startswith("error: ") and "\n" not in line
    assert "triggerPolicy.condition: CEL expression does not parse" in line


def _nested_dags(depth: int) -> dict:
    """An IR whose root holds a DAG holding a DAG … ``depth`` levels down, the last one empty."""

    def holding(level: int) -> dict:
        name = f"level-{level + 1}"
        return {"dag": {"tasks": {name: {"componentRef": {"name": f"comp-{name}"}, "taskInfo": {"name": name}}}}}

    components = {f"comp-level-{level}": holding(level) for level in range(1, depth)}
    components[f"comp-level-{depth}"] = {"dag": {"tasks": {}}}
    return {
        "pipelineInfo": {"name": "deep"}, "schemaVersion": "2.1.0", "sdkVersion": "kfp-2.7.0",
        "components": components, "root": holding(0), "deploymentSpec": {"executors": {}},
    }


def test_dags_nested_past_pythons_recursion_limit_run(cli, tmp_path: Path) -> None:
    """Sub-DAGs that end at once (empty here; all cache hits in an Argo recursion) are walked
    one at a time, not by nested calls: 1500 levels once overflowed the stack (RecursionError)."""
    package = tmp_path / "deep.yaml"
    package.write_text(yaml.safe_dump(_nested_dags(1500)))
    result = cli("run", package, "-o", "json")
    assert result.code == 0, result.err[-2000:]
    run = result.json()
    assert run["state"] == "SUCCEEDED"
    assert len(run["tasks"]) == 1500 and {t["state"] for t in run["tasks"]} == {"SUCCEEDED"}

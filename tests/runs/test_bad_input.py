"""Bad input: one clear line naming the problem, exit 2, no traceback, and no run recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PIPELINES

ADD = PIPELINES / "typed_params.py"


def _assert_rejected(cli, result, *fragments: str) -> None:
    assert result.code == 2, (result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.err
    for fragment in fragments:
        assert fragment in lines[0]
    assert result.out == ""
    listing = cli("runs", "list", "-o", "json")
    assert listing.json() == []


def test_missing_file(cli, tmp_path: Path) -> None:
    _assert_rejected(cli, cli("run", tmp_path / "nope.yaml"), "nope.yaml", "no such file")


def test_malformed_yaml(cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("root:\n  dag: [unclosed\n")
    _assert_rejected(cli, cli("run", bad), "bad.yaml:", "malformed YAML")


def test_malformed_json(cli, tmp_path: Path) -> None:
    """A JSON package goes through the stdlib parser; one it refuses is read again as YAML, which names the line."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"root": {"dag": [1, 2}}\n')
    _assert_rejected(cli, cli("run", bad), "bad.json:1:", "malformed YAML")


def test_a_json_package_runs_as_its_yaml_does(cli, tmp_path: Path) -> None:
    from kfp import compiler

    from tests.pipelines.typed_params import returns_int

    for suffix in ("yaml", "json"):  # the compiler writes JSON for a .json package
        compiler.Compiler().compile(returns_int, str(tmp_path / f"typed.{suffix}"))
    yaml_run, json_run = (cli("run", tmp_path / f"typed.{suffix}", "-o", "json") for suffix in ("yaml", "json"))
    assert (yaml_run.code, json_run.code) == (0, 0), json_run.err
    assert json_run.json()["outputs"] == yaml_run.json()["outputs"]
    assert json_run.json()["outputs"] == {"Output": 42}


def test_yaml_that_is_not_a_pipeline(cli, tmp_path: Path) -> None:
    other = tmp_path / "deploy.yaml"
    other.write_text("apiVersion: apps/v1\nkind: Deployment\n")
    _assert_rejected(cli, cli("run", other), "deploy.yaml", "not a KFP pipeline spec")


def test_unknown_field_in_ir(cli, tmp_path: Path) -> None:
    from kfp import compiler

    from tests.pipelines.typed_params import returns_int

    package = tmp_path / "p.yaml"
    compiler.Compiler().compile(returns_int, str(package))
    text = package.read_text().replace("pipelineInfo:\n", "pipelineInfo:\n  colour: blue\n", 1)
    package.write_text(text)
    _assert_rejected(cli, cli("run", package), "unknown field 'colour'", "pipelineInfo")


def test_reference_to_missing_component(cli, tmp_path: Path) -> None:
    from kfp import compiler

    from tests.pipelines.typed_params import returns_int

    package = tmp_path / "p.yaml"
    compiler.Compiler().compile(returns_int, str(package))
    package.write_text(package.read_text().replace("name: comp-add-one", "name: comp-gone"))
    _assert_rejected(cli, cli("run", package), "comp-gone", "not defined")


def test_missing_required_parameter(cli) -> None:
    _assert_rejected(cli, cli("run", ADD, "--pipeline", "typed_params"), "missing required parameter 'i'")


@pytest.mark.parametrize(
    ("assignment", "fragment"),
    [
        ("i=seven", "-p i: expected an integer, got 'seven'"),
        ("f=fast", "-p f: expected a number"),
        ("b=maybe", "-p b: expected a boolean"),
        ("l={\"a\": 1}", "-p l: expected a JSON list"),
        ("d=[1", "-p d: expected a JSON object, got invalid JSON"),
    ],
)
def test_value_of_the_wrong_type(cli, assignment: str, fragment: str) -> None:
    result = cli("run", ADD, "--pipeline", "typed_params", "-p", "i=1", "-p", assignment)
    _assert_rejected(cli, result, fragment)


def test_unknown_parameter_name(cli) -> None:
    result = cli("run", ADD, "--pipeline", "typed_params", "-p", "i=1", "-p", "colour=blue")
    _assert_rejected(cli, result, "-p colour: unknown parameter", "known: b, d, f, i, l, s")


def test_params_file_with_wrong_type(cli, tmp_path: Path) -> None:
    params = tmp_path / "params.json"
    params.write_text('{"i": "7"}')
    result = cli("run", ADD, "--pipeline", "typed_params", "--params-file", params)
    _assert_rejected(cli, result, "parameter 'i': expected an integer")


def test_params_file_malformed(cli, tmp_path: Path) -> None:
    params = tmp_path / "params.json"
    params.write_text('{"i": ')
    _assert_rejected(
        cli, cli("run", ADD, "--pipeline", "typed_params", "--params-file", params), "params.json:1:", "malformed JSON"
    )


def test_assignment_without_equals(cli) -> None:
    _assert_rejected(cli, cli("run", ADD, "--pipeline", "typed_params", "-p", "i"), "expected NAME=VALUE")


def test_python_file_with_syntax_error(cli, tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("from kfp import dsl\n\ndef oops(:\n")
    _assert_rejected(cli, cli("run", broken), "broken.py:3", "syntax error")


def test_python_file_without_pipeline(cli, tmp_path: Path) -> None:
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    _assert_rejected(cli, cli("run", empty), "no @dsl.pipeline function found")


def test_several_pipelines_need_a_choice(cli) -> None:
    _assert_rejected(cli, cli("run", ADD), "2 pipelines found", "--pipeline NAME")


def test_unknown_pipeline_choice(cli) -> None:
    _assert_rejected(cli, cli("run", ADD, "--pipeline", "nope"), "no pipeline named 'nope'")


def test_unsupported_pipeline_root(cli) -> None:
    result = cli("run", ADD, "--pipeline", "returns_int", "--pipeline-root", "ftp://host/x")
    _assert_rejected(cli, result, "--pipeline-root ftp://host/x", "unsupported scheme")


def test_unknown_run_id(cli) -> None:
    result = cli("runs", "get", "no-such-run")
    assert result.code == 2
    assert result.err.strip() == "error: no run with id 'no-such-run'"

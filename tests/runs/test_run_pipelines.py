"""Running kfp pipelines end to end through the CLI: parameters, artifacts, components, nesting."""

from __future__ import annotations

import json
from pathlib import Path

from kfp import compiler

from tests.conftest import PIPELINES, task
from tests.pipelines import artifacts, typed_params


def test_every_parameter_type_round_trips(cli) -> None:
    result = cli(
        "run", PIPELINES / "typed_params.py", "--pipeline", "typed_params",
        "-p", "i=7", "-p", "f=2.5", "-p", "s=a b=c", "-p", "b=true",
        "-p", 'l=[1, "x", {"y": 2}]', "-p", 'd={"nested": {"n": 1}}', "-o", "json",
    )
    assert result.code == 0, result.err
    data = result.json()
    assert data["state"] == "SUCCEEDED"
    expected = {"i": 7, "f": 2.5, "s": "a b=c", "b": True, "l": [1, "x", {"y": 2}], "d": {"nested": {"n": 1}}}
    assert data["outputs"]["Output"] == expected
    assert [t["state"] for t in data["tasks"]] == ["SUCCEEDED", "SUCCEEDED"]
    assert all(t["outputs"]["Output"] == expected for t in data["tasks"])


def test_defaults_and_params_file(cli, tmp_path: Path) -> None:
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"i": 3, "f": 4, "l": ["only"]}))
    result = cli(
        "run", PIPELINES / "typed_params.py", "--pipeline", "typed-params",
        "--params-file", params, "-p", "s=from-cli", "-o", "json",
    )
    assert result.code == 0, result.err
    output = result.json()["outputs"]["Output"]
    assert output == {"i": 3, "f": 4.0, "s": "from-cli", "b": False, "l": ["only"], "d": {"k": "v"}}
    assert isinstance(output["f"], float)


def test_pipeline_returning_int_is_a_json_number(cli) -> None:
    result = cli("run", PIPELINES / "typed_params.py", "--pipeline", "returns_int", "-o", "json")
    assert result.code == 0, result.err
    assert result.json()["outputs"] == {"Output": 42}
    assert result.out.count("\n{") == 0 and result.out.strip().startswith("{")  # exactly one JSON object


def test_artifacts_flow_between_lightweight_container_and_nested_tasks(cli) -> None:
    result = cli("run", PIPELINES / "artifacts.py", "-p", "text=pond", "-o", "json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["state"] == "SUCCEEDED"
    assert data["outputs"]["Output"] == "pond|4"
    inner = task(data, "inner")
    assert inner["kind"] == "dag"
    produced = Path(task(data, "produce")["outputs"]["data"])
    assert task(data, "produce")["path"] == "inner/produce"
    assert produced.read_text() == "pond"
    assert inner["outputs"]["Output"] == str(produced)
    model = Path(task(data, "consume")["outputs"]["model"])
    assert model.read_text() == "POND"
    assert Path(task(data, "copy-dataset")["outputs"]["dst"]).read_text() == "pondpond"
    assert task(data, "shout")["outputs"]["out"] == "pond|4!"
    assert task(data, "shout")["image"] == "alpine:3"


def test_compiled_yaml_runs_like_the_python_file(cli, tmp_path: Path) -> None:
    package = tmp_path / "artifacts.yaml"
    compiler.Compiler().compile(artifacts.artifacts_pipeline, str(package))
    result = cli("run", package, "-p", "text=yaml", "-o", "json")
    assert result.code == 0, result.err
    assert result.json()["outputs"]["Output"] == "yaml|4"


def test_independent_tasks_run_in_parallel(cli, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MILLPOND_MAX_PARALLEL", "2")  # the default is the CPU count, which may be 1
    result = cli("run", PIPELINES / "parallel.py", "-p", f"folder={tmp_path / 'barrier'}", "-o", "json")
    assert result.code == 0, result.err
    assert sorted(t["outputs"]["Output"] for t in result.json()["tasks"]) == ["a", "b"]


def test_packages_to_install_go_into_a_cached_venv(cli, home: Path) -> None:
    first = cli("run", PIPELINES / "with_packages.py", "-o", "json")
    assert first.code == 0, first.err
    assert first.json()["outputs"]["Output"] == "1,234,567"
    venvs = list((home / "venvs").glob("*/.millpond-ready"))
    assert len(venvs) == 1
    assert "humanize==4.9.0" in venvs[0].read_text()
    import importlib.util

    assert importlib.util.find_spec("humanize") is None  # not installed into millpond's own environment
    second = cli("run", PIPELINES / "with_packages.py", "-p", "n=1000", "-o", "json")
    assert second.json()["outputs"]["Output"] == "1,000"
    assert len(list((home / "venvs").glob("*/.millpond-ready"))) == 1  # reused


def test_typed_params_module_is_importable() -> None:
    # The pipelines used above are real kfp objects, compiled by kfp's own compiler.
    assert typed_params.typed_params.name == "typed-params"

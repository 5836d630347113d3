"""Names are not paths: a task key or pipeline name from the IR never leads millpond out of its folders.

Each refused case runs the real ``millpond run`` as a process over a home inside ``tmp_path``, with a
sentinel folder where a path escape would land: it must survive, and nothing may appear beside the home.
"""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from millpond.pipelines.launcher import TaskRequest, task_prefix
from millpond.pipelines.staging import OutputStaging
from millpond.settings import load_settings
from millpond.store.journal import DEFAULT_EXPERIMENT, open_journal
from millpond.store.paths import UnsafePath, contained_path, contained_uri, task_log_file
from tests.ir_support import (
    assert_refused,
    clone,
    compiled,
    list_runs,
    millpond,
    post_run,
    rename_task,
    write_ir,
    writer,
)
from tests.server_support import Served, module_home, serving


@pytest.fixture(scope="module")
def writer_ir(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return compiled(writer, tmp_path_factory.mktemp("ir"))


def _outside(tmp_path: Path) -> dict[str, Path]:
    """Everything directly in ``tmp_path`` (the home's parent) but the home, to compare before and after."""
    return {p.name: p for p in tmp_path.iterdir() if p.name != "home"}


def _sentinel(folder: Path) -> Path:
    """A folder (with a file) where an escaping artifact would be published, which must survive."""
    folder.mkdir(parents=True)
    (folder / "keep.txt").write_text("mine")
    return folder


def _task_key(value: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda spec: rename_task(spec, spec["root"], "write-folder", value)


def _pipeline_name(value: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def mutate(spec: dict[str, Any]) -> dict[str, Any]:
        spec["pipelineInfo"]["name"] = value
        return spec

    return mutate


# (id, mutation given tmp_path, fragments the error line must hold)
CASES: list[tuple[str, Callable[[Path], Callable[[dict[str, Any]], dict[str, Any]]], tuple[str, ...]]] = [
    ("task-dotdot", lambda tmp: _task_key("../../../../victim"), ("task name", "'../../../../victim'")),
    ("task-absolute", lambda tmp: _task_key(str(tmp / "victim")), ("task name", "/victim'")),
    ("task-slash", lambda tmp: _task_key("a/b"), ("task name", "'a/b'")),
    ("task-nul", lambda tmp: _task_key("a\x00b"), ("root.dag.tasks", "NUL")),
    ("task-dot", lambda tmp: _task_key(".."), ("task name", "'..'")),
    ("task-uppercase", lambda tmp: _task_key("Write_Folder"), ("task name", "'Write_Folder'")),
    ("task-too-long", lambda tmp: _task_key("a" * 300), ("root.dag.tasks", "longer than 253")),
    ("pipeline-dotdot", lambda tmp: _pipeline_name("../../victim"), ("pipelineInfo.name", "'../../victim'")),
    ("pipeline-absolute", lambda tmp: _pipeline_name(str(tmp / "victim")), ("pipelineInfo.name", "/victim'")),
    ("pipeline-nul", lambda tmp: _pipeline_name("a\x00b"), ("pipelineInfo.name", "NUL")),
    ("pipeline-slash", lambda tmp: _pipeline_name("a/b"), ("pipelineInfo.name", "'a/b'")),
    ("pipeline-too-long", lambda tmp: _pipeline_name("p" * 129), ("pipelineInfo.name",)),
]


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_bad_name_is_refused_before_the_run_and_nothing_outside_the_home_changes(
    case: tuple[str, Any, tuple[str, ...]], writer_ir: dict[str, Any], tmp_path: Path
) -> None:
    _, mutation, fragments = case
    home = tmp_path / "home"
    sentinel = _sentinel(tmp_path / "victim" / "out")  # where ../../../../victim would publish its artifact 'out'
    package = write_ir(mutation(tmp_path)(clone(writer_ir)), tmp_path / "pipeline.yaml")
    before = _outside(tmp_path)
    assert_refused(home, millpond(home, "run", package), *fragments)
    assert _outside(tmp_path) == before
    assert (sentinel / "keep.txt").read_text() == "mine"


def test_the_same_pipeline_with_good_names_runs(writer_ir: dict[str, Any], tmp_path: Path) -> None:
    """The control: the unmodified IR runs and publishes its artifact under the pipeline root."""
    home = tmp_path / "home"
    package = write_ir(clone(writer_ir), tmp_path / "pipeline.yaml")
    result = millpond(home, "run", package, "-o", "json")
    assert result.returncode == 0, result.stderr
    published = list((home / "artifacts" / "writer").glob("*/write-folder/out/file"))
    assert [p.read_text() for p in published] == ["hi\n"]


# --- the second line of defence: the path builders refuse to leave their root ---------------------


@pytest.mark.parametrize("name", ["../x", "..", ".", "", "/etc", "a/../../x", "a\x00b", "a\\b", "x" * 256])
def test_contained_path_refuses_names_that_leave_or_cannot_be_file_names(name: str, tmp_path: Path) -> None:
    with pytest.raises(UnsafePath):
        contained_path(tmp_path, name)
    with pytest.raises(UnsafePath):
        contained_uri("s3://bucket/prefix", name)


def test_contained_path_accepts_nested_names_below_the_root(tmp_path: Path) -> None:
    assert contained_path(tmp_path, "for-loop-2/iteration-0/train") == tmp_path / "for-loop-2" / "iteration-0" / "train"
    assert contained_uri("s3://bucket/root/", "p", "run", "a/b") == "s3://bucket/root/p/run/a/b"


def test_task_prefix_refuses_a_pipeline_name_or_task_path_that_leaves_the_root(tmp_path: Path) -> None:
    def request(pipeline_name: str, task_path: str) -> TaskRequest:
        return TaskRequest(
            run_id="r1", run_name="r", pipeline_name=pipeline_name, pipeline_root=str(tmp_path / "root"), task_id="t",
            task_name="t", task_path=task_path, component_spec={}, container={}, parameters={}, artifacts={},
            log_path=tmp_path / "log", staging_dir=tmp_path, venvs_dir=tmp_path,
        )

    assert task_prefix(request("p", "a/b")) == f"{tmp_path}/root/p/r1/a/b"
    for pipeline_name, task_path in [("..", "a"), ("p", "../../../x"), ("p/../..", "a"), ("p", "/abs")]:
        with pytest.raises(UnsafePath):
            task_prefix(request(pipeline_name, task_path))


def test_staging_refuses_an_output_uri_that_climbs_out_of_the_task_folder(tmp_path: Path) -> None:
    """A task's executor output names its artifacts' URIs.

    One that only starts with the task's prefix is not inside it.
    """
    prefix = str(tmp_path / "root" / "p" / "run" / "task")
    attempt = tmp_path / "attempt"
    attempt.mkdir()
    staging = OutputStaging(prefix, attempt, has_outputs=False, input_uris=[])
    assert staging.host_path(f"{prefix}/model") == staging.host_dir / "model"
    for uri in (f"{prefix}/../../../../victim", f"{prefix}/a/../../b", f"{prefix}/"):
        with pytest.raises(UnsafePath):
            staging.host_path(uri)


def test_task_log_file_stays_in_the_run_folder_and_fits_a_file_name(tmp_path: Path) -> None:
    assert task_log_file(tmp_path, "run", "loop/iteration-0/a") == tmp_path / "run" / "loop.iteration-0.a.log"
    long = task_log_file(tmp_path, "run", "/".join(["x" * 200] * 3))
    assert long.parent == tmp_path / "run" and len(long.name) <= 255
    for bad in ["../../x", "/abs", "a/../../b"]:
        with pytest.raises(UnsafePath):
            task_log_file(tmp_path, "run", bad)


def test_a_recorded_run_with_an_escaping_task_key_fails_that_task_and_touches_nothing_outside(
    writer_ir: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stored before names were checked (or by a future caller that skips the check) still cannot escape."""
    home = tmp_path / "home"
    monkeypatch.setenv("MILLPOND_HOME", str(home))
    sentinel = _sentinel(tmp_path / "victim" / "out")
    spec = clone(writer_ir)
    spec["root"]["dag"]["tasks"]["../../../../victim"] = spec["root"]["dag"]["tasks"].pop("write-folder")
    settings = load_settings()
    run = open_journal(settings.database_url).create_run(
        name="stored", experiment=DEFAULT_EXPERIMENT, pipeline_name="writer", pipeline_spec=spec, platform_spec=None,
        parameters={}, pipeline_root=str(settings.default_pipeline_root),
    )
    before = _outside(tmp_path)
    result = millpond(home, "runs", "resume", run.id, "-o", "json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["state"] == "FAILED"
    [failed] = report["tasks"]
    assert failed["state"] == "FAILED" and "'../../../../victim'" in failed["error"], failed
    assert _outside(tmp_path) == before
    assert (sentinel / "keep.txt").read_text() == "mine"


# --- the same refusals through the REST API ---------------------------------------------------------


@pytest.fixture(scope="module")
def api_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "names-api")


@pytest.fixture(scope="module")
def server(api_home: Path) -> Iterator[Served]:
    yield from serving()


@pytest.mark.parametrize(
    "mutation, field",
    [(_task_key("../../../../victim"), "task name"), (_pipeline_name("../../victim"), "pipelineInfo.name"),
     (_pipeline_name("a\x00b"), "pipelineInfo.name")],
    ids=["task-dotdot", "pipeline-dotdot", "pipeline-nul"],
)
def test_api_refuses_bad_names_with_400(
    mutation: Callable[[dict[str, Any]], dict[str, Any]], field: str, writer_ir: dict[str, Any], server: Served,
    api_home: Path,
) -> None:
    status, body = post_run(server.url, mutation(clone(writer_ir)))
    assert status == 400, body
    assert field in body["message"]
    assert list_runs(server.url) == []
    assert sorted(p.name for p in api_home.parent.iterdir()) == ["home"]

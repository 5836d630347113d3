"""IR the KFP backend would reject must be refused before a run: cycles, string commands, dangling references.

Each case mutates what the real kfp compiler wrote and runs ``millpond run`` as a process: exit 2, one
``error:`` line naming the problem, and no run recorded. The same IR posted to the REST API gets a 400.
"""

# no "from __future__ import annotations": kfp reads the components' annotations as types

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from millpond.pipelines.ir import find_cycle
from tests.ir_support import (
    assert_refused,
    clone,
    compiled,
    list_runs,
    loop_component,
    millpond,
    post_run,
    shapes,
    write_ir,
)
from tests.server_support import Served, module_home, serving

Mutation = Callable[[dict[str, Any]], dict[str, Any]]


@pytest.fixture(scope="module")
def shapes_ir(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return compiled(shapes, tmp_path_factory.mktemp("ir"))


def _root(spec: dict[str, Any]) -> dict[str, Any]:
    return spec["root"]["dag"]["tasks"]


def _after(task: dict[str, Any], *names: str) -> None:
    task["dependentTasks"] = [*task.get("dependentTasks", []), *names]


def two_task_cycle(spec: dict[str, Any]) -> dict[str, Any]:
    _after(_root(spec)["third"], "fourth")
    _after(_root(spec)["fourth"], "third")
    return spec


def self_cycle(spec: dict[str, Any]) -> dict[str, Any]:
    _after(_root(spec)["third"], "third")
    return spec


def data_cycle(spec: dict[str, Any]) -> dict[str, Any]:
    """first's input now comes from second, which already takes first's output."""
    _root(spec)["first"]["inputs"]["parameters"]["text"] = {
        "taskOutputParameter": {"producerTask": "second", "outputParameterKey": "out"}
    }
    return spec


def loop_body_cycle(spec: dict[str, Any]) -> dict[str, Any]:
    """Inside the ParallelFor's sub-DAG: third-2 after fourth-2, which takes third-2's output."""
    _, body = loop_component(spec)
    _after(body["dag"]["tasks"]["third-2"], "fourth-2")
    return spec


def string_command(spec: dict[str, Any]) -> dict[str, Any]:
    spec["deploymentSpec"]["executors"]["exec-first"]["container"]["command"] = "sh -c 'echo hi'"
    return spec


def string_args(spec: dict[str, Any]) -> dict[str, Any]:
    spec["deploymentSpec"]["executors"]["exec-second"]["container"]["args"] = "hello"
    return spec


def missing_dependency(spec: dict[str, Any]) -> dict[str, Any]:
    _after(_root(spec)["third"], "ghost")
    return spec


def missing_producer(spec: dict[str, Any]) -> dict[str, Any]:
    _root(spec)["second"]["inputs"]["parameters"]["text"]["taskOutputParameter"]["producerTask"] = "ghost"
    return spec


def missing_final_status_producer(spec: dict[str, Any]) -> dict[str, Any]:
    _root(spec)["third"]["inputs"]["parameters"]["status"] = {"taskFinalStatus": {"producerTask": "ghost"}}
    return spec


CASES: list[tuple[str, Mutation, tuple[str, ...]]] = [
    ("two-task-cycle", two_task_cycle, ("root DAG has a cycle: ", "third", "fourth", " → ")),
    ("self-cycle", self_cycle, ("root DAG has a cycle: third → third",)),
    ("data-cycle", data_cycle, ("root DAG has a cycle: ", "first", "second")),
    ("loop-body-cycle", loop_body_cycle, ("DAG of component 'comp-for-loop-2' has a cycle: ", "third-2", "fourth-2")),
    ("string-command", string_command, ("executor 'exec-first'", "command must be a list of strings", "str")),
    ("string-args", string_args, ("executor 'exec-second'", "args must be a list of strings")),
    ("missing-dependency", missing_dependency, ("root.dag.tasks[third]", "'ghost'")),
    ("missing-producer", missing_producer, ("root.dag.tasks[second]", "'ghost'")),
    ("missing-final-status-producer", missing_final_status_producer, ("root.dag.tasks[third]", "'ghost'")),
]


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_cli_refuses_before_the_run(
    case: tuple[str, Mutation, tuple[str, ...]], shapes_ir: dict[str, Any], tmp_path: Path
) -> None:
    _, mutation, fragments = case
    home = tmp_path / "home"
    package = write_ir(mutation(clone(shapes_ir)), tmp_path / "pipeline.yaml")
    line = assert_refused(home, millpond(home, "run", package), "pipeline.yaml", *fragments)
    assert len(line) < 400


def test_the_unmodified_pipeline_runs(shapes_ir: dict[str, Any], tmp_path: Path) -> None:
    """The control: what the mutations start from is a valid pipeline that succeeds."""
    home = tmp_path / "home"
    result = millpond(home, "run", write_ir(clone(shapes_ir), tmp_path / "pipeline.yaml"))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "graph, cycle",
    [
        ({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]),
        ({"a": {"a"}}, ["a", "a"]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}, ["a", "b", "c", "a"]),
        ({"a": set(), "b": {"a"}, "c": {"a", "b"}}, None),
        ({f"t{i}": {f"t{i + 1}"} for i in range(5000)} | {"t5000": set()}, None),  # deep, but no recursion limit
    ],
)
def test_find_cycle(graph: dict[str, set[str]], cycle: list[str] | None) -> None:
    assert find_cycle(graph) == cycle


# --- the REST API ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def api_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "ir-api")


@pytest.fixture(scope="module")
def server(api_home: Path) -> Iterator[Served]:
    yield from serving()


@pytest.mark.parametrize(
    "mutation, fragment",
    [(two_task_cycle, "has a cycle"), (loop_body_cycle, "has a cycle"), (string_command, "exec-first"),
     (missing_final_status_producer, "ghost")],
    ids=["two-task-cycle", "loop-body-cycle", "string-command", "missing-final-status-producer"],
)
def test_api_refuses_with_400(mutation: Mutation, fragment: str, shapes_ir: dict[str, Any], server: Served) -> None:
    status, body = post_run(server.url, mutation(clone(shapes_ir)))
    assert status == 400, body
    assert fragment in body["message"]
    assert list_runs(server.url) == []

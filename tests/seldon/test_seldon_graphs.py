"""SeldonDeployments whose graph has several units, walked per request by millpond's executor as Seldon's is.

The custom units are small Python programs speaking Seldon's microservice REST protocol (what the seldon-core
Python wrapper serves: ``POST /predict``, ``/transform-input``, ``/route``, ``/aggregate`` with a SeldonMessage),
run as componentSpecs containers with commands, each a revision of its own; a SKLEARN_SERVER unit is millpond's
model server. Answers are what Seldon's executor computes (``predictor_process.go``): a TRANSFORMER before its
children, a ROUTER's child alone, a COMBINER over every child's answer in order; ``meta.routing`` and
``meta.requestPath`` name the walk. A unit's error answer is the request's (Seldon's status shape); a unit
killed with -9 leaves the deployment not Available until it answers again; the built-in RANDOM_ABTEST,
AVERAGE_COMBINER, SIMPLE_ROUTER and SIMPLE_MODEL need no container.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond.serving import endpoints
from millpond.serving.seldon.lifecycle import supervisors, wait_available
from millpond.store.resources import ResourceStore
from tests.conftest import _end_background_processes
from tests.server_support import Served, call, module_home, serving
from tests.serving_support import train_digits

SDEP = "seldondeployment.machinelearning.seldon.io"
KIND = "SeldonDeployment"
SKLEARN_IMAGE = "seldonio/sklearnserver:1.17.1"

# One program, five roles: ``model FACTOR`` (each row's sum times FACTOR, 1-D; a negative input is refused as
# Seldon's wrapper refuses bad data), ``transformer FACTOR`` (every value times FACTOR), ``output FACTOR`` (a
# 1-D answer's values times FACTOR, its meta kept, as Seldon's wrapper keeps it), ``router THRESHOLD``
# (child 1 when the first feature of the first row is above THRESHOLD, else 0), ``combiner`` (the mean of its
# children's answers, row by row). A third argument names a marker file: a restart then starts 3 s late.
UNIT = r'''
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

role, arg = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
if len(sys.argv) > 3:
    if os.path.exists(sys.argv[3]):
        time.sleep(3)
    open(sys.argv[3], "a").close()


class Unit(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if role == "model" and self.path == "/predict":
            rows = message["data"]["ndarray"]
            if any(v < 0 for row in rows for v in row):
                return self.answer(400, {"status": {"code": 400, "info": "negative input",
                                                    "reason": "MICROSERVICE_BAD_DATA", "status": "FAILURE"}})
            return self.answer(200, {"data": {"names": [], "ndarray": [sum(row) * arg for row in rows]}, "meta": {}})
        if role == "transformer" and self.path == "/transform-input":
            rows = message["data"]["ndarray"]
            return self.answer(200, {"data": {"names": [], "ndarray": [[v * arg for v in row] for row in rows]}})
        if role == "output" and self.path == "/transform-output":
            return self.answer(200, {"data": {"names": [], "ndarray": [v * arg for v in message["data"]["ndarray"]]},
                                     "meta": message.get("meta", {})})
        if role == "router" and self.path == "/route":
            return self.answer(200, {"data": {"ndarray": [[1 if message["data"]["ndarray"][0][0] > arg else 0]]}})
        if role == "combiner" and self.path == "/aggregate":
            answers = [m["data"]["ndarray"] for m in message["seldonMessages"]]
            return self.answer(200, {"data": {"names": [], "ndarray": [sum(c) / len(c) for c in zip(*answers)]}})
        self.answer(404, {"error": role + " does not serve " + self.path})

    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


ThreadingHTTPServer(("127.0.0.1", int(os.environ["PREDICTIVE_UNIT_HTTP_PORT"])), Unit).serve_forever()
'''


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    for path in module_home(tmp_path_factory, "seldon-graphs"):
        yield path
        _end_background_processes(path)


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[Served]:
    yield from serving()


@pytest.fixture(scope="module")
def unit_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("units") / "unit.py"
    path.write_text(UNIT)
    return path


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, Any]:
    return train_digits(tmp_path_factory.mktemp("digits"))


def _container(program: Path, name: str, *args: str) -> dict[str, Any]:
    return {"name": name, "command": [sys.executable, str(program), *args]}


def _apply(cli: Any, tmp_path: Path, name: str, predictor: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "machinelearning.seldon.io/v1", "kind": KIND,
                                    "metadata": {"name": name}, "spec": {"predictors": [predictor]}}))
    result = cli("apply", "-f", path)
    assert result.code == 0 and result.out.strip() == f"{SDEP}/{name} created", result.err
    return wait_available(ResourceStore(), name, "default", 90)


def _predict(server: Served, name: str, rows: Any) -> tuple[int, Any]:
    return call(server.url, "POST", f"/seldon/default/{name}/api/v1.0/predictions", body={"data": {"ndarray": rows}})


def _state(name: str) -> str:
    found = ResourceStore().get(KIND, name, "default")
    return str((found.status or {}).get("state")) if found is not None else ""


def test_transformer_router_and_two_models(cli, server: Served, unit_program: Path, tmp_path: Path) -> None:
    """OUTPUT_TRANSFORMER (×0.5, after its child) → TRANSFORMER (×2) → ROUTER (first feature above 5: child 1) →
    MODEL a (sum) | MODEL b (sum ×10): the answer,
    ``meta.routing`` and ``meta.requestPath`` as Seldon's executor builds them, through the gateway and the
    deployment's own address; a unit's 400 is the request's, in Seldon's shape; the status counts every unit."""
    predictor = {"name": "default", "componentSpecs": [{"spec": {"containers": [
        _container(unit_program, "transformer", "transformer", "2"), _container(unit_program, "router", "router", "5"),
        _container(unit_program, "model-a", "model", "1"), _container(unit_program, "model-b", "model", "10"),
        _container(unit_program, "output", "output", "0.5")]}}],
        "graph": {"name": "output", "type": "OUTPUT_TRANSFORMER", "children": [
            {"name": "transformer", "type": "TRANSFORMER", "children": [
                {"name": "router", "type": "ROUTER", "children": [
                    {"name": "model-a", "type": "MODEL"}, {"name": "model-b", "type": "MODEL"}]}]}]}}
    url = _apply(cli, tmp_path, "routed", predictor)
    shown = ResourceStore().get(KIND, "routed", "default")
    assert shown is not None and shown.status["state"] == "Available" and shown.status["address"]["url"] == url

    code, answer = _predict(server, "routed", [[1, 2]])  # ×2 → [[2, 4]]: 2 ≤ 5, model a: 6, ×0.5: 3
    assert code == 200, answer
    assert answer["data"] == {"names": [], "ndarray": [3.0]}
    assert answer["meta"]["routing"] == {"output": -1, "transformer": -1, "router": 0, "model-a": -1}
    assert answer["meta"]["requestPath"] == {"transformer": "", "model-a": "", "output": ""}
    code, answer = call(url.removesuffix("/api/v1.0/predictions"), "POST", "/api/v1.0/predictions",
                        body={"data": {"ndarray": [[4, 1]]}})  # ×2 → [[8, 2]]: 8 > 5, model b: 100, ×0.5: 50
    assert (code, answer["data"]["ndarray"], answer["meta"]["routing"]) == (
        200, [50.0], {"output": -1, "transformer": -1, "router": 1, "model-b": -1})

    code, refused = _predict(server, "routed", [[-1, 1]])
    assert code == 400 and refused == {"status": {"code": 400, "info": "negative input",
                                                  "reason": "MICROSERVICE_BAD_DATA", "status": "FAILURE"}}
    code, refused = call(server.url, "POST", "/seldon/default/routed/api/v1.0/predictions", body=["no", "message"])
    assert code == 400 and refused["status"]["status"] == "FAILURE"

    found = endpoints.read("default", "routed", KIND)
    assert found is not None
    assert {r.name: r.percent for r in found.revisions} == {
        "routed-default": 100, "routed-default-output": 0, "routed-default-transformer": 0,
        "routed-default-router": 0, "routed-default-model-a": 0, "routed-default-model-b": 0}
    assert cli("delete", "sdep", "routed").code == 0 and supervisors("routed") == []


def test_combiner_over_a_custom_model_and_a_sklearn_server(cli, server: Served, unit_program: Path,
                                                           digits: tuple[Path, Any, Any], tmp_path: Path) -> None:
    """COMBINER (the mean) over a custom MODEL (each row's sum) and a SKLEARN_SERVER (``predict``: the class): the
    mean of both, each unit in ``requestPath``; a unit killed with -9 leaves the deployment not Available until
    it answers again (its restart is slow on purpose), then the graph answers as before."""
    model_dir, model, rows = digits
    marker = tmp_path / "model-a.started"
    predictor = {"name": "default", "componentSpecs": [{"spec": {"containers": [
        _container(unit_program, "combiner", "combiner"),
        _container(unit_program, "model-a", "model", "1", str(marker))]}}],
        "graph": {"name": "combiner", "type": "COMBINER", "children": [
            {"name": "model-a", "type": "MODEL"},
            {"name": "classifier", "type": "MODEL", "implementation": "SKLEARN_SERVER", "modelUri": f"file://{model_dir}",
             "parameters": [{"name": "method", "value": "predict", "type": "STRING"}]}]}}
    _apply(cli, tmp_path, "combined", predictor)
    expected = ((rows[:3].sum(axis=1) + model.predict(rows[:3])) / 2).tolist()
    code, answer = _predict(server, "combined", rows[:3].tolist())
    assert code == 200, answer
    assert answer["data"]["ndarray"] == pytest.approx(expected)
    assert answer["meta"]["requestPath"] == {"model-a": "", "classifier": SKLEARN_IMAGE, "combiner": ""}
    assert answer["meta"]["routing"] == {"combiner": -1, "model-a": -1, "classifier": -1}

    found = endpoints.read("default", "combined", KIND)
    assert found is not None
    [unit] = [r for r in found.extra["replicas"] if r["revision"] == "combined-default-model-a"]
    os.kill(unit["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 20
    while _state("combined") == "Available":
        assert time.monotonic() < deadline, "still Available with a unit killed"
        time.sleep(0.05)
    down = (ResourceStore().get(KIND, "combined", "default") or pytest.fail("gone")).status
    # Creating while it restarts (Failed, CrashLoopBackOff, between its exit and its restart): the unit named
    assert down["state"] in ("Creating", "Failed") and "combined-default-model-a" in down["description"]
    assert "address" not in down
    deadline = time.monotonic() + 60
    while _state("combined") != "Available":
        assert time.monotonic() < deadline, "not Available again once the unit restarted"
        time.sleep(0.1)
    code, answer = _predict(server, "combined", rows[:3].tolist())
    assert code == 200 and answer["data"]["ndarray"] == pytest.approx(expected)
    assert cli("delete", "sdep", "combined").code == 0 and supervisors("combined") == []


def test_built_in_units(cli, server: Served, unit_program: Path, tmp_path: Path) -> None:
    """AVERAGE_COMBINER over a MODEL and a RANDOM_ABTEST (``ratioA`` 0: always child 1), computed in the executor;
    a graph of built-ins only (SIMPLE_ROUTER → SIMPLE_MODEL) runs no unit at all; a unit's error answer that is
    no SeldonMessage is put in Seldon's status shape."""
    predictor = {"name": "default", "componentSpecs": [{"spec": {"containers": [
        _container(unit_program, "model-a", "model", "1"), _container(unit_program, "model-b", "model", "10"),
        _container(unit_program, "model-c", "model", "100")]}}],
        "graph": {"name": "average", "type": "COMBINER", "implementation": "AVERAGE_COMBINER", "children": [
            {"name": "model-a", "type": "MODEL"},
            {"name": "abtest", "type": "ROUTER", "implementation": "RANDOM_ABTEST",
             "parameters": [{"name": "ratioA", "value": "0.0", "type": "FLOAT"}],
             "children": [{"name": "model-c", "type": "MODEL"}, {"name": "model-b", "type": "MODEL"}]}]}}
    _apply(cli, tmp_path, "builtins", predictor)
    for _ in range(3):
        code, answer = _predict(server, "builtins", [[1, 2], [3, 4]])
        assert code == 200, answer
        assert answer["data"] == {"names": [], "ndarray": [16.5, 38.5]}  # mean(3, 30), mean(7, 70)
        assert answer["meta"]["routing"] == {"average": -1, "model-a": -1, "abtest": 1, "model-b": -1}
    assert cli("delete", "sdep", "builtins").code == 0

    simple = {"name": "default", "graph": {"name": "router", "type": "ROUTER", "implementation": "SIMPLE_ROUTER",
                                           "children": [{"name": "simple", "type": "MODEL",
                                                         "implementation": "SIMPLE_MODEL"}]}}
    _apply(cli, tmp_path, "simple", simple)
    code, answer = _predict(server, "simple", [[1.0]])
    assert code == 200 and answer["data"] == {"names": ["class0", "class1", "class2"],
                                              "tensor": {"shape": [1, 3], "values": [0.1, 0.9, 0.5]}}
    assert answer["meta"]["routing"] == {"router": 0, "simple": -1}
    found = endpoints.read("default", "simple", KIND)
    assert found is not None and [r.name for r in found.revisions] == ["simple-default"]
    assert cli("delete", "sdep", "simple").code == 0

    # a TRANSFORMER whose container serves no /transform-input: its 404 is the request's, in Seldon's shape
    wrong = {"name": "default", "componentSpecs": [{"spec": {"containers": [
        _container(unit_program, "wrong", "model", "1")]}}],
        "graph": {"name": "wrong", "type": "TRANSFORMER", "children": [
            {"name": "simple", "type": "MODEL", "implementation": "SIMPLE_MODEL"}]}}
    _apply(cli, tmp_path, "wrong", wrong)
    code, answer = _predict(server, "wrong", [[1.0]])
    assert code == 404 and answer["status"]["code"] == 404 and answer["status"]["status"] == "FAILURE"
    assert answer["status"]["info"].startswith("unit wrong answered HTTP 404")
    assert cli("delete", "sdep", "wrong").code == 0

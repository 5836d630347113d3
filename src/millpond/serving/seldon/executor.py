"""``python -m millpond.serving.seldon.executor``: Seldon's executor for one predictor, walking its graph per request.

Seldon Core v1 puts its executor (``seldon-container-engine``) in front of a predictor's units; it is told the
predictor in ``ENGINE_PREDICTOR`` (the predictor's JSON, base64), and so is this one, with ``DEPLOYMENT_NAME``,
``DEPLOYMENT_NAMESPACE``, ``PREDICTOR_ID`` and the port (``ENGINE_SERVER_PORT``). The SeldonDeployment's
supervisor runs it as the predictor's revision (the traffic reaches it) and each unit as a revision of its own
(``graph.unit_revision``), whose replicas it finds in the deployment's endpoints at each call.

Each ``POST …/predictions`` walks the graph as ``predictor_process.go``'s ``Predict`` does, from the root:

- transform the input: a MODEL unit is asked ``/predict``, a TRANSFORMER ``/transform-input`` (or a unit whose
  ``methods`` name TRANSFORM_INPUT), else the message goes on as it is;
- its children, if any: the route first (a ROUTER is asked ``/route``: the first number of its answer; the
  built-in RANDOM_ABTEST and SIMPLE_ROUTER decide here; any other unit -1): -1 sends the message to every
  child (concurrently, answers kept in the children's order), -2 to none (the message is the answer), N to child
  N alone; then the aggregate: a COMBINER is asked ``/aggregate`` with ``{"seldonMessages": [answers]}`` (the
  built-in AVERAGE_COMBINER averages here), any other unit passes on its first child's answer;
- transform the output: an OUTPUT_TRANSFORMER is asked ``/transform-output``.

The unit endpoints are those of Seldon's Python wrapper (a custom container speaks them, with a SeldonMessage
body); a prepackaged unit (SKLEARN_SERVER, MLFLOW_SERVER: millpond's model server) is asked its Seldon
prediction path, ``/api/v1.0/predictions``, which answers what the wrapper's ``/predict`` does. The built-in
units are ``builtin_units``'.

``meta.routing`` is filled as Seldon fills it with ``SELDON_ENABLE_ROUTING_INJECTION`` set (a simplification:
always here): each unit asked to transform or combine is -1, a unit with children the route it took.
``meta.requestPath`` holds every unit asked, ``{unit: image}``, as Seldon's Python wrapper builds it (the
request's entries kept, the unit's own added): a unit that answers without it is named here.

A unit that answers an error fails the request with that status and its body (Seldon's ``respondWithError``;
a body that is not a SeldonMessage status is put in one: ``{"status": {"code", "info", "reason", "status"}}``); a
unit with no replica that answers is a 503, a router that names no child a 500, a body that is no JSON object a 400.
Feedback, metadata and the gRPC and v2 protocols are not served by this executor.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from millpond.errors import MillpondError, UserError
from millpond.serving import endpoints
from millpond.serving.protocols.seldon import seldon_error
from millpond.serving.protocols.tensors import MAX_BODY_BYTES, BodyTooLarge, read_body
from millpond.serving.seldon import builtin_units
from millpond.serving.seldon.graph import IMAGES, UNKNOWN, unit_images, unit_revision
from millpond.serving.seldon.kinds import KIND

ROUTE_ALL, ROUTE_NONE = -1, -2  # predictor_process.go's routeToAllChildren, routeToNoChildren
PATHS = {"predict": "/predict", "transform-input": "/transform-input", "transform-output": "/transform-output",
         "route": "/route", "aggregate": "/aggregate"}
PREPACKAGED_PREDICT = "/api/v1.0/predictions"  # millpond's model server answers Seldon's predict there
CONNECT_TIMEOUT_S = 2.0
ANSWER_TIMEOUT_S = 300.0


class UnitFailed(MillpondError):
    """A unit's error answer (or none): the status and body the whole request answers with."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status)
        self.status, self.body = status, body


@dataclass(frozen=True)
class Deployment:
    """Who this executor serves: the deployment, the predictor (as written) and each unit's image."""

    namespace: str
    name: str
    predictor_name: str
    predictor: dict[str, Any]
    images: dict[str, str]


@dataclass
class Walk:
    """One request's walk: the routing it took (``meta.routing``)."""

    routing: dict[str, int] = field(default_factory=dict)


def _methods(unit: dict[str, Any]) -> set[str]:
    return {str(m) for m in unit.get("methods") or []}


class Executor:
    """The graph walk of ``predictor_process.go``, over the units' replicas named in the endpoints."""

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self._turns = itertools.count()
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT_S, sock_read=ANSWER_TIMEOUT_S),
                trust_env=False)
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def predict(self, unit: dict[str, Any], message: dict[str, Any], walk: Walk) -> dict[str, Any]:
        """``Predict``: transform the input, the children, transform the output."""
        kind = unit.get("type") or ""
        methods = _methods(unit)
        if kind == "TRANSFORMER" or "TRANSFORM_INPUT" in methods:
            message = await self.call(unit, "transform-input", message)
            walk.routing[unit["name"]] = ROUTE_ALL
        elif kind == "MODEL":
            message = await self.call(unit, "predict", message)
            walk.routing[unit["name"]] = ROUTE_ALL
        message = await self.children(unit, message, walk)
        if kind == "OUTPUT_TRANSFORMER" or "TRANSFORM_OUTPUT" in methods:
            message = await self.call(unit, "transform-output", message)
        return message

    async def children(self, unit: dict[str, Any], message: dict[str, Any], walk: Walk) -> dict[str, Any]:
        """``predictChildren``: the route, the children it names, their aggregate."""
        children = unit.get("children") or []
        if not children:
            return message
        route = await self.route(unit, message)
        if route == ROUTE_NONE:
            walk.routing[unit["name"]] = ROUTE_NONE
            return message
        if route == ROUTE_ALL:
            answers = list(await asyncio.gather(*(self.predict(child, message, walk) for child in children)))
        elif 0 <= route < len(children):
            answers = [await self.predict(children[route], message, walk)]
        else:
            raise UnitFailed(500, seldon_error(f"unit {unit['name']}: route {route} names no child (it has "
                                               f"{len(children)})", 500))
        walk.routing[unit["name"]] = route
        return await self.aggregate(unit, answers, walk)

    async def route(self, unit: dict[str, Any], message: dict[str, Any]) -> int:
        implementation = unit.get("implementation") or UNKNOWN
        if implementation == "RANDOM_ABTEST":
            return builtin_units.ab_test_route(unit)
        if implementation == "SIMPLE_ROUTER":
            return 0
        if unit.get("type") == "ROUTER" or "ROUTE" in _methods(unit):
            return builtin_units.route_of(await self.call(unit, "route", message), f"unit {unit['name']}")
        return ROUTE_ALL

    async def aggregate(self, unit: dict[str, Any], answers: list[dict[str, Any]], walk: Walk) -> dict[str, Any]:
        if unit.get("implementation") == "AVERAGE_COMBINER":
            walk.routing[unit["name"]] = ROUTE_ALL
            return builtin_units.average(answers, f"unit {unit['name']}")
        if unit.get("type") == "COMBINER" or "AGGREGATE" in _methods(unit):
            walk.routing[unit["name"]] = ROUTE_ALL
            combined = await self.call(unit, "aggregate", {"seldonMessages": answers})
            paths = {k: v for answer in answers for k, v in _request_path(answer).items()}
            return _with_path(combined, {**paths, **_request_path(combined)}, unit["name"], self._image(unit))
        return answers[0]

    # --- calling a unit ----------------------------------------------------------------------------------
    def _image(self, unit: dict[str, Any]) -> str:
        return self.deployment.images.get(unit["name"], "")

    async def call(self, unit: dict[str, Any], method: str, message: dict[str, Any]) -> dict[str, Any]:
        """One unit's answer to ``method``: in this process for a built-in, else from one of its replicas."""
        implementation = unit.get("implementation") or UNKNOWN
        if implementation == "SIMPLE_MODEL":
            return builtin_units.simple_model()
        if implementation in ("SIMPLE_ROUTER", "RANDOM_ABTEST", "AVERAGE_COMBINER"):
            return message  # a built-in router or combiner transforms nothing
        path = PREPACKAGED_PREDICT if implementation in IMAGES else PATHS[method]
        answer = await self._post(unit["name"], path, message)
        if method == "route":
            return answer
        if not isinstance(answer, dict):
            raise UnitFailed(500, seldon_error(f"unit {unit['name']}: {method} answered no SeldonMessage", 500))
        incoming = _request_path(message) if method != "aggregate" else {}
        return _with_path(answer, {**incoming, **_request_path(answer)}, unit["name"], self._image(unit))

    def _replicas(self, unit: str) -> tuple[str, ...]:
        d = self.deployment
        # the file as written, its supervisor's liveness unchecked: a confined executor sees its own /proc only
        found = endpoints.read_file(d.namespace, d.name, KIND)
        wanted = unit_revision(d.name, d.predictor_name, unit)
        for revision in found.revisions if found is not None else ():
            if revision.name == wanted:
                return revision.replicas
        return ()

    async def _post(self, unit: str, path: str, message: dict[str, Any]) -> Any:
        replicas = self._replicas(unit)
        if not replicas:
            raise UnitFailed(503, seldon_error(f"unit {unit} has no ready replica", 503))
        base = replicas[next(self._turns) % len(replicas)]
        try:
            async with self.session().post(base + path, json=message) as answer:
                text = await answer.text()
                status = answer.status
        except aiohttp.ClientConnectorError:
            raise UnitFailed(503, seldon_error(f"unit {unit}: no replica answers (connection refused)", 503)) from None
        except asyncio.TimeoutError:
            raise UnitFailed(504, seldon_error(f"unit {unit}: the replica did not answer in time", 504)) from None
        except aiohttp.ClientError as exc:
            raise UnitFailed(502, seldon_error(f"unit {unit}: the replica failed: {exc}", 502)) from None
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if status != 200:
            if isinstance(body, dict) and isinstance(body.get("status"), dict):
                raise UnitFailed(status, body)
            raise UnitFailed(status, seldon_error(f"unit {unit} answered HTTP {status}: {text[:500]}", status))
        if body is None:
            raise UnitFailed(500, seldon_error(f"unit {unit} answered no JSON: {text[:200]!r}", 500))
        return body


def _request_path(message: Any) -> dict[str, str]:
    meta = message.get("meta") if isinstance(message, dict) else None
    found = meta.get("requestPath") if isinstance(meta, dict) else None
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def _with_path(message: dict[str, Any], path: dict[str, str], unit: str, image: str) -> dict[str, Any]:
    """``message`` with ``meta.requestPath`` naming ``path`` and the unit that answered it."""
    found = message.get("meta")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    return {**message, "meta": {**meta, "requestPath": {**path, unit: path.get(unit, image)}}}


class ExecutorApp:
    """The executor's HTTP side: ``POST …/predictions`` walks the graph; ``/ready``, ``/live`` answer; else 404."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor

    def asgi(self) -> Starlette:
        @contextlib.asynccontextmanager
        async def lifespan(_: Starlette) -> AsyncIterator[None]:
            yield
            await self.executor.aclose()

        methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
        return Starlette(routes=[Route("/{path:path}", self.answer, methods=methods)], lifespan=lifespan)

    async def answer(self, request: Request) -> Response:
        if not request.url.path.endswith("/predictions"):
            if request.url.path in ("/ready", "/live", "/api/v1.0/health/status"):
                return JSONResponse({"status": "ok"})
            return JSONResponse(seldon_error(f"{request.url.path}: not served by the executor", 404), status_code=404)
        if request.method != "POST":
            return JSONResponse(seldon_error("predictions: POST a SeldonMessage", 405), status_code=405)
        try:
            message = json.loads(await read_body(request, MAX_BODY_BYTES))
        except BodyTooLarge as exc:
            return JSONResponse(seldon_error(str(exc), 413), status_code=413)
        except ValueError as exc:
            return JSONResponse(seldon_error(f"the request is no JSON: {exc}", 400), status_code=400)
        if not isinstance(message, dict):
            return JSONResponse(seldon_error("the request is no SeldonMessage (a JSON object)", 400), status_code=400)
        walk = Walk()
        try:
            answer = await self.executor.predict(self.executor.deployment.predictor.get("graph") or {}, message, walk)
        except UnitFailed as exc:
            return JSONResponse(exc.body, status_code=exc.status)
        except UserError as exc:
            return JSONResponse(seldon_error(str(exc), 500), status_code=500)
        found = answer.get("meta")
        meta: dict[str, Any] = found if isinstance(found, dict) else {}
        return JSONResponse({**answer, "meta": {**meta, "routing": walk.routing}})


def deployment_from_env(env: dict[str, str]) -> Deployment:
    """What Seldon's operator tells its executor, read back; UserError naming what is missing."""
    try:
        predictor = json.loads(base64.b64decode(env["ENGINE_PREDICTOR"]))
        return Deployment(env["DEPLOYMENT_NAMESPACE"], env["DEPLOYMENT_NAME"], env["PREDICTOR_ID"], predictor,
                          unit_images(predictor))
    except KeyError as exc:
        raise UserError(f"the executor needs {exc.args[0]} in its environment") from None
    except ValueError as exc:
        raise UserError(f"ENGINE_PREDICTOR is not a base64 predictor: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    import uvicorn  # noqa: PLC0415 - loaded only by the executor's process

    del argv
    try:
        deployment = deployment_from_env(dict(os.environ))
        port = int(os.environ.get("ENGINE_SERVER_PORT") or os.environ.get("PORT") or "")
    except (UserError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    app = ExecutorApp(Executor(deployment)).asgi()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="on")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

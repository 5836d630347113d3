"""The Open Inference Protocol (KServe's v2 protocol, also Triton's and MLServer's), REST form.

Health: ``GET /v2/health/live`` and ``/v2/health/ready`` (200 ``{"live": true}``/``{"ready": true}``);
server metadata ``GET /v2`` (name, version, extensions); model metadata
``GET /v2/models/NAME[/versions/V]`` (name, versions, platform, inputs, outputs) and readiness
``.../ready``; inference ``POST /v2/models/NAME[/versions/V]/infer``.

An inference request is ``{"id"?, "parameters"?, "inputs": [{"name", "shape", "datatype", "data",
"parameters"?}], "outputs"?: [{"name"}]}``; the inputs are matched to the model's by position (a
model has one input unless it says otherwise), each converted by ``tensors.tensor_to_array``. The
answer is ``{"model_name", "model_version"?, "id"?, "outputs": [{"name", "shape", "datatype",
"data"}]}``, only the requested outputs when ``outputs`` names some. Errors are ``{"error": MESSAGE}``
(400 bad request, 404 unknown model or version), as the protocol specifies.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse

from millpond.errors import NotFoundError, UserError
from millpond.serving.models import Model, check_inputs
from millpond.serving.protocols.common import ModelRepository, answer_error, error_body
from millpond.serving.protocols.tensors import array_to_tensor, read_json, require_object, tensor_to_array


def model_metadata(model: Model) -> dict[str, Any]:
    return {
        "name": model.name,
        "versions": [model.version] if model.version else [],
        "platform": model.platform,
        "inputs": [spec.as_json() for spec in model.inputs],
        "outputs": [spec.as_json() for spec in model.outputs],
    }


def _model(repo: ModelRepository, name: str, version: str | None) -> Model:
    model = repo.get(name)
    if version is not None and version != model.version:
        raise NotFoundError(f"Model {name} has no version {version}.")
    return model


async def infer(repo: ModelRepository, model: Model, body: Any) -> dict[str, Any]:
    """One OIP inference request on ``model``: the response body (UserError for a bad request)."""
    request = require_object(body, "request")
    inputs = request.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise UserError('request: "inputs" must be a non-empty list of tensors')
    arrays = []
    for index, tensor in enumerate(inputs):
        where = f"inputs[{index}]"
        tensor = require_object(tensor, where)
        missing = [key for key in ("name", "shape", "datatype", "data") if key not in tensor]
        if missing:
            raise UserError(f"{where}: missing {', '.join(missing)}")
        if not isinstance(tensor["name"], str):
            raise UserError(f"{where}: name must be a string")
        arrays.append(
            tensor_to_array(tensor["shape"], tensor["datatype"], tensor["data"], f"{where} ({tensor['name']})")
        )
    wanted = _requested_outputs(request.get("outputs"), model)
    check_inputs(model, arrays)
    results = await repo.predict(model, arrays)
    names = [spec.name for spec in model.outputs] + [f"output-{i}" for i in range(len(model.outputs), len(results))]
    outputs = [array_to_tensor(name, array) for name, array in zip(names, results, strict=False)]
    if wanted is not None:
        outputs = [tensor for tensor in outputs if tensor["name"] in wanted]
    answer: dict[str, Any] = {"model_name": model.name, "outputs": outputs}
    if model.version:
        answer["model_version"] = model.version
    if isinstance(request.get("id"), str):
        answer["id"] = request["id"]
    return answer


def _requested_outputs(outputs: Any, model: Model) -> set[str] | None:
    if outputs is None:
        return None
    if not isinstance(outputs, list) or not all(
        isinstance(o, dict) and isinstance(o.get("name"), str) for o in outputs
    ):
        raise UserError('request: "outputs" must be a list of {"name": ...}')
    known = {spec.name for spec in model.outputs}
    names = {o["name"] for o in outputs}
    unknown = sorted(names - known)
    if unknown:
        raise UserError(
            f"request: model {model.name!r} has no output {unknown[0]!r} (it has {', '.join(sorted(known))})"
        )
    return names


async def answer_infer(repo: ModelRepository, name: str, version: str | None, request: Request) -> JSONResponse:
    """``POST /v2/models/NAME[/versions/V]/infer``: the outputs, or the error in the OIP's shape."""
    try:
        model = _model(repo, name, version)
        body = await read_json(request, repo.max_body_bytes, "request")
        return JSONResponse(await infer(repo, model, body))
    except Exception as exc:  # noqa: BLE001 - every failure answers in the OIP's error shape
        return answer_error(exc, error_body)


def v2_router(repo: ModelRepository) -> APIRouter:
    router = APIRouter()

    @router.get("/v2/health/live")
    def live() -> dict[str, bool]:
        return {"live": True}

    @router.get("/v2/health/ready")
    def ready() -> dict[str, bool]:
        return {"ready": True}  # a model server only listens once its model has loaded

    @router.get("/v2")
    def server_metadata() -> dict[str, Any]:
        return {"name": repo.server_name, "version": repo.server_version, "extensions": []}

    @router.get("/v2/models/{name}")
    @router.get("/v2/models/{name}/versions/{version}")
    def metadata(name: str, version: str | None = None) -> JSONResponse:
        try:
            return JSONResponse(model_metadata(_model(repo, name, version)))
        except UserError as exc:
            return answer_error(exc, error_body)

    @router.get("/v2/models/{name}/ready")
    @router.get("/v2/models/{name}/versions/{version}/ready")
    def model_ready(name: str, version: str | None = None) -> JSONResponse:
        try:
            model = _model(repo, name, version)
        except UserError as exc:
            return answer_error(exc, error_body)
        return JSONResponse({"name": model.name, "ready": True})

    @router.post("/v2/models/{name}/infer")
    @router.post("/v2/models/{name}/versions/{version}/infer")
    async def model_infer(name: str, request: Request, version: str | None = None) -> JSONResponse:
        return await answer_infer(repo, name, version, request)

    return router

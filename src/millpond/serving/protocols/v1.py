"""KServe's v1 protocol (the "V1 Inference Protocol" of KServe's data plane).

``GET /v1/models`` lists the models, ``GET /v1/models/NAME`` says whether NAME is ready
(``{"name": NAME, "ready": true}``), ``POST /v1/models/NAME:predict`` takes
``{"instances": [row, ...]}`` (or TensorFlow-serving's ``{"inputs": ...}``, which KServe accepts too)
and answers ``{"predictions": [...]}``, one per row. Errors are ``{"error": MESSAGE}`` with 400 for
bad input, 404 for an unknown model, as KServe's model server answers them.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse

from millpond.errors import UserError
from millpond.serving.models import check_inputs
from millpond.serving.protocols.common import ModelRepository, answer_error, error_body
from millpond.serving.protocols.tensors import read_json, require_object, rows_to_array, to_json


async def answer_predict(repo: ModelRepository, name: str, request: Request) -> JSONResponse:
    """``POST /v1/models/NAME:predict``: the predictions, or the error in v1's shape."""
    try:
        model = repo.get(name)
        body = require_object(await read_json(request, repo.max_body_bytes, "request"), "request")
        if "instances" in body:
            rows = rows_to_array(body["instances"], "instances")
        elif "inputs" in body:
            rows = rows_to_array(body["inputs"], "inputs")
        else:
            raise UserError('request: expected "instances": a list of rows')
        if len(model.inputs) != 1:
            raise UserError(f"model {name!r} takes {len(model.inputs)} inputs: use the v2 protocol")
        check_inputs(model, [rows])
        (predictions, *_) = await repo.predict(model, [rows])
        return JSONResponse({"predictions": to_json(predictions)})
    except Exception as exc:  # noqa: BLE001 - every failure answers in v1's error shape
        return answer_error(exc, error_body)


def v1_router(repo: ModelRepository) -> APIRouter:
    router = APIRouter()

    @router.get("/v1/models")
    def list_models() -> dict[str, Any]:
        return {"models": list(repo.models)}

    @router.get("/v1/models/{name}")
    def model_ready(name: str) -> JSONResponse:
        try:
            model = repo.get(name)
        except UserError as exc:
            return answer_error(exc, error_body)
        return JSONResponse({"name": model.name, "ready": True})

    @router.post("/v1/models/{name}:predict")
    async def predict(name: str, request: Request) -> JSONResponse:
        return await answer_predict(repo, name, request)

    return router

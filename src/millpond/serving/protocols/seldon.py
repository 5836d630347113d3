"""Seldon Core's v0.1 prediction protocol (SeldonMessage over REST), the form seed 003 queries.

``POST /api/v0.1/predictions`` and ``/api/v1.0/predictions`` (the model of this server; Seldon's executor
answers both), ``POST /seldon/NAME/api/v0.1/predictions``
and ``POST /seldon/NAMESPACE/NAME/api/v0.1/predictions`` (Seldon's ingress path form; the namespace
is accepted and ignored, millpond has one). The request's ``data`` carries ``names`` and either
``ndarray`` (nested rows) or ``tensor`` (``{"shape", "values"}``, row-major); the answer uses the
same form: ``{"data": {"names": [...], "ndarray"|"tensor": ...}, "meta": {}}``. ``names`` of the
answer are Seldon's defaults for an unnamed model's columns, ``t:0``, ``t:1``, … (one for a
one-dimensional answer). ``strData``, ``binData`` and ``jsonData`` are refused: the served models
take arrays. Errors are a SeldonMessage status: ``{"status": {"code": HTTP_STATUS, "info": MESSAGE,
"reason": "MICROSERVICE_BAD_DATA", "status": "FAILURE"}}``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi import APIRouter, Request
from starlette.responses import JSONResponse

from millpond.errors import UserError
from millpond.serving.models import Model, check_inputs
from millpond.serving.protocols.common import ModelRepository, answer_error
from millpond.serving.protocols.tensors import read_json, require_object, rows_to_array, tensor_to_array, to_json


def seldon_error(message: str, status: int) -> dict[str, Any]:
    reason = "MICROSERVICE_BAD_DATA" if 400 <= status < 500 else "MICROSERVICE_INTERNAL_ERROR"
    return {"status": {"code": status, "info": message, "reason": reason, "status": "FAILURE"}}


def predict(model: Model, body: Any, unit: tuple[str, str] | None = None) -> dict[str, Any]:
    """One SeldonMessage prediction on ``model``: the response body (UserError for a bad request).

    ``unit`` (the unit's name and image) when this server is a SeldonDeployment's prepackaged server: the
    answer is then built as Seldon's Python wrapper builds it (``construct_response_json``: ``names`` only
    for a 2-D answer, ``meta.requestPath`` naming the unit, the request's ``meta.puid`` echoed, and
    ``jsonData`` rows taken as ``SKLearnServer.predict`` takes them, answered as a tensor).
    """
    message = require_object(body, "request")
    if unit is not None and "data" not in message and "jsonData" in message:
        rows = rows_to_array(message["jsonData"], "jsonData")
        return _answer(model, rows, "tensor", [], message, unit)
    data = require_object(message.get("data"), "data")
    names = data.get("names", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise UserError("data.names must be a list of strings")
    if "ndarray" in data:
        rows = rows_to_array(data["ndarray"], "data.ndarray")
        form = "ndarray"
    elif "tensor" in data:
        tensor = require_object(data["tensor"], "data.tensor")
        values, shape = tensor.get("values"), tensor.get("shape")
        rows = tensor_to_array(shape, "FP64", values, "data.tensor")
        form = "tensor"
    else:
        raise UserError('data: expected "ndarray" or "tensor" (strData, binData and jsonData are not served)')
    return _answer(model, rows, form, names, message, unit)


def _answer(model: Model, rows: np.ndarray, form: str, names: list[str], message: dict[str, Any],
            unit: tuple[str, str] | None) -> dict[str, Any]:
    if names and rows.ndim == 2 and len(names) != rows.shape[1]:
        raise UserError(f"data.names has {len(names)} names for {rows.shape[1]} columns")
    if len(model.inputs) != 1:
        raise UserError(f"model {model.name!r} takes {len(model.inputs)} inputs: use the v2 protocol")
    check_inputs(model, [rows])
    (result, *_) = model.predict([rows])
    result = np.asarray(result)
    if unit is None:  # millpond's own answer for an InferenceService: a name even for one column
        out_names = [f"t:{i}" for i in range(result.shape[1])] if result.ndim > 1 else ["t:0"]
    else:  # Seldon's client_class_names: t:0, t:1, … for a 2-D answer, none for a 1-D one
        out_names = [f"t:{i}" for i in range(result.shape[1])] if result.ndim > 1 else []
        form = form if result.dtype.kind in "iufb" else "ndarray"  # Seldon: a tensor holds numbers only
    if form == "ndarray":
        out: dict[str, Any] = {"names": out_names, "ndarray": to_json(result)}
    else:
        out = {"names": out_names, "tensor": {"shape": list(result.shape), "values": to_json(result.ravel())}}
    meta: dict[str, Any] = {}
    if unit is not None:
        puid = (message.get("meta") or {}).get("puid") if isinstance(message.get("meta"), dict) else None
        meta = {**({"puid": puid} if isinstance(puid, str) and puid else {}), "requestPath": {unit[0]: unit[1]}}
    return {"data": out, "meta": meta}


def seldon_router(repo: ModelRepository) -> APIRouter:
    router = APIRouter()

    async def answer(request: Request, name: str | None) -> JSONResponse:
        try:
            model = repo.only() if name is None else repo.get(name)
            return JSONResponse(predict(model, await read_json(request, repo.max_body_bytes, "request"),
                                        repo.seldon_unit))
        except Exception as exc:  # noqa: BLE001 - every failure answers as a SeldonMessage status
            return answer_error(exc, seldon_error)

    @router.post("/api/v0.1/predictions")
    @router.post("/api/v1.0/predictions")
    async def predictions(request: Request) -> JSONResponse:
        return await answer(request, None)

    @router.post("/seldon/{name}/api/v0.1/predictions")
    async def named_predictions(name: str, request: Request) -> JSONResponse:
        return await answer(request, name)

    @router.post("/seldon/{namespace}/{name}/api/v0.1/predictions")
    async def namespaced_predictions(namespace: str, name: str, request: Request) -> JSONResponse:
        del namespace
        return await answer(request, name)

    return router

"""What the three protocol routers share: the models they serve and how an error becomes an answer.

Each protocol has its own error body (KServe v1 and OIP v2: ``{"error": MESSAGE}``; Seldon:
``{"status": {...}}``), so each router turns exceptions into answers itself (``answer_error``)
instead of through app-wide handlers: the same app serves all three, and FastAPI's own 422 body
would match none of them. Statuses come from ``millpond.errors`` (bad input 400, unknown model
404), plus 413 for a body over the limit; anything unexpected from a model is a 500 with its message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from starlette.responses import JSONResponse

from millpond.errors import MillpondError, NotFoundError, http_status_of
from millpond.serving.batching import MAX_BATCH, Batcher
from millpond.serving.models import Model
from millpond.serving.protocols.tensors import MAX_BODY_BYTES, BodyTooLarge

log = logging.getLogger(__name__)


@dataclass
class ModelRepository:
    """The models one server answers for, by name (one in a model server process)."""

    models: dict[str, Model] = field(default_factory=dict)
    max_body_bytes: int = MAX_BODY_BYTES
    server_name: str = "millpond"
    server_version: str = "0.1.0"
    # (unit, image) when this server is a SeldonDeployment's prepackaged server: Seldon's answers name them
    seldon_unit: tuple[str, str] | None = None
    # adaptive batching (``serving.batching``): concurrent requests to a model share one predict
    max_batch: int = MAX_BATCH
    max_batch_wait: float = 0.0
    _batchers: dict[str, Batcher] = field(default_factory=dict, repr=False)

    async def predict(self, model: Model, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """``model.predict(inputs)``, joined with the other requests that reach ``model`` at the same time."""
        batcher = self._batchers.get(model.name)
        if batcher is None or batcher.model is not model:
            batcher = self._batchers[model.name] = Batcher(model, self.max_batch, self.max_batch_wait)
        return await batcher.predict(inputs)

    def get(self, name: str) -> Model:
        model = self.models.get(name)
        if model is None:
            raise NotFoundError(f"Model with name {name} does not exist.")
        return model

    def only(self) -> Model:
        """The model a path without a name (Seldon's ``/api/v0.1/predictions``) means."""
        if len(self.models) != 1:
            raise NotFoundError(f"this server has {len(self.models)} models: name one in the path")
        return next(iter(self.models.values()))


def answer_error(exc: Exception, body: Callable[[str, int], dict[str, Any]]) -> JSONResponse:
    """``exc`` as a response whose body ``body(message, status)`` shapes the protocol's way."""
    if isinstance(exc, BodyTooLarge):
        status = 413
    elif isinstance(exc, MillpondError):
        status = http_status_of(exc)
    else:
        log.exception("model server: unexpected error")
        status = 500
    message = str(exc) or type(exc).__name__
    return JSONResponse(body(message, status), status_code=status)


def error_body(message: str, status: int) -> dict[str, Any]:
    """KServe v1's and the Open Inference Protocol's error body."""
    del status
    return {"error": message}

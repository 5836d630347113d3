"""KServe v1, the Open Inference Protocol v2 and Seldon v0.1 as FastAPI routers over a ``ModelRepository``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp

from millpond.serving.protocols.common import ModelRepository, error_body
from millpond.serving.protocols.direct import InferenceRoutes
from millpond.serving.protocols.seldon import seldon_error, seldon_router
from millpond.serving.protocols.v1 import v1_router
from millpond.serving.protocols.v2 import v2_router


def protocols_app(repo: ModelRepository, on_ready: Callable[[], None] | None = None) -> ASGIApp:
    """One app answering all three protocols for the models in ``repo`` (no docs pages: an inference port).

    The FastAPI app has every route; ``direct.InferenceRoutes`` in front of it answers the inference
    POSTs of v1 and v2 without FastAPI's routing (the same functions answer them).

    ``on_ready`` runs once the app has started, just before it serves its first request.
    """

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if on_ready is not None:
            on_ready()
        yield

    app = FastAPI(title="millpond model server", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.include_router(v1_router(repo))
    app.include_router(v2_router(repo))
    app.include_router(seldon_router(repo))

    @app.exception_handler(HTTPException)
    async def unrouted(request: Request, exc: HTTPException) -> JSONResponse:
        """A path or method no protocol has (404, 405), answered in the shape of the protocol it aimed at."""
        seldon = request.url.path.startswith(("/seldon/", "/api/v0.1/", "/api/v1.0/"))
        message = f"{request.method} {request.url.path}: {exc.detail}"
        body = (seldon_error if seldon else error_body)(message, exc.status_code)
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    return InferenceRoutes(app, repo)


__all__ = ["ModelRepository", "protocols_app", "seldon_router", "v1_router", "v2_router"]

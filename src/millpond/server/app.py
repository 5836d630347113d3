"""The FastAPI application: authentication, errors in KFP's shape, health, and the v2beta1 routers.

With a token, every request (the OpenAPI document included) must carry
``Authorization: Bearer TOKEN`` — what ``kfp.Client(existing_token=...)`` sends — except the
web UI's page (``/``) and its static files (``/ui/NAME``): they hold no data, and the page asks
for the token once and sends it with every call it makes.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from sqlalchemy.orm import Session, sessionmaker

from millpond.errors import UserError
from millpond.server.errors import ApiError, error_response
from millpond.server.executor import RunExecutor
from millpond.settings import Settings
from millpond.store.db import session_factory
from millpond.store.runs import RunStore

API = "/apis/v2beta1"


@dataclass
class ServerState:
    """What every route shares: settings, the store, and the run workers."""

    settings: Settings
    sessions: sessionmaker[Session]
    store: RunStore
    executor: RunExecutor


def create_app(settings: Settings, token: str | None = None) -> FastAPI:
    from millpond.server import experiments, runs

    app = FastAPI(title="millpond", version="v2beta1", description="Kubeflow Pipelines v2beta1 API, served by millpond.")
    app.state.millpond = ServerState(
        settings=settings,
        sessions=session_factory(settings.database_url),
        store=RunStore(settings.database_url),
        executor=RunExecutor(settings),
    )
    app.router.on_startup.append(lambda: app.state.millpond.executor.resume_in_flight(app.state.millpond.sessions))
    if token:
        expected = f"Bearer {token}".encode()

        @app.middleware("http")
        async def require_token(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
            if _is_public(request):  # the UI's page and static files: the page asks for the token itself
                return await call_next(request)
            given = request.headers.get("authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                return error_response(401, "missing or wrong token: send 'Authorization: Bearer TOKEN'")
            return await call_next(request)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> Response:
        return error_response(exc.status, exc.message)

    @app.exception_handler(UserError)
    async def user_error(request: Request, exc: UserError) -> Response:
        return error_response(404 if str(exc).startswith("no run with id") else 400, str(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        return error_response(400, "; ".join(_describe(error) for error in exc.errors()))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        return error_response(500, f"internal error: {type(exc).__name__}: {exc}")

    @app.get(f"{API}/healthz", tags=["HealthzService"])
    def healthz() -> dict[str, Any]:
        return {"multi_user": False}

    app.include_router(experiments.router, prefix=API)
    app.include_router(runs.router, prefix=API)
    from millpond.server import ui_routes

    app.include_router(ui_routes.router)  # the web UI at / and its helpers under /ui-api/
    from millpond.server import pipelines

    app.include_router(pipelines.router, prefix=API)
    from millpond.server import recurring

    recurring.install(app, API)  # /recurringruns, and the scheduler thread that starts their runs
    from millpond.server import fluid_routes

    app.include_router(fluid_routes.router, prefix=fluid_routes.PREFIX)  # datasets, data operations, secrets' names
    return app


def _is_public(request: Request) -> bool:
    """The web UI's page and its static files (no data in them) load without the token; nothing else does."""
    if request.method not in ("GET", "HEAD"):
        return False
    path = request.url.path
    return path == "/" or (path.startswith("/ui/") and "/" not in path[len("/ui/"):])


def _describe(error: dict[str, Any]) -> str:
    where = ".".join(str(part) for part in error.get("loc", ()) if part != "body") or "body"
    if error.get("type") == "extra_forbidden":
        return f"unknown field {where!r}"
    return f"{where}: {error.get('msg', 'invalid')}"


def state_of(request: Request) -> ServerState:
    return request.app.state.millpond  # type: ignore[no-any-return]

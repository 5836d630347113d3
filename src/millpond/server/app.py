"""The FastAPI application: request checks, errors in KFP's shape, health, and the v2beta1 routers.

Every request passes ``security.RequestGuard`` first: its Host must be one this server was
started for (DNS rebinding), with a token it must carry ``Authorization: Bearer TOKEN`` — what
``kfp.Client(existing_token=...)`` sends — except the web UI's page (``/``) and static files
(``/ui/NAME``), and a state-changing request must come from no browser or from this server's own
page, with a JSON, multipart or YAML body (cross-site requests; a model query through the gateway
that no browser sent may carry any body). See ``security`` for why.
``/metrics`` (Prometheus) passes the same checks: it needs the token when there is one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import Depends, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException

from millpond.access.authorizer import Authorizer
from millpond.errors import MillpondError, http_status_of
from millpond.server import (
    artifact_routes,
    artifact_writes,
    experiments,
    jobs_routes,
    katib_reconcile,
    katib_routes,
    kfam_routes,
    lineage_routes,
    login_routes,
    metrics,
    nodes_routes,
    notebook_proxy,
    notebook_reconcile,
    notebook_routes,
    pipelines,
    queue_reclaim,
    recurring,
    registry_routes,
    resource_routes,
    runs,
    serving_reconcile,
    serving_routes,
    ui_routes,
    v1_ui_routes,
)
from millpond.server.access import AccessSettings, Authenticator
from millpond.server.errors import ApiError, error_response
from millpond.server.executor import RunExecutor
from millpond.server.kube.app import KubeApi, KubeDispatch, is_kube_path
from millpond.server.namespaces import namespace_checked
from millpond.server.security import HostPolicy, RequestGuard
from millpond.server.service_proxy import KfpServiceProxy
from millpond.server.state import ServerState
from millpond.settings import Settings
from millpond.store.catalog import PipelineStore
from millpond.store.db import database_failure, session_factory
from millpond.store.lineage_store import LineageStore
from millpond.store.recurring import RecurringRunStore
from millpond.store.runs import RunStore
from millpond.store.training import JobStore

API = "/apis/v2beta1"


def create_app(settings: Settings, token: str | None = None, allowed_hosts: Iterable[str] = (),
               access: AccessSettings | None = None) -> FastAPI:
    """The application over ``settings``' home; ``allowed_hosts`` adds names to the loopback ones a Host may carry;
    ``access`` says how callers are identified (default: single-user, with ``token`` when given)."""
    access = access or AccessSettings(token=token or None)
    app = FastAPI(
        title="millpond", version="v2beta1", description="Kubeflow Pipelines v2beta1 API, served by millpond.",
        dependencies=[Depends(namespace_checked)],  # a namespace in a path or query is a DNS-1123 label, or 400
    )
    run_store = RunStore(settings.database_url)
    app.state.millpond = ServerState(
        settings=settings,
        store=run_store,
        pipelines=PipelineStore(settings.database_url),
        executor=RunExecutor(settings, run_store),
        recurring=RecurringRunStore(session_factory(settings.database_url)),
        jobs=JobStore(settings),
        lineage=LineageStore(settings.database_url),
    )
    app.router.on_startup.append(app.state.millpond.executor.resume_in_flight)
    app.router.on_startup.append(lambda: resource_routes.check_operations(settings))  # dead ones: resumed or Failed
    app.router.on_startup.append(lambda: jobs_routes.check_jobs(settings))  # dead supervisors: their jobs FAILED
    serving_reconcile.install(app, settings)  # every servable InferenceService gets a supervisor, now and later
    notebook_reconcile.install(app, settings)  # every Notebook gets a supervisor, now and after a kill -9
    katib_reconcile.install(app, settings)  # every unfinished Experiment gets a supervisor, now and after a kill -9
    queue_reclaim.install(app, settings)  # the quota of queued workloads whose holder died: handed on
    app.state.metrics_registry = metrics.registry_for(settings)
    app.state.authorizer = Authorizer(settings, access.multi_user)  # the one decision every surface asks
    app.state.userid_header = access.userid_header  # the notebook proxy strips it
    app.state.kube = KubeApi(settings)
    app.add_middleware(KubeDispatch, kube=app.state.kube)  # /api, /apis/GROUP…: the Kubernetes API (inside the guard)
    app.add_middleware(KfpServiceProxy)  # kfp.Client() through a kubeconfig: the API server's proxy to ml-pipeline
    # one Authenticator for the app: the guard asks it, and the login routes check passwords with its credentials
    app.state.authenticator = Authenticator(settings, access)
    app.add_middleware(RequestGuard, policy=HostPolicy.of(allowed_hosts), authenticator=app.state.authenticator,
                       status_paths=is_kube_path)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> Response:
        return error_response(exc.status, exc.message)

    @app.exception_handler(MillpondError)
    async def millpond_error(request: Request, exc: MillpondError) -> Response:
        return error_response(http_status_of(exc), str(exc))  # errors.py's one table: 400, 404, 409, 503…

    @app.exception_handler(HTTPException)
    async def framework_error(request: Request, exc: HTTPException) -> Response:
        """What the framework refuses itself, in KFP's shape.

        That is a body that is not JSON, no such route, or a wrong method.
        """
        return error_response(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        return error_response(400, "; ".join(_describe(error) for error in exc.errors()))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        failure = database_failure(exc)  # the metadata database went away: 503, its URL without the password
        if failure is not None:
            return error_response(http_status_of(failure), str(failure))
        return error_response(500, f"internal error: {type(exc).__name__}: {exc}")

    @app.get(f"{API}/healthz", tags=["HealthzService"])
    def healthz() -> dict[str, Any]:
        return {"multi_user": access.multi_user}

    # the model gateway (/v1/models, /v2, /seldon, /serving: KServe, OIP, Seldon) first: its paths are no other
    # router's, and routes are matched in order (~150 µs a request on the CI machine when it came eleventh)
    serving_routes.install(app)
    notebook_proxy.install(app)  # /notebook/NAMESPACE/NAME/: Kubeflow Notebooks' servers, HTTP and WebSockets
    app.include_router(experiments.router, prefix=API)
    app.include_router(runs.router, prefix=API)
    app.include_router(artifact_routes.router, prefix=API)  # KFP's native artifact service: lineage
    app.include_router(artifact_writes.router, prefix=API)  # ... and its create calls
    app.include_router(login_routes.router)  # /ui-api/login, logout, whoami (multi-user)
    app.include_router(kfam_routes.router)  # /kfam/v1: Kubeflow's contributors API (KFAM)
    app.include_router(ui_routes.router)  # the web UI at / and its helpers under /ui-api/
    app.include_router(v1_ui_routes.router)  # kfp 1.x: the version graph, v1 visualizations and metrics
    app.include_router(metrics.router)  # /metrics: Prometheus' text format (the token applies)
    app.include_router(lineage_routes.router)  # /ui-api/lineage: the Executions and artifact pages' reads
    app.include_router(nodes_routes.router)  # /ui-api/nodes: the Nodes page's figures
    app.include_router(notebook_routes.router)  # /ui-api/notebooks, /ui-api/namespaces/NS/...: the Notebooks page
    app.include_router(katib_routes.router)  # /ui-api/katib: the Katib Experiments pages' reads
    app.include_router(pipelines.router, prefix=API)
    registry_routes.install(app)  # /api/model_registry/v1alpha3 (and v1): Kubeflow Model Registry's REST API
    recurring.install(app, API)  # /recurringruns, and the scheduler thread that starts their runs
    app.include_router(jobs_routes.router, prefix=jobs_routes.PREFIX)  # before fluid's /{kind}, which would take /jobs
    app.include_router(resource_routes.router, prefix=resource_routes.PREFIX)  # every kind, secrets' names
    return app


def _describe(error: dict[str, Any]) -> str:
    where = ".".join(str(part) for part in error.get("loc", ()) if part != "body") or "body"
    if error.get("type") == "extra_forbidden":
        return f"unknown field {where!r}"
    return f"{where}: {error.get('msg', 'invalid')}"

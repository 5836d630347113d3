"""The model gateway on ``millpond server``: KServe v1, the Open Inference Protocol v2 and Seldon v0.1,
routed to each InferenceService's model processes (``serving.front``).

- KServe v1: ``GET /v1/models/NAME``, ``POST /v1/models/NAME:predict``;
- OIP v2: ``GET /v2/models/NAME[/versions/V][/ready]``, ``POST /v2/models/NAME[/versions/V]/infer``, and the
  gateway's own ``GET /v2`` (server metadata), ``/v2/health/live`` and ``/v2/health/ready``;
- Seldon v0.1: ``POST /seldon/NAME/api/v0.1/predictions`` and ``/seldon/NAMESPACE/NAME/api/v0.1/predictions``
  (sent on to the replica's ``/api/v0.1/predictions``): seed 003's query script, with the server's address;
  and Seldon's v1.0 ``POST /seldon/NAMESPACE/NAME/api/v1.0/predictions``. A SeldonDeployment of that name
  answers them (``get`` on ``seldondeployments`` of ``machinelearning.seldon.io`` in multi-user mode), else the
  InferenceService does;
- ``/serving/NAMESPACE/NAME/PATH`` (any method): PATH as it is, for custom containers' own routes.

NAME without a namespace is the InferenceService NAME of namespace ``default`` (on Kubernetes the
namespace is in the Host name KServe's ingress routes by; here the path carries it, as Seldon's does).
The path sent to the replica names the model as its server knows it (``Endpoints.model_name``).
An InferenceService nobody serves: 404 in the protocol's shape when none is stored either, 503
(no ready replica) when it is stored but not served now.

Security (``server.security``): these paths pass the request guard like every route — the Host
check (DNS rebinding), the token when the server has one, and for a POST the Origin check (a
browser page on another site is refused, 403). What differs is the body type: a model query
from curl or ``requests`` (no ``Origin``, no ``Sec-Fetch-Site: cross-site``) may carry any
Content-Type, as KServe's examples post with ``curl -d @input.json`` (form-encoded); see
``security.INFERENCE_PREFIXES``.

Multi-user mode (``route_access``): a query (any of the paths above that names a model) needs ``get`` on
``inferenceservices`` (``serving.kserve.io``) of the model's namespace, asked before the model is looked
up (403 in the protocol's error shape). On Kubeflow, KServe's predictors are reached through Istio and
each profile's AuthorizationPolicy lets in the namespace's members (its contributors), which is what a
RoleBinding of ``kubeflow-view`` (or more) in that namespace grants here. The gateway's own ``/v2``,
``/v2/health/live`` and ``/v2/health/ready`` name no model and answer any authenticated caller. The
Models page lists the namespaces where the caller may ``list`` InferenceServices; one model's page
asks ``get``.

Every request is counted per InferenceService and revision on the server's ``/metrics``
(``millpond_model_requests_total{namespace,name,revision,code}``,
``millpond_model_request_duration_seconds``); the Models page reads the same figures, raised to the
replicas' own counts where those are larger (``replica_counts``: calls straight to an InferenceService's
own port bypass the gateway).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request, Response
from prometheus_client import CollectorRegistry, Counter, Histogram

from millpond import __version__
from millpond.access.attributes import Attributes
from millpond.errors import UserError
from millpond.manifest_envelope import found
from millpond.server.replica_counts import ServedCounts, merged, replica_counts
from millpond.server.route_access import kind_scope, refusal, require_kind, shows
from millpond.server.state import state_of
from millpond.serving import lifecycle
from millpond.serving import objects as serving_objects
from millpond.serving.front import Router, error, shape_of
from millpond.serving.protocols.common import error_body
from millpond.serving.protocols.seldon import seldon_error
from millpond.serving.seldon.kinds import SELDON_DEPLOYMENT as SDEP
from millpond.store.resources import ResourceStore

router = APIRouter(include_in_schema=False)
ISVC = serving_objects.KINDS["InferenceService"].names
DEFAULT_NAMESPACE = "default"
RECENT = 1000  # latencies kept per InferenceService for the Models page's p50/p99
# Seconds: a model answers in a fraction of a millisecond (a linear model) to seconds (a large network)
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass
class ModelCounts:
    """What the gateway saw of one InferenceService since the server started."""

    codes: dict[str, int] = field(default_factory=dict)  # "REVISION code" → requests
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT))


class GatewayMetrics:
    """Per-model counters on the server's registry, and recent latencies for the Models page."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ["namespace", "name", "revision"]
        self.requests = Counter("millpond_model_requests", "Requests the gateway routed to an InferenceService, "
                                "by revision and HTTP status.", [*labels, "code"], registry=registry)
        self.latency = Histogram("millpond_model_request_duration_seconds", "Time from request to answer "
                                 "through the gateway, by InferenceService and revision.", labels,
                                 buckets=LATENCY_BUCKETS, registry=registry)
        self._lock = threading.Lock()
        self.models: dict[tuple[str, str], ModelCounts] = {}

    def observe(self, namespace: str, name: str, revision: str, code: int, seconds: float) -> None:
        self.requests.labels(namespace, name, revision, str(code)).inc()
        self.latency.labels(namespace, name, revision).observe(seconds)
        with self._lock:
            counts = self.models.setdefault((namespace, name), ModelCounts())
            key = f"{revision} {code}"
            counts.codes[key] = counts.codes.get(key, 0) + 1
            counts.recent.append(seconds)

    def summary(self, namespace: str, name: str) -> dict[str, Any]:
        """Requests by code and by revision, and p50/p99 (ms) of the last ``RECENT`` requests."""
        with self._lock:
            counts = self.models.get((namespace, name))
            codes = dict(counts.codes) if counts else {}
            recent = sorted(counts.recent) if counts else []
        by_code: dict[str, int] = {}
        by_revision: dict[str, int] = {}
        for key, value in codes.items():
            revision, code = key.rsplit(" ", 1)
            by_code[code] = by_code.get(code, 0) + value
            if revision:
                by_revision[revision] = by_revision.get(revision, 0) + value
        return {"requests": sum(codes.values()), "byCode": by_code, "byRevision": by_revision,
                "p50_ms": _quantile(recent, 0.50), "p99_ms": _quantile(recent, 0.99), "window": len(recent)}


def _quantile(ordered: list[float], q: float) -> float | None:
    if not ordered:
        return None
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 3)


def install(app: Any) -> None:
    """The gateway on ``app``: its router, its metrics on ``app.state.metrics_registry``, one Router."""
    app.state.gateway_metrics = GatewayMetrics(app.state.metrics_registry)
    app.state.gateway = Router(observe=app.state.gateway_metrics.observe)
    app.router.on_shutdown.append(app.state.gateway.aclose)
    app.include_router(router)


def gateway(request: Request) -> Router:
    return request.app.state.gateway


async def _route(request: Request, namespace: str, name: str, path_of: Any, shape: Any) -> Response:
    """Forward ``request`` to InferenceService ``namespace/name`` at ``path_of(model_name)``."""
    refused = refusal(request, Attributes("get", namespace, ISVC.group, ISVC.plural, name=name))
    if refused is not None:
        return error(refused, 403, shape)
    front = gateway(request)
    try:
        target = front.lookup(namespace, name)
    except UserError as exc:
        return error(str(exc), 400, shape)
    if target is None:
        settings = state_of(request).settings
        if ResourceStore(settings).get("InferenceService", name, namespace) is None:
            return error(f"Model with name {name} does not exist (no InferenceService {name} in namespace "
                         f"{namespace}).", 404, shape)
        return error(f"InferenceService {namespace}/{name} has no ready replica: it is not served now", 503, shape)
    return await front.forward(request, target, path_of(target.endpoints.model_name), shape)


# --- KServe v1 -----------------------------------------------------------------------------------------
@router.get("/v1/models/{name}")
async def v1_model(name: str, request: Request) -> Response:
    return await _route(request, DEFAULT_NAMESPACE, name, lambda m: f"/v1/models/{m}", error_body)


@router.post("/v1/models/{name}:predict")
async def v1_predict(name: str, request: Request) -> Response:
    return await _route(request, DEFAULT_NAMESPACE, name, lambda m: f"/v1/models/{m}:predict", error_body)


# --- Open Inference Protocol v2 ------------------------------------------------------------------------
@router.get("/v2")
def v2_server() -> dict[str, Any]:
    return {"name": "millpond", "version": __version__, "extensions": []}


@router.get("/v2/health/live")
def v2_live() -> dict[str, bool]:
    return {"live": True}


@router.get("/v2/health/ready")
def v2_ready() -> dict[str, bool]:
    return {"ready": True}  # the gateway answers; each model says its own readiness at /v2/models/NAME/ready


def _v2_path(version: str | None, tail: str) -> Any:
    return lambda m: f"/v2/models/{m}" + (f"/versions/{version}" if version is not None else "") + tail


@router.get("/v2/models/{name}")
@router.get("/v2/models/{name}/versions/{version}")
async def v2_metadata(name: str, request: Request, version: str | None = None) -> Response:
    return await _route(request, DEFAULT_NAMESPACE, name, _v2_path(version, ""), error_body)


@router.get("/v2/models/{name}/ready")
@router.get("/v2/models/{name}/versions/{version}/ready")
async def v2_model_ready(name: str, request: Request, version: str | None = None) -> Response:
    return await _route(request, DEFAULT_NAMESPACE, name, _v2_path(version, "/ready"), error_body)


@router.post("/v2/models/{name}/infer")
@router.post("/v2/models/{name}/versions/{version}/infer")
async def v2_infer(name: str, request: Request, version: str | None = None) -> Response:
    return await _route(request, DEFAULT_NAMESPACE, name, _v2_path(version, "/infer"), error_body)


# --- Seldon v0.1 and v1.0 -------------------------------------------------------------------------------
async def _seldon_route(request: Request, namespace: str, name: str, path: str) -> Response:
    """A SeldonDeployment of that name is asked first (Seldon's own paths are its), else the InferenceService."""
    store = ResourceStore(state_of(request).settings)
    try:
        target = gateway(request).lookup(namespace, name, SDEP.kind)
        stored = target is not None or store.get(SDEP.kind, name, namespace) is not None
    except UserError as exc:
        return error(str(exc), 400, seldon_error)
    if not stored:
        return await _route(request, namespace, name, lambda m: path, seldon_error)
    refused = refusal(request, Attributes("get", namespace, SDEP.group, SDEP.plural, name=name))
    if refused is not None:
        return error(refused, 403, seldon_error)
    if target is None:
        return error(f"SeldonDeployment {namespace}/{name} has no ready replica: it is not served now", 503,
                     seldon_error)
    return await gateway(request).forward(request, target, path, seldon_error)


@router.post("/seldon/{name}/api/v0.1/predictions")
async def seldon(name: str, request: Request) -> Response:
    return await _seldon_route(request, DEFAULT_NAMESPACE, name, "/api/v0.1/predictions")


@router.post("/seldon/{namespace}/{name}/api/v0.1/predictions")
async def seldon_namespaced(namespace: str, name: str, request: Request) -> Response:
    return await _seldon_route(request, namespace, name, "/api/v0.1/predictions")


@router.post("/seldon/{namespace}/{name}/api/v1.0/predictions")
async def seldon_v1(namespace: str, name: str, request: Request) -> Response:
    return await _seldon_route(request, namespace, name, "/api/v1.0/predictions")


# --- any path of a custom container --------------------------------------------------------------------
@router.api_route("/serving/{namespace}/{name}/{path:path}", methods=["GET", "HEAD", "POST", "PUT", "PATCH",
                                                                      "DELETE"])
async def any_path(namespace: str, name: str, path: str, request: Request) -> Response:
    return await _route(request, namespace, name, lambda m: f"/{path}", shape_of(f"/{path}"))


# --- what the Models page and get isvc read ------------------------------------------------------------
def model_status(resource: Any) -> dict[str, Any]:
    """An InferenceService's status as the Models page shows it: the stored one, never Ready without a
    live supervisor (``serving.lifecycle.observed_status``)."""
    return lifecycle.observed_status(resource)


def stored(request: Request) -> list[Any]:
    """Every InferenceService of the namespaces where the caller may list them."""
    every = found(ISVC, None, DEFAULT_NAMESPACE, True, ResourceStore(state_of(request).settings))
    scope = kind_scope(request, ISVC, lambda: {resource.namespace for resource in every})
    return [resource for resource in every if shows(scope, resource.namespace)]


def _ready_of(status: dict[str, Any]) -> dict[str, str]:
    ready: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    return {"status": str(ready.get("status") or "Unknown"), "reason": str(ready.get("reason") or ""),
            "message": str(ready.get("message") or "")}


def samples(base: str, namespace: str, name: str, row: list[float] | None) -> dict[str, str]:
    """curl commands querying the InferenceService through this gateway in each protocol (``row``: one input
    row of the model's width when known, else a placeholder to fill in)."""
    values = "[" + ", ".join(f"{v:g}" for v in row) + "]" if row is not None else "[...]"
    shape = f"[1, {len(row)}]" if row is not None else "[1, N]"
    default = namespace == DEFAULT_NAMESPACE
    seldon_path = f"/seldon/{name}" if default else f"/seldon/{namespace}/{name}"
    json_header = "-H 'Content-Type: application/json'"
    out = {"seldon": f"curl {json_header} -d '{{\"data\": {{\"ndarray\": [{values}]}}}}' "
                     f"{base}{seldon_path}/api/v0.1/predictions"}
    if default:
        out["v1"] = f"curl {json_header} -d '{{\"instances\": [{values}]}}' {base}/v1/models/{name}:predict"
        out["v2"] = (f"curl {json_header} -d '{{\"inputs\": [{{\"name\": \"input-0\", \"shape\": {shape}, "
                     f"\"datatype\": \"FP64\", \"data\": {values}}}]}}' {base}/v2/models/{name}/infer")
    else:  # v1/v2 paths name no namespace: the InferenceService's own routes through /serving/
        out["v1"] = (f"curl {json_header} -d '{{\"instances\": [{values}]}}' "
                     f"{base}/serving/{namespace}/{name}/v1/models/{name}:predict")
        out["v2"] = (f"curl {json_header} -d '{{\"inputs\": [{{\"name\": \"input-0\", \"shape\": {shape}, "
                     f"\"datatype\": \"FP64\", \"data\": {values}}}]}}' "
                     f"{base}/serving/{namespace}/{name}/v2/models/{name}/infer")
    return out


def model_view(request: Request, resource: Any, row: list[float] | None = None,
               served: ServedCounts | None = None) -> dict[str, Any]:
    """One InferenceService as the Models page shows it (``served``: its replicas' own counts, ``replica_counts``)."""
    status = model_status(resource)
    front = gateway(request)
    target = front.lookup(resource.namespace, resource.name)
    revisions: list[dict[str, Any]]
    if target is not None:
        revisions = [{"name": r.name, "percent": r.percent, "replicas": list(r.replicas)}
                     for r in target.endpoints.revisions]
    else:
        traffic = ((status.get("components") or {}).get("predictor") or {}).get("traffic") or []
        revisions = [{"name": str(t.get("revisionName") or ""), "percent": t.get("percent"), "replicas": []}
                     for t in traffic]
    predictor = (resource.manifest.get("spec") or {}).get("predictor") or {}
    implementation = next((k for k in predictor if isinstance(predictor.get(k), dict) and k not in (
        "resources", "tolerations", "affinity", "nodeSelector", "securityContext", "batcher", "logger")), "")
    base = str(request.base_url).rstrip("/")
    return {
        "namespace": resource.namespace, "name": resource.name, "ready": _ready_of(status),
        "url": str(status.get("url") or ""), "gateway": f"{base}/serving/{resource.namespace}/{resource.name}",
        "served": target is not None, "predictor": implementation,
        "storageUri": str((predictor.get(implementation) or {}).get("storageUri") or "")
        if isinstance(predictor.get(implementation), dict) else "",
        "revisions": revisions, "replicas": sum(len(r["replicas"]) for r in revisions),
        "metrics": merged(request.app.state.gateway_metrics.summary(resource.namespace, resource.name), served),
        "samples": samples(base, resource.namespace, resource.name, row),
        "created": resource.manifest.get("metadata", {}).get("creationTimestamp"),
    }


@router.get("/ui-api/models")
async def ui_models(request: Request) -> dict[str, Any]:
    """The Models page: every InferenceService with its readiness, URL, traffic, replicas, counts and latency
    (counts: the gateway's, or its replicas' where larger: calls straight to its own port count too)."""
    resources = await asyncio.to_thread(stored, request)
    front = gateway(request)
    served = await asyncio.gather(*(replica_counts(front, front.lookup(r.namespace, r.name)) for r in resources))
    return {"models": [model_view(request, resource, served=counts)
                       for resource, counts in zip(resources, served, strict=True)]}


@router.get("/ui-api/models/{namespace}/{name}")
async def ui_model(namespace: str, name: str, request: Request) -> dict[str, Any]:
    """One InferenceService in full: the page's view, its conditions, labels and annotations, and a sample
    request sized to the model's input (read from a replica's OIP metadata when one is up)."""
    require_kind(request, ISVC, "get", namespace, name)
    resource = found(ISVC, name, namespace, False, ResourceStore(state_of(request).settings))[0]  # NotFoundError: 404
    row = await _sample_row(request, namespace, name)
    served = await replica_counts(gateway(request), gateway(request).lookup(namespace, name))
    view = model_view(request, resource, row, served)
    metadata = resource.manifest.get("metadata") or {}
    status = model_status(resource)
    view.update(conditions=status.get("conditions") or [], labels=metadata.get("labels") or {},
                annotations=metadata.get("annotations") or {}, modelStatus=status.get("modelStatus") or {})
    return view


async def _sample_row(request: Request, namespace: str, name: str) -> list[float] | None:
    target = gateway(request).lookup(namespace, name)
    if target is None or target.endpoints.server == "command":
        return None
    meta = await gateway(request).get_json(target, f"/v2/models/{target.endpoints.model_name}")
    inputs = (meta or {}).get("inputs") or []
    shape = inputs[0].get("shape") if len(inputs) == 1 and isinstance(inputs[0], dict) else None
    if isinstance(shape, list) and len(shape) == 2 and isinstance(shape[1], int) and 0 < shape[1] <= 4096:
        return [0.0] * shape[1]
    return None

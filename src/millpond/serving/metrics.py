"""A model server's ``GET /metrics``: Prometheus' text format, from a registry of its own.

The names are KServe's model server's where it has one (``kserve/metrics.py``):
``request_predict_seconds{model_name}``, the time the model's ``predict`` took, a histogram with
prometheus_client's default buckets as KServe's. KServe counts no requests; millpond adds
``millpond_model_server_requests_total{protocol, code}`` (protocol ``v1``, ``v2``, ``seldon`` or
``other``; ``code`` the HTTP status), which is how a gateway's round-robin or a canary split can be
checked from the replicas' side, ``millpond_model_server_request_seconds{protocol}``, the time
from request to answer inside the process, and ``millpond_model_server_inferences_total{protocol,
code}``, the inference requests alone (every POST: v1 ``:predict``, v2 ``/infer``, Seldon
``predictions``; never a health probe or a metadata read), whichever way they came: through the
server's gateway or straight to the InferenceService's own port. The Models page reads it
(``server.replica_counts``) so its counts include the calls that bypass the gateway.

Cost per request is kept tiny (measured with ``benchmarks/serving.py``, README): the labelled
children are looked up once and kept, so a request costs one counter increment and two histogram
observations (~1 µs each) in a pure ASGI wrapper (no Starlette middleware stack).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from millpond.serving.models import Model, TensorSpec


class ServerMetrics:
    """The counters and histograms of one model server process."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.predict = Histogram("request_predict_seconds", "predict request latency", ["model_name"],
                                 registry=self.registry)
        self.requests = Counter("millpond_model_server_requests", "Requests answered by this model server, by "
                                "protocol and HTTP status.", ["protocol", "code"], registry=self.registry)
        self.latency = Histogram("millpond_model_server_request_seconds", "Time from request to answer in this "
                                 "model server, by protocol.", ["protocol"], registry=self.registry)
        self.inferences = Counter("millpond_model_server_inferences", "Inference requests (POST) answered by this "
                                  "model server, by protocol and HTTP status.", ["protocol", "code"],
                                  registry=self.registry)
        self._counts: dict[tuple[str, int], Any] = {}
        self._inference_counts: dict[tuple[str, int], Any] = {}
        self._latencies = {p: self.latency.labels(p) for p in ("v1", "v2", "seldon", "other")}

    def count(self, protocol: str, code: int, seconds: float, inference: bool = False) -> None:
        child = self._counts.get((protocol, code))
        if child is None:
            child = self._counts[(protocol, code)] = self.requests.labels(protocol, str(code))
        child.inc()
        self._latencies[protocol].observe(seconds)
        if inference:
            counted = self._inference_counts.get((protocol, code))
            if counted is None:
                counted = self._inference_counts[(protocol, code)] = self.inferences.labels(protocol, str(code))
            counted.inc()

    def text(self) -> bytes:
        return generate_latest(self.registry)


def protocol_of(path: str) -> str:
    if path.startswith("/v1/"):
        return "v1"
    if path == "/v2" or path.startswith("/v2/"):
        return "v2"
    if path.startswith(("/seldon/", "/api/v0.1/", "/api/v1.0/")):
        return "seldon"
    return "other"


@dataclass
class TimedModel:
    """A model whose ``predict`` is timed into ``request_predict_seconds`` (the protocols see a Model)."""

    model: Model
    metrics: ServerMetrics
    name: str = ""
    version: str | None = None
    platform: str = ""
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()
    _observe: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.name, self.version, self.platform = self.model.name, self.model.version, self.model.platform
        self.inputs, self.outputs = self.model.inputs, self.model.outputs
        self._observe = self.metrics.predict.labels(self.model.name).observe

    def predict(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        started = time.perf_counter()
        try:
            return self.model.predict(inputs)
        finally:
            self._observe(time.perf_counter() - started)


class MetricsApp:
    """ASGI wrapper: answers ``GET /metrics``, and counts every other request by protocol and status."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path == "/metrics" and scope["method"] in ("GET", "HEAD"):
            body = self.metrics.text()
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", CONTENT_TYPE_LATEST.encode()), (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store")]})
            await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})
            return
        started = time.perf_counter()
        status = 500

        async def counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, counted)
        finally:
            self.metrics.count(protocol_of(path), status, time.perf_counter() - started,
                               inference=scope["method"] == "POST")

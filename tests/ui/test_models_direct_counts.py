"""The Models page's request counts include calls made straight to an InferenceService's own port (its
``status.url``), which never pass the gateway (issue 34): the model server counts its inference requests
(``millpond_model_server_inferences_total``) and ``/ui-api/models`` shows the larger of the gateway's and
the replicas' figures. Health probes and metadata reads are not inferences and are not counted; a replica
that does not answer /metrics leaves the gateway's figures as they are.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Any

from millpond.server.replica_counts import ServedCounts, merged
from millpond.serving import lifecycle
from millpond.serving.front import Router
from millpond.store.resources import ResourceStore
from tests.server_support import serving
from tests.serving_support import train_digits


def _isvc(model_dir: Path) -> dict[str, Any]:
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "direct"},
            "spec": {"predictor": {"sklearn": {"storageUri": f"file://{model_dir}"}}}}


def _json(url: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def _metrics(base: str, model: str) -> dict[str, Any]:
    [view] = [m for m in _json(f"{base}/ui-api/models")["models"] if m["name"] == model]
    return view["metrics"]


def test_calls_to_a_services_own_port_are_counted(home: Path, tmp_path: Path) -> None:
    model_dir, _, rows = train_digits(tmp_path)
    try:
        for served in serving():
            _json(f"{served.url}/apis/millpond/v1/fluid/apply", [_isvc(model_dir)])
            url = lifecycle.wait_ready(ResourceStore(), "direct", timeout_s=60).status["url"]  # its own port
            assert _metrics(served.url, "direct")["requests"] == 0
            for _ in range(3):  # straight to its own port: the gateway never sees these
                _json(f"{url}/v1/models/direct:predict", {"instances": rows[:2].tolist()})
            _json(f"{url}/v2/models/direct")  # a metadata read is no inference
            _json(f"{url}/v2/health/ready")
            metrics = _metrics(served.url, "direct")
            assert metrics["requests"] == 3 and metrics["served"] == {"requests": 3, "byCode": {"200": 3}}
            assert metrics["byCode"] == {"200": 3} and metrics["byRevision"] == {"direct-predictor-00001": 3}
            for _ in range(2):  # through the gateway: both count it, the page shows it once
                _json(f"{served.url}/v1/models/direct:predict", {"instances": rows[:2].tolist()})
            metrics = _metrics(served.url, "direct")
            assert metrics["requests"] == 5 and metrics["served"]["requests"] == 5
            detail = _json(f"{served.url}/ui-api/models/default/direct")["metrics"]
            assert detail["requests"] == 5 and detail["byCode"] == {"200": 5}
    finally:
        lifecycle.stop("direct")


def test_a_replica_that_does_not_answer_leaves_the_gateways_counts() -> None:
    gateway = {"requests": 4, "byCode": {"200": 3, "503": 1}, "byRevision": {"r1": 4}, "p50_ms": 1.0}
    assert merged(gateway, None) == gateway  # a custom container, or nothing served
    shown = merged(gateway, ServedCounts(2, {"200": 2}, {"r1": 2}))  # a replica restarted: counts from zero
    assert shown["requests"] == 4 and shown["byCode"] == {"200": 3, "503": 1} and shown["byRevision"] == {"r1": 4}
    shown = merged(gateway, ServedCounts(9, {"200": 8, "400": 1}, {"r1": 9}))
    assert shown["requests"] == 9 and shown["byCode"] == {"200": 8, "400": 1, "503": 1}
    assert shown["served"] == {"requests": 9, "byCode": {"200": 8, "400": 1}} and shown["p50_ms"] == 1.0


def test_a_port_that_is_no_model_server_counts_nothing() -> None:
    from millpond.server.replica_counts import _inferences

    async def read() -> dict[str, int]:
        router = Router()
        try:
            return await _inferences(router, "http://127.0.0.1:9")  # nothing listens: refused at once
        finally:
            await router.aclose()

    assert asyncio.run(read()) == {}

"""The Kubernetes API's service proxy to ``ml-pipeline`` on a real ``millpond server``: what ``kfp.Client()`` reaches
through a kubeconfig. Only the KFP API's paths go through; the caller's credentials count as for any request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server_support import Served, call

TOKEN = "service-proxy-test-token"
PROXY = "/api/v1/namespaces/kubeflow/services/ml-pipeline:http/proxy"


@pytest.fixture
def served(home: Path) -> Iterator[Served]:
    server = Served(token=TOKEN)
    yield server
    server.stop()


def test_the_kfp_api_answers_through_the_service_proxy_and_nothing_else_does(served: Served) -> None:
    assert call(served.url, "GET", f"{PROXY}/apis/v2beta1/healthz", TOKEN) == (200, {"multi_user": False})
    status, answer = call(served.url, "POST", f"{PROXY}/apis/v2beta1/experiments", TOKEN,
                          {"display_name": "through-the-proxy"})
    assert status == 200, answer
    status, listed = call(served.url, "GET", "/apis/v2beta1/experiments", TOKEN)
    assert "through-the-proxy" in [e["display_name"] for e in listed["experiments"]]
    assert call(served.url, "GET", f"{PROXY}/apis/v2beta1/healthz")[0] == 401  # no credential: refused as ever
    for other in (f"{PROXY}/api/v1/namespaces/default/secrets", f"{PROXY}/../../api/v1/namespaces",
                  "/api/v1/namespaces/kubeflow/services/minio-service:9000/proxy/apis/v2beta1/healthz"):
        status, answer = call(served.url, "GET", other, TOKEN)
        assert status == 404, (other, status, answer)

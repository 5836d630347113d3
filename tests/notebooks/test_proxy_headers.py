"""What the notebook proxy sends Jupyter: the caller's headers without millpond's credentials (the bearer, the
``millpond_session`` cookie, the user-id header) or hop-by-hop headers, with Jupyter's own token; and the
paths it refuses to forward (dot segments, raw or percent-encoded); on a real server, the prefix without its
trailing slash redirected, and a refused WebSocket handshake answered with the HTTP status a request gets."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest
import websocket
from starlette.applications import Starlette
from starlette.requests import Request

from millpond.server.notebook_proxy import _rest_problem, forwarded_headers
from tests.server_support import Served


def _request(headers: dict[str, str], userid_header: str = "kubeflow-userid") -> Request:
    app = Starlette()
    app.state.userid_header = userid_header
    return Request({"type": "http", "method": "GET", "path": "/notebook/ns/lab/api/status", "app": app,
                    "headers": [(key.lower().encode(), value.encode()) for key, value in headers.items()]})


def test_millpond_credentials_are_taken_out_and_jupyters_token_put_in() -> None:
    sent = forwarded_headers(_request({
        "Host": "millpond.example:8888", "Authorization": "Bearer mpt_secret", "kubeflow-userid": "alice@example.com",
        "X-Remote-User": "alice", "Cookie": "millpond_session=s3cret; _xsrf=abc; username-x=y",
        "Connection": "keep-alive", "Accept": "application/json"}, userid_header="X-Remote-User"), "jupyter-token")
    assert sent["Authorization"] == "token jupyter-token"
    assert sent["Cookie"] == "_xsrf=abc; username-x=y"
    assert sent["Host"] == "millpond.example:8888" and sent["accept"] == "application/json"
    lowered = {key.lower() for key in sent}
    assert not lowered & {"kubeflow-userid", "x-remote-user", "connection"}
    assert "mpt_secret" not in repr(sent) and "s3cret" not in repr(sent)


def test_only_the_notebooks_own_paths_are_forwarded() -> None:
    assert _rest_problem("/notebook/ns/lab/api/kernels", "ns", "lab") is None
    assert _rest_problem("/notebook/ns/lab/", "ns", "lab") is None
    for path in ("/notebook/ns/lab/../other/api", "/notebook/ns/lab/%2e%2e/other", "/notebook/ns/lab/api/%2E/x",
                 "/notebook/ns/lab/..%5C..%5Cx", "/notebook/ns/labx/api"):
        assert _rest_problem(path, "ns", "lab") is not None, path


def _raw(served: Served, method: str, path: str) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    connection.request(method, path)
    return connection.getresponse()


def test_the_prefix_without_its_slash_is_redirected_and_a_refused_handshake_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_HOME", str(tmp_path / "home"))
    served = Served()
    try:
        answer = _raw(served, "GET", "/notebook/default/lab?reset=1")
        assert (answer.status, answer.getheader("Location")) == (301, "/notebook/default/lab/?reset=1")
        answer = _raw(served, "POST", "/notebook/default/lab")
        assert (answer.status, answer.getheader("Location")) == (307, "/notebook/default/lab/")
        # a WebSocket to a notebook that does not exist: 404 with the Kubernetes-style message, as over HTTP
        with pytest.raises(websocket.WebSocketBadStatusException) as refused:
            websocket.create_connection(served.url.replace("http://", "ws://") +
                                        "/notebook/default/missing/api/kernels/x/channels", timeout=30)
        assert refused.value.status_code == 404
        assert json.loads(refused.value.resp_body)["message"] == 'notebooks.kubeflow.org "missing" not found'
    finally:
        served.stop()

"""What the notebook proxy sends Jupyter: the caller's headers without millpond's credentials (the bearer, the
``millpond_session`` cookie, the user-id header) or hop-by-hop headers, with Jupyter's own token; and the
paths it refuses to forward (dot segments, raw or percent-encoded)."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request

from millpond.server.notebook_proxy import _rest_problem, forwarded_headers


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

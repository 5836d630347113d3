"""The three ways into a multi-user server, and single-user mode unchanged, over real HTTP."""

from __future__ import annotations

import http.client
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from millpond.access.credentials import Credentials
from millpond.server.access import AccessSettings, parse_proxies
from millpond.settings import load_settings
from tests.server_support import Served

SERVER_TOKEN = "server-token-for-tests"
RBAC = "rbac.authorization.k8s.io"


@pytest.fixture
def multi(home: Path) -> Iterator[tuple[Served, dict[str, str]]]:
    """A multi-user server trusting the proxy header from 127.0.0.2 only; alice (edit in team-a) with a token."""
    credentials = Credentials(load_settings())
    credentials.add_user("alice@example.org", "alice-password")
    token = credentials.issue_token("alice@example.org").secret
    served = Served(access=AccessSettings(True, SERVER_TOKEN, parse_proxies(["127.0.0.2/32"])))
    try:
        yield served, {"alice": token}
    finally:
        served.stop()


def _get(url: str, **headers: str) -> requests.Response:
    return requests.get(url, headers={key.replace("_", "-"): value for key, value in headers.items()}, timeout=30)


def test_nothing_is_reachable_without_an_identity(multi: tuple[Served, dict[str, str]]) -> None:
    served, _ = multi
    for path in ("/apis/v2beta1/runs", "/api/v1/namespaces/default/configmaps", "/metrics",
                 "/apis/millpond/v1/datasets", "/ui-api/nodes"):
        answer = _get(served.url + path)
        assert answer.status_code == 401, (path, answer.text)
        assert "authentication required" in answer.text
    kube = _get(served.url + "/api/v1/namespaces/default/configmaps").json()
    assert kube["kind"] == "Status" and kube["reason"] == "Unauthorized"
    assert _get(served.url + "/").status_code == 200  # the login page
    assert _get(served.url + "/apis/v2beta1/healthz").json() == {"multi_user": True}
    assert _get(served.url + "/ui-api/whoami").json()["user"] is None


def test_tokens_the_server_token_and_wrong_tokens(multi: tuple[Served, dict[str, str]]) -> None:
    served, tokens = multi
    mine = _get(served.url + "/ui-api/whoami", authorization=f"Bearer {tokens['alice']}").json()
    assert mine["user"] == "alice@example.org" and mine["via"] == "token" and mine["namespaces"] == []
    admin = _get(served.url + "/ui-api/whoami", authorization=f"bearer {SERVER_TOKEN}").json()
    assert admin["user"] == "system:admin" and admin["namespaces"] is None
    for wrong in ("mpt_wrong", "Bearer", SERVER_TOKEN + "x", tokens["alice"][:-1]):
        answer = _get(served.url + "/apis/v2beta1/runs", authorization=f"Bearer {wrong}")
        assert answer.status_code == 401 and "invalid, expired or revoked token" in answer.text
    # a wrong token is refused even with a session or header that would have been good: never a weaker way in
    answer = _get(served.url + "/apis/v2beta1/healthz", authorization="Bearer mpt_wrong")
    assert answer.status_code == 401


def test_the_identity_header_is_trusted_only_from_the_proxy(multi: tuple[Served, dict[str, str]]) -> None:
    served, tokens = multi
    forged = _get(served.url + "/ui-api/whoami", **{"kubeflow-userid": "accounts.google.com:admin@example.org"})
    assert forged.status_code == 403 and "trusted only from the proxy" in forged.text
    # with a good token too: the forged header is still refused
    forged = _get(served.url + "/ui-api/whoami", authorization=f"Bearer {tokens['alice']}",
                  **{"kubeflow-userid": "bob"})
    assert forged.status_code == 403
    proxied = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30, source_address=("127.0.0.2", 0))
    proxied.request("GET", "/ui-api/whoami", headers={"kubeflow-userid": "accounts.google.com:dana@example.org"})
    answer = proxied.getresponse()
    body = json.loads(answer.read())
    assert answer.status == 200, body
    assert body["user"] == "dana@example.org" and body["via"] == "proxy"


def test_login_cookie_logout_and_throttling(multi: tuple[Served, dict[str, str]]) -> None:
    served, _ = multi
    client = _Session(served.url)
    wrong = client.post("/ui-api/login", json={"username": "alice@example.org", "password": "nope"})
    unknown = client.post("/ui-api/login", json={"username": "nobody@example.org", "password": "nope"})
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json()["message"] == unknown.json()["message"] == "invalid username or password"
    good = client.post("/ui-api/login", json={"username": "alice@example.org", "password": "alice-password"})
    assert good.status_code == 200, good.text
    cookie = good.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    assert client.get("/ui-api/whoami").json()["via"] == "session"
    assert client.get("/apis/v2beta1/pipelines").status_code == 200  # the shared pipelines: every user reads them
    # a cross-site form cannot log out (or in): the Origin check refuses it before the route
    forged = client.post("/ui-api/logout", headers={"origin": "https://evil.example"})
    assert forged.status_code == 403
    assert client.post("/ui-api/logout").status_code == 200
    assert client.get("/apis/v2beta1/pipelines").status_code == 401
    for _ in range(5):
        client.post("/ui-api/login", json={"username": "victim@example.org", "password": "guess"})
    locked = client.post("/ui-api/login", json={"username": "victim@example.org", "password": "guess"})
    assert locked.status_code == 429 and int(locked.headers["retry-after"]) > 0


class _Session(requests.Session):
    """A browser-like client of one server: its cookies kept, paths relative to its URL."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", 30)
        return super().request(method, self.url + str(url), *args, **kwargs)


def test_single_user_mode_is_unchanged(home: Path) -> None:
    served = Served(token=SERVER_TOKEN)
    try:
        assert _get(served.url + "/apis/v2beta1/runs").status_code == 401
        answer = _get(served.url + "/apis/v2beta1/runs", authorization=f"Bearer {SERVER_TOKEN}")
        assert answer.status_code == 200
        who = _get(served.url + "/ui-api/whoami", authorization=f"Bearer {SERVER_TOKEN}",
                   **{"kubeflow-userid": "accounts.google.com:someone"}).json()
        assert who == {"multi_user": False, "user": "someone", "via": "header", "admin": False, "namespaces": None}
        assert _get(served.url + "/apis/v2beta1/healthz", authorization=f"Bearer {SERVER_TOKEN}").json() == {
            "multi_user": False}
        login = requests.post(served.url + "/ui-api/login", json={"username": "a", "password": "b"},
                           headers={"authorization": f"Bearer {SERVER_TOKEN}"})
        assert login.status_code == 404 and "single-user" in login.text
    finally:
        served.stop()


def test_user_commands(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("long-enough-password\n"))
    added = cli("user", "add", "erin@example.org", "--password-stdin", "--admin")
    assert added.code == 0, added.err
    listed = cli("user", "list")
    assert "erin@example.org" in listed.out and "yes" in listed.out
    created = cli("user", "token", "create", "erin@example.org", "--expires", "2d", "--description", "ci")
    assert created.code == 0 and created.out.strip().startswith("mpt_") and created.out.count("\n") == 1
    assert created.out.strip() not in cli("user", "token", "list").out
    token_id = cli("user", "token", "list", "erin@example.org").out.splitlines()[1].split()[0]
    assert cli("user", "token", "revoke", token_id).code == 0
    for args in (("user", "add", "system:x", "--password-stdin"), ("user", "token", "create", "nobody"),
                 ("user", "token", "create", "erin@example.org", "--expires", "-1h"),
                 ("user", "token", "revoke", "no-such-id"), ("user", "delete", "nobody")):
        monkeypatch.setattr("sys.stdin", io.StringIO("long-enough-password\n"))
        refused = cli(*args)
        assert refused.code == 2, (args, refused)
        assert refused.err.startswith("error: ") and refused.err.count("\n") == 1 and "Traceback" not in refused.err
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    assert cli("user", "passwd", "erin@example.org", "--password-stdin").code == 2
    assert cli("user", "delete", "erin@example.org").code == 0
    assert "erin" not in cli("user", "list").out

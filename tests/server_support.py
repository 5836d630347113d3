"""A `millpond server` for tests: uvicorn in a thread on a free loopback port, over the current MILLPOND_HOME."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from millpond.server.access import AccessSettings
from millpond.settings import load_settings

if TYPE_CHECKING:
    from millpond.server.access import AccessSettings


class Served:
    """A running server (its URL, and how to stop it with the runs it started); with ``tls``, over HTTPS with
    millpond's own certificate in the home (``ca``: the CA a client trusts), as ``millpond server --tls``."""

    def __init__(self, token: str | None = None, tls: bool = False, access: AccessSettings | None = None) -> None:
        import uvicorn

        from millpond.server import tls as certificates
        from millpond.server.app import create_app
        from millpond.server.stopping import API_HTTP, API_LOOP

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        files = certificates.ensure_certificate(load_settings().home, certificates.Subjects.of([])) if tls else None
        self.ca = files.authority if files else None
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.app = create_app(load_settings(), token, access=access)
        self.server = uvicorn.Server(uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="warning", loop=API_LOOP, http=API_HTTP,
            ssl_certfile=files.certificate if files else None, ssl_keyfile=files.key if files else None))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        self.app.state.millpond.executor.stop_all()
        self.server.should_exit = True
        self.thread.join(10)


def module_home(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """A MILLPOND_HOME for a test module (module-scoped fixtures cannot use monkeypatch), restored after."""
    path = tmp_path_factory.mktemp(name) / "home"
    old = os.environ.get("MILLPOND_HOME")
    os.environ["MILLPOND_HOME"] = str(path)
    yield path
    if old is None:
        os.environ.pop("MILLPOND_HOME", None)
    else:
        os.environ["MILLPOND_HOME"] = old


def serving(token: str | None = None, tls: bool = False) -> Iterator[Served]:
    """A server for the length of a fixture."""
    served = Served(token, tls)
    yield served
    served.stop()


def call(url: str, method: str, path: str, token: str | None = None, body: Any = None,
         headers: dict[str, str] | None = None, timeout: float = 60) -> tuple[int, Any]:
    """One request to a server at ``url`` (``Authorization: Bearer TOKEN`` when given, ``body`` as JSON): its
    status and JSON answer (the text when it is none)."""
    sent = {**(headers or {})}
    if token:
        sent["Authorization"] = f"Bearer {token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        sent["Content-Type"] = "application/json"
    request = urllib.request.Request(url + path, data=data, method=method, headers=sent)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            status, text = answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode()
    try:
        return status, json.loads(text) if text else None
    except ValueError:
        return status, text

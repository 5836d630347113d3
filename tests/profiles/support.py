"""A multi-user ``millpond server`` for the profile tests: uvicorn in a thread on a free loopback port over the
current MILLPOND_HOME, the server token being the administrator, and users with API tokens of their own."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from millpond.access.credentials import Credentials
from millpond.settings import load_settings

ADMIN_TOKEN = "admin-s3cret"  # the server's own token: system:masters


class MultiUserServer:
    """``millpond server --multi-user`` in this process (``stop`` ends it and the runs it started)."""

    def __init__(self) -> None:
        import uvicorn

        from millpond.server.access import AccessSettings
        from millpond.server.app import create_app

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.app = create_app(load_settings(), access=AccessSettings(multi_user=True, token=ADMIN_TOKEN))
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=port, log_level="warning"))
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

    def call(self, method: str, path: str, token: str | None, body: Any = None) -> tuple[int, Any]:
        """(status, the JSON answer, or the text when it is none)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                status, text = answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode()
        try:
            return status, json.loads(text) if text else None
        except json.JSONDecodeError:
            return status, text


def user_token(name: str) -> str:
    """A user with a password nobody uses, and an API token of theirs (its secret)."""
    credentials = Credentials(load_settings())
    credentials.add_user(name, "correct horse battery staple")
    return credentials.issue_token(name).secret

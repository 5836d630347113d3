"""``millpond server --tls`` in a process of its own, and HTTPS requests to it that trust a given CA."""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MILLPOND = Path(sys.executable).parent / "millpond"


def https_call(port: int, path: str, ca: Path | None, token: str | None = None, method: str = "GET",
               headers: dict[str, str] | None = None, body: bytes | None = None,
               host: str = "127.0.0.1") -> tuple[int, Any]:
    """One HTTPS request verified against ``ca`` (the system's CAs when None), and its JSON answer (or text)."""
    context = ssl.create_default_context(cafile=str(ca) if ca else None)
    connection = http.client.HTTPSConnection(host, port, timeout=60, context=context)
    try:
        sent = {**({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        text = response.read().decode("utf-8", "replace")
    finally:
        connection.close()
    try:
        return response.status, json.loads(text)
    except ValueError:
        return response.status, text


def served_certificate(port: int, ca: Path) -> bytes:
    """The DER certificate the server at ``port`` presents (verified against ``ca``)."""
    context = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as wrapped:
        certificate = wrapped.getpeercert(binary_form=True)
    assert certificate is not None
    return certificate


class TlsServer:
    """``millpond server ARGS`` over ``home`` on a free loopback port, up once it answers HTTPS trusting ``ca``
    (default: millpond's own CA in the home)."""

    def __init__(self, home: Path, args: list[str], token: str | None = None, ca: Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self.ca = ca or home / "tls" / "ca.crt"
        self.token = token
        self.log_path = home.parent / f"server-{self.port}.log"
        environment = {**os.environ, "MILLPOND_HOME": str(home), **(env or {})}
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen([str(MILLPOND), "server", "--port", str(self.port), *args],
                                            env=environment, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while True:
            try:
                if https_call(self.port, "/apis/v2beta1/healthz", self.ca, token)[0] == 200:
                    break
            except OSError:  # not listening yet, or the CA not written yet
                pass
            assert self.process.poll() is None, self.log()
            assert time.monotonic() < deadline, "server did not start: " + self.log()
            time.sleep(0.1)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)

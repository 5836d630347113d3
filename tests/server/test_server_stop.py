"""``millpond server`` stops on SIGTERM while a client holds a watch open (as ``kubectl get -w`` does)."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.conftest import MILLPOND_BIN


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_watch_does_not_keep_the_server_from_stopping(home: Path) -> None:
    port = _free_port()
    log = home.parent / "server.log"
    with open(log, "wb") as output:
        server = subprocess.Popen([str(MILLPOND_BIN), "server", "--port", str(port)], stdout=output,
                                  stderr=subprocess.STDOUT, env={**os.environ, "MILLPOND_HOME": str(home)})
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        watcher = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        watcher.request("GET", "/api/v1/namespaces/default/configmaps?watch=true")
        answer = watcher.getresponse()
        assert answer.status == 200
        server.send_signal(signal.SIGTERM)
        code = server.wait(60)  # raises TimeoutExpired when a watch still holds the server
        assert code in (0, 130, 128 + signal.SIGTERM), (code, log.read_text())  # 130: the CLI's "cancelled"
        assert answer.read() == b""  # the watch ended cleanly: no event, no torn line
        assert "Traceback" not in log.read_text()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()

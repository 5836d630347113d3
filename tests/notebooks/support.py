"""Talking to a notebook through ``millpond server``'s proxy as a browser does: Jupyter's REST API and a kernel's
WebSocket channels (Jupyter's messaging protocol, v5.3, with the ``websocket-client`` library)."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import websocket


def request(url: str, method: str = "GET", body: Any = None, headers: dict[str, str] | None = None,
            timeout: float = 30) -> tuple[int, str]:
    data = None if body is None else json.dumps(body).encode()
    sent = {**({"Content-Type": "application/json"} if data is not None else {}), **(headers or {})}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method, headers=sent),
                                    timeout=timeout) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def execute(ws_url: str, code: str, headers: dict[str, str] | None = None, timeout: float = 60,
            origin: str | None = None, ca: str | None = None) -> str:
    """Run ``code`` in the kernel whose channels are at ``ws_url``; the ``text/plain`` of its execute_result.
    ``origin``: the page's origin the handshake names (a browser's; websocket-client's own otherwise);
    ``ca``: the CA file a ``wss://`` server's certificate is checked against."""
    socket = websocket.create_connection(ws_url, timeout=timeout, header=[f"{k}: {v}" for k, v in
                                                                          (headers or {}).items()],
                                         **({"origin": origin} if origin else {}),
                                         **({"sslopt": {"ca_certs": ca}} if ca else {}))
    try:
        msg_id = uuid.uuid4().hex
        socket.send(json.dumps({
            "header": {"msg_id": msg_id, "username": "test", "session": uuid.uuid4().hex, "msg_type": "execute_request",
                       "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = json.loads(socket.recv())
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if message["msg_type"] == "execute_result":
                return str(message["content"]["data"]["text/plain"])
            if message["msg_type"] == "error":
                raise AssertionError(f"the kernel answered an error: {message['content']}")
        raise AssertionError(f"no execute_result within {timeout} s")
    finally:
        socket.close()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def marked_processes(mark: str) -> list[int]:
    """The pids whose environment carries ``mark`` (a notebook's server and every kernel it started)."""
    found = []
    needle = mark.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                if needle in environ.read() and alive(int(entry)):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def environ_value(pid: int, name: str) -> str | None:
    with open(f"/proc/{pid}/environ", "rb") as environ:
        for item in environ.read().split(b"\0"):
            key, _, value = item.partition(b"=")
            if key.decode() == name:
                return value.decode()
    return None


def kernel_channels(base: str, headers: dict[str, str] | None = None) -> str:
    """Start a kernel through the notebook's REST API at ``base`` (``…/notebook/NS/NAME``): its channels' URL."""
    status, text = request(f"{base}/api/kernels", "POST", {"name": "python3"}, headers=headers)
    assert status == 201, text
    return base.replace("http", "ws", 1) + f"/api/kernels/{json.loads(text)['id']}/channels"


def ending_notebooks(server: Any) -> Iterator[Any]:
    """A fixture's body: yield ``server``; then delete every Notebook of the home (ending its processes) and
    stop the server."""
    from millpond.notebooks import objects
    from millpond.settings import load_settings
    from millpond.store.resources import ResourceStore

    yield server
    for resource in ResourceStore(load_settings()).list("Notebook", None):
        objects.delete(load_settings(), resource.namespace, resource.name)
    server.stop()

"""Run a notebook's cells in a kernel of a millpond Notebook, over the kernel's proxied WebSocket channels.

What JupyterLab does when you press Run: one ``execute_request`` per code cell on the ``shell`` channel of
``/notebook/NS/NAME/api/kernels/ID/channels`` (Jupyter's messaging protocol v5.3, JSON over one WebSocket,
as jupyter_server's default protocol carries it), its ``stream``, ``display_data``, ``execute_result``
and ``error`` messages on ``iopub`` gathered into the cell's outputs (nbformat's shapes), until the
kernel's ``execute_reply``. The executed notebook can be written out with nbformat.
"""

from __future__ import annotations

import json
import ssl
import time
import uuid
from typing import Any

import nbformat
import websocket


class CellFailed(AssertionError):
    """A cell ended with an error (its ``ename: evalue`` and the cell's source in the message)."""


class KernelChannels:
    """One kernel's channels through ``millpond server``'s proxy."""

    def __init__(self, url: str, headers: dict[str, str] | None = None, ca: str | None = None) -> None:
        options: dict[str, Any] = {"sslopt": {"ca_certs": ca, "cert_reqs": ssl.CERT_REQUIRED}} if ca else {}
        self.socket = websocket.create_connection(url, timeout=30, header=[f"{k}: {v}" for k, v in
                                                                           (headers or {}).items()], **options)
        self.session = uuid.uuid4().hex
        self.count = 0

    def close(self) -> None:
        self.socket.close()

    def execute(self, code: str, timeout: float) -> tuple[list[Any], dict[str, Any]]:
        """Run ``code``: its outputs (nbformat output nodes) and the ``execute_reply``'s content."""
        msg_id = uuid.uuid4().hex
        self.socket.send(json.dumps({
            "header": {"msg_id": msg_id, "username": "test", "session": self.session, "msg_type": "execute_request",
                       "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        outputs: list[Any] = []
        reply: dict[str, Any] | None = None
        idle = False
        deadline = time.monotonic() + timeout
        while reply is None or not idle:
            if time.monotonic() > deadline:
                raise AssertionError(f"the cell did not finish within {timeout:.0f} s:\n{code[:400]}")
            try:
                message = json.loads(self.socket.recv())
            except websocket.WebSocketTimeoutException:
                continue
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "execute_reply":
                reply = content
            elif kind == "status" and content.get("execution_state") == "idle":
                idle = True
            elif kind == "stream":
                if outputs and outputs[-1].get("output_type") == "stream" and outputs[-1]["name"] == content["name"]:
                    outputs[-1]["text"] += content["text"]
                else:
                    outputs.append(nbformat.v4.new_output("stream", name=content["name"], text=content["text"]))
            elif kind in ("display_data", "execute_result"):
                extra = {"execution_count": content.get("execution_count")} if kind == "execute_result" else {}
                outputs.append(nbformat.v4.new_output(kind, data=content["data"],
                                                      metadata=content.get("metadata", {}), **extra))
            elif kind == "error":
                outputs.append(nbformat.v4.new_output("error", ename=content["ename"], evalue=content["evalue"],
                                                      traceback=content["traceback"]))
        return outputs, reply

    def run_cell(self, cell: Any, timeout: float = 120) -> None:
        """Execute one code cell of a notebook in place (outputs and execution count), as JupyterLab does."""
        outputs, reply = self.execute(cell.source, timeout)
        cell.outputs = outputs
        cell.execution_count = reply.get("execution_count")
        if reply.get("status") != "ok":
            raise CellFailed(f"{reply.get('ename')}: {reply.get('evalue')}\nin the cell:\n{cell.source[:600]}\n"
                             + "".join(str(o.get("text", "")) for o in outputs)[-3000:])

"""The line protocol of this machine's warm fork servers (``runners.forkserver``, ``runners.zygote``).

A client connects to the server's Unix socket and sends one JSON request on one line; the
server answers with JSON lines (the child's pid, later what became of it). Both servers are
single-threaded and fork per request; this module is only how they talk, so neither holds a
second copy of it.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn


def encode_message(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def send_message(conn: socket.socket, message: dict[str, Any]) -> None:
    """Send one line; a peer that is gone is no error (there is nobody left to tell)."""
    try:
        conn.sendall(encode_message(message))
    except OSError:
        pass


def read_message(conn: socket.socket) -> dict[str, Any] | None:
    """One whole line from the peer, or None when it closed first."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(1 << 20)
        if not chunk:
            return None
        data += chunk
    message: dict[str, Any] = json.loads(data)
    return message


def drain(wake_read: int) -> None:
    """Empty a non-blocking signal wake-up pipe (``signal.set_wakeup_fd``)."""
    try:
        while os.read(wake_read, 4096):
            pass
    except BlockingIOError:
        pass


def serve_selector(listener: socket.socket) -> tuple[selectors.BaseSelector, int, int]:
    """The single-threaded server's loop set-up: a selector over the listener (key data ``"accept"``) and a
    non-blocking self-pipe that SIGCHLD writes to (``"child"``: reap what ended), with the pipe's read and
    write ends (a forked child closes both). SIGTERM exits; SIGINT and SIGHUP are ignored: a Ctrl-C or
    hang-up to the terminal's process group is the caller's to handle, not the server's."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_read, selectors.EVENT_READ, "child")
    return selector, wake_read, wake_write


def end_child(body: Callable[[], int]) -> NoReturn:
    """All a forked child does: run ``body`` and leave with its exit code through ``os._exit``, whatever happens.

    The child must never return into the server that forked it (it would serve the socket too) nor run the
    server's atexit handlers: anything that escapes ``body`` is printed (exit 1), the output is flushed, and the
    process ends here."""
    code = 1
    try:
        code = body()
    except BaseException:  # noqa: BLE001 - whatever happens, the child must not return into the server
        try:
            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)

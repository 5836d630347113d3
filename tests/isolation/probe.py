"""Run inside a task of namespace A: try to reach namespace B's things; print one JSON report line.

``python probe.py TARGETS_JSON`` where TARGETS_JSON is ``{"paths": {name: path}, "pids": [host pid],
"env": [variable], "list": {name: folder}}``. For each path it tries to read it (a file's first byte, a
folder's listing) and to write into it (append to a file, create a file in a folder); for each pid (a
process of B's, as the host numbers it) it tries to signal it; it lists ``/proc`` and each folder of
``list`` (the home) and says which variables of ``env`` it was given. The report holds ``ok`` or the
error's name for every attempt. Standard library only: it runs in any task's interpreter.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import sys

REPORT_PREFIX = "isolation-report: "


def _attempt(action) -> str:
    try:
        action()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, type(exc).__name__)


def _read(path: str) -> None:
    if os.path.isdir(path):
        os.listdir(path)
        return
    with open(path, "rb") as handle:
        handle.read(1)


def _write(path: str) -> None:
    """Write into the object itself: a new file in the folder, or an append to the file (never a new file in
    its place: that would land in the sandbox's own cover, not in B's folder)."""
    if os.path.isdir(path):
        with open(os.path.join(path, "written-by-a"), "w") as handle:
            handle.write("a")
        return
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(descriptor, b"")
    finally:
        os.close(descriptor)


def probe(targets: dict) -> dict:
    paths = {name: {"read": _attempt(lambda p=path: _read(p)), "write": _attempt(lambda p=path: _write(p))}
             for name, path in targets.get("paths", {}).items()}
    visible = sorted(int(entry) for entry in os.listdir("/proc") if entry.isdigit())
    pids = {}
    for pid in targets.get("pids", []):
        pids[str(pid)] = {"seen": pid in visible, "signal0": _attempt(lambda p=pid: os.kill(p, 0)),
                          "kill": _attempt(lambda p=pid: os.kill(p, signal.SIGTERM))}
    listings = {}
    for name, folder in targets.get("list", {}).items():
        try:
            listings[name] = sorted(os.listdir(folder))
        except OSError as exc:
            listings[name] = [errno.errorcode.get(exc.errno or 0, "error")]
    return {"paths": paths, "pids": pids, "processes": len(visible), "listings": listings,
            "env": sorted(name for name in targets.get("env", []) if name in os.environ)}


if __name__ == "__main__":
    report = probe(json.loads(sys.argv[1]))
    print(REPORT_PREFIX + json.dumps(report, sort_keys=True), flush=True)
    if len(sys.argv) > 2 and sys.argv[2] == "--serve":  # a model replica: answer on $PORT until stopped
        import http.server

        class Ready(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Ready).serve_forever()

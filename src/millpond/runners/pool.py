"""The default runner: lightweight Python tasks fork from a warm server, the rest start afresh.

A task qualifies for the fork server when kfp's standard executor program is all it runs
with millpond's own interpreter (no packages_to_install venv), and its mounts, if any, land
on folders that already exist (its staged outputs), on new top-level folders (``/s3``, ``/data``:
the forked task gets a private root, as bubblewrap makes) or inside another of its mounts;
container components, venv tasks and tasks with volumes at new deeper paths (``/mnt/x``) start
their own process as before.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

from millpond.errors import MillpondError
from millpond.runners.base import Bind, ProcessResult, ProcessSpec
from millpond.runners.guardian import guardian
from millpond.runners.local import LocalRunner
from millpond.runners.process_groups import MARK_VAR, SWEEP_BEHIND, marked
from millpond.runners.watchdog import exit_status


class _ServerGone(MillpondError):
    """The fork server died or closed its socket; the launch falls back to a plain spawn."""


class ForkServer:
    """The engine's handle on one fork server process (started on first use)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._folder: str | None = None
        self._ready: bool | None = None
        self.can_mount = False

    @property
    def socket_path(self) -> str:
        assert self._folder is not None
        return os.path.join(self._folder, "forkserver.sock")

    def start(self) -> None:
        """Start the server process without waiting for it (its imports take ~0.2 s)."""
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                return
            self._folder = tempfile.mkdtemp(prefix="millpond-fs-")
            self._ready = None
            self._process = subprocess.Popen(
                [sys.executable, "-m", "millpond.runners.forkserver", self.socket_path],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env={**os.environ, **guardian().env()},  # it and the tasks it forks die with the engine
            )

    def ready(self, wait: bool) -> bool:
        """Whether the server answers; without ``wait`` a server still starting counts as not ready."""
        self.start()
        with self._lock:
            if self._ready is not None:
                return self._ready and self._process is not None and self._process.poll() is None
            assert self._process is not None and self._process.stdout is not None
            if not wait and not select.select([self._process.stdout], [], [], 0)[0]:
                return False
            line = self._process.stdout.readline()
            try:
                self.can_mount = bool(json.loads(line).get("mounts"))
                self._ready = True
            except (ValueError, AttributeError):
                self._ready = False
            return self._ready

    def spawn(self, request: Mapping[str, object]) -> tuple[socket.socket, BinaryIO, int]:
        """Start a task; the reader it returns will also carry the exit status (one buffer for both lines)."""
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            client.connect(self.socket_path)
            client.sendall(json.dumps(request).encode() + b"\n")
            reader = client.makefile("rb")
            line = reader.readline()
            if not line:
                raise _ServerGone()
            return client, reader, int(json.loads(line)["pid"])
        except (OSError, ValueError, KeyError) as exc:
            client.close()
            raise _ServerGone() from exc

    def close(self) -> None:
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                self._process.terminate()
                try:
                    self._process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._process.kill()
            self._process = None
            if self._folder:
                shutil.rmtree(self._folder, ignore_errors=True)  # its socket, and the tasks' root mount point
                self._folder = None


def _placeable(target: str, binds: list[Bind]) -> bool:
    """Whether the fork server can mount at ``target`` without touching the host: it exists, is a new
    top-level folder (made in the task's private root), or lies inside another bind's target."""
    path = Path(target)
    if path.exists() or len(path.parts) == 2:
        return True
    return any(Path(other.target) in path.parents for other in binds)


class PoolRunner:
    def __init__(self, use_fork_server: bool = True) -> None:
        self.local = LocalRunner()
        self.server = ForkServer() if use_fork_server else None

    def run(self, spec: ProcessSpec, cancel: threading.Event) -> ProcessResult:
        if cancel.is_set():  # the run was cancelled while this task waited for a slot
            return ProcessResult(exit_code=-1, seconds=0.0, error="cancelled before it started")
        if self._qualifies(spec):
            try:
                return self._run_forked(spec, cancel)
            except _ServerGone:
                pass  # the server died: this task starts its own process instead
        return self.local.run(spec, cancel)

    def _qualifies(self, spec: ProcessSpec) -> bool:
        if self.server is None or spec.python_task is None:
            return False
        # started with the run: ready in ~0.2 s, a fresh process costs ~0.15 s each
        if not self.server.ready(wait=True):
            return False
        if spec.binds and not self.server.can_mount:
            return False
        return all(_placeable(bind.target, spec.binds) for bind in spec.binds)

    def _run_forked(self, spec: ProcessSpec, cancel: threading.Event) -> ProcessResult:
        assert self.server is not None and spec.python_task is not None
        source, args = spec.python_task
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        mark = marked()  # the task's own: what it starts carries it, swept when it ends (process_groups)
        request = {
            "source": source,
            "args": args,
            "env": {**spec.env, **guardian().env(), **mark},
            "cwd": str(spec.cwd),
            "log_path": str(spec.log_path),
            "binds": [[str(b.source), b.target, b.read_only] for b in spec.binds],
        }
        client, reader, pid = self.server.spawn(request)
        watchdog = self.local.watchdog
        watchdog.watch(pid, cancel, spec.timeout_s)
        line = b""
        try:
            if spec.on_start is not None:
                spec.on_start(pid)  # the server kills its tasks when the engine dies; resume checks too
            line = reader.readline()
        finally:
            client.close()
            if line:
                SWEEP_BEHIND.add(mark[MARK_VAR])
            reason = watchdog.release(pid)
        if not line:  # the task ran (or runs): never start it a second time
            return ProcessResult(
                exit_code=-1, seconds=time.monotonic() - started, error="the fork server stopped while the task ran"
            )
        code = int(json.loads(line)["exit"])
        return ProcessResult(exit_code=exit_status(code), seconds=time.monotonic() - started, error=reason)

    def warm_up(self) -> None:
        """Start the fork server now, so it is ready by the time the first tasks are."""
        if self.server is not None:
            self.server.start()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        SWEEP_BEHIND.flush()  # what this run's tasks left behind ends before the run is recorded ended

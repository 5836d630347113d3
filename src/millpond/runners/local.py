"""Run a task as a plain child process of the engine (in a sandbox when it has mounts)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time

from millpond.runners.base import ProcessResult, ProcessSpec
from millpond.runners.sandbox import SandboxUnavailable, wrap

_KILL_GRACE_S = 5.0


class LocalRunner:
    """Start each task with fork/exec in its own process group; output goes to its log file."""

    def run(self, spec: ProcessSpec, cancel: threading.Event) -> ProcessResult:
        argv = spec.argv
        if os.sep not in argv[0] and shutil.which(argv[0], path=spec.env.get("PATH")) is None:
            return ProcessResult(exit_code=127, seconds=0.0, error=f"command not found on this machine: {argv[0]!r}")
        if spec.binds:
            try:
                argv = wrap(argv, spec.binds, spec.cwd)
            except SandboxUnavailable as exc:
                return ProcessResult(exit_code=-1, seconds=0.0, error=f"the task needs a private mount namespace: {exc}")
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with open(spec.log_path, "ab", buffering=0) as log:
            try:
                proc = subprocess.Popen(
                    argv,
                    env=spec.env,
                    cwd=spec.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except FileNotFoundError:
                return ProcessResult(exit_code=127, seconds=0.0, error=f"command not found on this machine: {argv[0]!r}")
            except PermissionError:
                return ProcessResult(exit_code=126, seconds=0.0, error=f"command is not executable: {argv[0]!r}")
            if spec.on_start is not None:
                spec.on_start(proc.pid)
            error = None
            while True:
                try:
                    code = proc.wait(timeout=0.05)
                    break
                except subprocess.TimeoutExpired:
                    pass
                elapsed = time.monotonic() - started
                if cancel.is_set() or (spec.timeout_s is not None and elapsed > spec.timeout_s):
                    error = "cancelled" if cancel.is_set() else f"timed out after {spec.timeout_s:.0f}s"
                    code = _stop(proc)
                    break
        return ProcessResult(exit_code=code, seconds=time.monotonic() - started, error=error)


def _stop(proc: subprocess.Popen[bytes]) -> int:
    """SIGTERM the task's whole process group, then SIGKILL what is left."""
    for sig, grace in ((signal.SIGTERM, _KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            return proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
    return proc.wait()

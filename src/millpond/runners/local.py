"""Run a task as a plain child process of the engine (in a sandbox when it has mounts, always in multi-user mode).

The child dies with the engine: the kernel SIGKILLs it if the engine goes (PR_SET_PDEATHSIG),
and the engine's guardian kills its whole process group and anything else carrying the
engine's token (see ``guardian``). What it started ends with the task, too, whatever session it
moved to (``setsid sleep 60 &``): it carries the task's own mark (``process_groups.marked``),
swept when the task ends, as a pod's processes end with it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time

from millpond.errors import TaskFailure
from millpond.runners import isolation
from millpond.runners.base import ProcessResult, ProcessSpec
from millpond.runners.guardian import die_with_parent, guardian
from millpond.runners.in_image import container_command, finish
from millpond.runners.process_groups import MARK_VAR, SWEEP_BEHIND, marked
from millpond.runners.sandbox import SandboxUnavailable, wrap
from millpond.runners.watchdog import Watchdog, exit_status


class LocalRunner:
    """Start each task with fork/exec in its own process group; output goes to its log file."""

    def __init__(self) -> None:
        self.watchdog = Watchdog()

    def run(self, spec: ProcessSpec, cancel: threading.Event) -> ProcessResult:
        if cancel.is_set():  # the run was cancelled while this task waited for a slot
            return ProcessResult(exit_code=-1, seconds=0.0, error="cancelled before it started")
        argv, env = spec.argv, spec.env
        mark = marked()
        started_in_image = None
        if spec.in_image is not None:  # the runtime's run: its client is the process watched here
            try:
                started_in_image = container_command(spec, {**guardian().env(), **mark})
            except TaskFailure as exc:  # a sidecar that could not start
                return ProcessResult(exit_code=-1, seconds=0.0, error=str(exc))
            argv, env = started_in_image.argv, started_in_image.env
        elif os.sep not in argv[0] and shutil.which(argv[0], path=spec.env.get("PATH")) is None:
            return ProcessResult(exit_code=127, seconds=0.0, error=f"command not found on this machine: {argv[0]!r}")
        elif spec.binds or isolation.required():  # multi-user: every task is confined to its own folders
            own = tuple(p for p in (spec.workspace, *spec.carried) if p is not None)
            try:
                argv = wrap(argv, spec.binds, spec.cwd, spec.env.get("PATH"), own=own, hidden=tuple(spec.hidden))
            except SandboxUnavailable as exc:
                said = str(exc) if isolation.required() else f"the task needs a private mount namespace: {exc}"
                return ProcessResult(exit_code=-1, seconds=0.0, error=said)
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with open(spec.log_path, "ab", buffering=0) as log:
            try:
                proc = subprocess.Popen(
                    argv,
                    env={**env, **guardian().env(), **mark},
                    cwd=started_in_image.folder if started_in_image else spec.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=die_with_parent(),  # noqa: PLW1509 - it only calls prctl, resolved before the fork
                )
            except FileNotFoundError:
                return ProcessResult(
                    exit_code=127, seconds=0.0, error=f"command not found on this machine: {argv[0]!r}"
                )
            except PermissionError:
                return ProcessResult(exit_code=126, seconds=0.0, error=f"command is not executable: {argv[0]!r}")
            self.watchdog.watch(proc.pid, cancel, spec.timeout_s)
            if spec.on_start is not None:
                spec.on_start(proc.pid)
            code = proc.wait()
            SWEEP_BEHIND.add(mark[MARK_VAR])  # what it left running in other sessions and groups
            reason = self.watchdog.release(proc.pid)
            kind = None
            if started_in_image is not None and spec.in_image is not None:
                kind = finish(spec.in_image, started_in_image, exit_status(code), stopped=reason is not None, log=log)
        if kind == "OOMKilled" and reason is None and spec.in_image is not None:
            limit = spec.in_image.memory_bytes
            reason = "OOMKilled: the container went over its memory limit" + (f" ({limit} bytes)" if limit else "")
        return ProcessResult(exit_code=exit_status(code), seconds=time.monotonic() - started, error=reason,
                             reason=kind)

    def close(self) -> None:
        pass

"""Many ``millpond`` commands, each its own process, without paying the interpreter's start-up each time.

A manifest corpus is run as ``millpond apply -f FILE`` once per row, each in a fresh home (its README's
protocol): a new interpreter per row spends ~1.5 s importing click, SQLAlchemy, the kinds' handlers and
their schemas before it reads the file. :class:`ForkedCli` starts one warm process
(:mod:`millpond.cli.warm_process`) that has imported all of that, and forks it once per command: the
command still runs in a process of its own (its own environment, working directory, stdin, exit status,
stdout and stderr, signals at their defaults, a traceback if it crashes), only warm. The child writes
its exit status to a file before it exits, so this side, which is not its parent, tells an exit from a
kill.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from millpond.runners.processes import is_running

POLL_S = 0.01  # how often the caller looks for a command's status file


@dataclass(frozen=True)
class Finished:
    """A command's end as ``subprocess.run`` reports it (``returncode`` 124: it ran past its timeout)."""

    returncode: int
    stdout: str
    stderr: str


class ForkedCli:
    """Runs ``millpond`` commands as forks of one warm process; thread-safe (one request at a time)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scratch = Path(tempfile.mkdtemp(prefix="millpond-forked-cli-"))
        self._count = 0
        self._warm = subprocess.Popen([sys.executable, "-m", "millpond.cli.warm_process"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def run(self, argv: list[str], env: dict[str, str], timeout_s: float, cwd: str | None = None,
            stdin: str | None = None) -> Finished:
        """``millpond ARGV`` with ``env`` as its whole environment and ``stdin`` as its input (none: empty);
        killed past ``timeout_s``."""
        with self._lock:
            self._count += 1
            files = {name: self._scratch / f"{self._count}.{name}" for name in ("stdout", "stderr", "status", "stdin")}
            if stdin is not None:
                files["stdin"].write_text(stdin)
            request = {"argv": argv, "env": env, "cwd": cwd or os.getcwd(), **{k: str(v) for k, v in files.items()},
                       "stdin": str(files["stdin"]) if stdin is not None else os.devnull}
            assert self._warm.stdin is not None and self._warm.stdout is not None
            self._warm.stdin.write(json.dumps(request) + "\n")
            answer = self._warm.stdout.readline()
        if not answer:
            raise RuntimeError("millpond's warm process for forked commands is gone")
        pid, ticks = answer.split()
        code = _wait(int(pid), None if ticks == "-" else ticks, files["status"], timeout_s)
        out, err = (files[name].read_text(errors="replace") if files[name].exists() else ""
                    for name in ("stdout", "stderr"))
        for path in files.values():
            path.unlink(missing_ok=True)
        if code == 124:
            err += f"\ntimed out after {timeout_s:.0f}s"
        return Finished(code, out, err)

    def close(self) -> None:
        if self._warm.stdin is not None:
            self._warm.stdin.close()
        try:
            self._warm.wait(timeout=10)
        except subprocess.TimeoutExpired:  # still starting under load (it reads stdin only once warm)
            self._warm.kill()
            self._warm.wait()  # reaped: nothing of it is left when close returns
        for path in self._scratch.iterdir():
            path.unlink(missing_ok=True)
        self._scratch.rmdir()


def _wait(pid: int, ticks: str | None, status: Path, timeout_s: float) -> int:
    """The exit status the command wrote; -9 when it ended without writing one (killed); 124 past the timeout.

    ``ticks`` is the child's start time as its parent read it right after the fork (None: it had ended
    already): a pid the kernel hands to another process meanwhile is neither waited for nor killed.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        if status.exists() and status.stat().st_size:
            code = int(status.read_text())
            while is_running(pid, ticks):  # it wrote its status and is flushing on its way out
                time.sleep(POLL_S)
            return code
        if not is_running(pid, ticks):
            return int(status.read_text()) if status.exists() and status.stat().st_size else -signal.SIGKILL
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            return 124
        time.sleep(POLL_S)

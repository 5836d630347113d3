"""``millpond ARGS`` as its own process, forked from one warm process per test worker.

Tests that check what the CLI prints and how it exits run it hundreds of times; a new interpreter
costs ~1.5 s of CPU each time (click, SQLAlchemy, the kinds' handlers, kfp), most of what those tests
cost on CI's two cores. ``millpond.cli.forked_cli`` forks each command from a process that has imported
all of that: still a process of its own (environment, working directory, stdin, exit status, stdout,
stderr), only warm. Tests that signal the process, or time it, start the real binary instead.
"""

from __future__ import annotations

import atexit
import os
import subprocess
from typing import Any

from millpond.cli.forked_cli import ForkedCli

_cli: ForkedCli | None = None


def millpond_process(args: list[Any], env: dict[str, str], *, stdin: str | None = None,
                     timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """What ``subprocess.run([millpond, *args], env=env, input=stdin, capture_output=True, text=True)``
    returns (in the current directory), without the interpreter's start-up."""
    global _cli
    if _cli is None:
        _cli = ForkedCli()
        atexit.register(_cli.close)
    argv = [str(arg) for arg in args]
    done = _cli.run(argv, env, timeout, cwd=os.getcwd(), stdin=stdin)
    return subprocess.CompletedProcess(["millpond", *argv], done.returncode, done.stdout, done.stderr)

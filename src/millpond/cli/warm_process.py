"""The warm process ``millpond.cli.forked_cli.ForkedCli`` forks each ``millpond`` command from.

Single-threaded (forking a threaded process is unsafe), it only imports: it calls nothing that caches
what a home holds. It reads one request per line on its stdin (JSON: argv, env, cwd and the files for
stdin, stdout, stderr and the exit status), forks, and answers the child's pid and start time (so the
caller never takes a reused pid for it); the kernel reaps the children (SIGCHLD ignored). The child
writes its exit status to the status file before it exits, so the
caller, which is not its parent, can tell an exit from a kill. It ends when its stdin closes (its caller
is gone). Kept apart from the caller's side so that importing ``forked_cli`` does not import the CLI.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import IO

import kfp.dsl  # noqa: F401 - warm: what a pipeline's own file imports for `millpond run`

import millpond.cli.commands  # noqa: F401 - warm: `millpond run` and `runs`
import millpond.pipelines.engine  # noqa: F401 - warm: the engine a run drives
from millpond.cli.main import main
from millpond.kinds import REGISTRY
from millpond.runners.processes import start_ticks


def _child(request: dict[str, object]) -> None:
    """Become ``millpond ARGV`` in the request's environment; never returns."""
    code = 1
    try:
        for signum in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
            signal.signal(signum, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(dict(request["env"]))  # type: ignore[call-overload]  # JSON: a str -> str mapping
        os.chdir(str(request["cwd"]))
        _redirect(0, str(request["stdin"]), os.O_RDONLY)
        _redirect(1, str(request["stdout"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        _redirect(2, str(request["stderr"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        sys.argv = ["millpond", *request["argv"]]  # type: ignore[misc]  # JSON: a list of str
        try:
            main(list(sys.argv[1:]))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
        except BaseException:  # as the interpreter would: the traceback on stderr, exit 1
            traceback.print_exc()
            code = 1
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    finally:
        try:
            Path(str(request["status"])).write_text(str(code))
        finally:
            os._exit(code)


def _redirect(fd: int, path: str, flags: int) -> None:
    opened = os.open(path, flags, 0o600)
    os.dup2(opened, fd)
    os.close(opened)


def serve(requests: IO[str], answers: IO[str]) -> None:
    """One fork per request line until ``requests`` closes."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the children
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the caller's to handle
    for line in requests:
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(request)
        answers.write(f"{pid} {start_ticks(pid) or '-'}\n")  # '-': it has ended (and been reaped) already
        answers.flush()


if __name__ == "__main__":
    REGISTRY.handlers()  # warm: every kind's handler, and through them the stores and schemas
    serve(sys.stdin, sys.stdout)

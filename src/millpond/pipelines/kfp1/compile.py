"""Compile a KFP v1 ``.py`` file to its Argo workflow with kfp 1.8, in a subprocess of the side interpreter.

The file runs there, not here: it needs kfp 1.x, and millpond has kfp 2. ``compile_v1.py``
does the work and leaves a one-line verdict; a file that never finishes (a loop at import) is
stopped after ``MILLPOND_KFP1_COMPILE_TIMEOUT`` seconds (120 by default). Every failure is one
``error:`` line naming the file: the user's exception, or, when kfp 1.8 cannot be installed,
that this is v1 code and how to compile it by hand.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
from pathlib import Path

from millpond.documents import MAX_TEXT_CHARS
from millpond.errors import UserError
from millpond.pipelines.kfp1.detect import V1Evidence
from millpond.pipelines.kfp1.side_env import (
    DROPPED_ENV,
    KFP1_VERSION,
    PYTHON_ENV,
    Progress,
    SideEnvironmentUnavailable,
    interpreter,
    line_progress,
)
from millpond.runners.guardian import die_with_parent

SCRIPT = Path(__file__).with_name("compile_v1.py")
TIMEOUT_ENV = "MILLPOND_KFP1_COMPILE_TIMEOUT"
DEFAULT_TIMEOUT_S = 120.0


def compile_timeout() -> float:
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{TIMEOUT_ENV}={text}: expected a number of seconds") from None
    if not 0 < value < 86400:
        raise UserError(f"{TIMEOUT_ENV}={text}: expected seconds between 0 and 86400")
    return value


def compile_v1(
    file: Path, pipeline_name: str | None, evidence: V1Evidence, progress: Progress = line_progress
) -> str:
    """The Argo workflow YAML that kfp 1.8 compiles ``file`` to (``pipeline_name`` picks among several)."""
    try:
        python = interpreter(progress)
    except SideEnvironmentUnavailable as exc:
        raise UserError(_unavailable(file, evidence, exc)) from None
    timeout = compile_timeout()
    with tempfile.TemporaryDirectory(prefix="millpond-kfp1-") as tmp:
        output, result, printed = Path(tmp) / "pipeline.yaml", Path(tmp) / "result.json", Path(tmp) / "stderr.txt"
        argv = [str(python), "-E", str(SCRIPT), str(file.resolve()), str(output), str(result), pipeline_name or ""]
        env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
        with printed.open("wb") as out:
            proc = subprocess.Popen(
                # what the file prints is not kept (it may print without end); a crash's traceback is on stderr
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out, env=env,
                start_new_session=True,
                preexec_fn=die_with_parent(),  # noqa: PLW1509 - prctl only, resolved before the fork
            )
            try:
                proc.wait(timeout=timeout)
            except BaseException as exc:  # the timeout or Ctrl-C: the user's code stops with its children
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                if isinstance(exc, subprocess.TimeoutExpired):
                    raise UserError(
                        f"{file}: kfp {KFP1_VERSION} did not finish compiling it in {timeout:g} s "
                        f"(stopped; {TIMEOUT_ENV} sets the limit)"
                    ) from None
                raise
        verdict = _verdict(result)
        if verdict is None:
            said = printed.read_bytes()[-4000:].decode("utf-8", errors="replace").strip().splitlines()
            last = said[-1] if said else "no output"
            raise UserError(f"{file}: the kfp {KFP1_VERSION} compiler ({python}) exited with status "
                            f"{proc.returncode}: {last}")
        if "error" in verdict:
            line = verdict.get("line")
            where = f"{file}:{line}" if isinstance(line, int) else str(file)
            if verdict.get("kind") == "environment":
                raise UserError(f"{file}: this is KFP v1 code ({evidence.where()}), but {PYTHON_ENV}: "
                                f"{verdict['error']}")
            raise UserError(f"{where}: {verdict['error']}".splitlines()[0])
        if output.stat().st_size > MAX_TEXT_CHARS:
            raise UserError(f"{file}: kfp {KFP1_VERSION} compiled a workflow larger than "
                            f"{MAX_TEXT_CHARS // (1024 * 1024)} MiB")
        return output.read_text(encoding="utf-8", errors="replace")


def _verdict(result: Path) -> dict[str, object] | None:
    try:
        value = json.loads(result.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) and ("ok" in value or isinstance(value.get("error"), str)) else None


def _unavailable(file: Path, evidence: V1Evidence, exc: SideEnvironmentUnavailable) -> str:
    compiled = file.with_suffix(".yaml")
    log = f" (log: {exc.log})" if exc.log else ""
    return (
        f"{file}: this is KFP v1 code ({evidence.where()}). millpond compiles v1 code with kfp {KFP1_VERSION} in a "
        f"side environment, which could not be installed: {exc.reason}{log}. Compile it yourself: in another "
        f"virtualenv `pip install kfp=={KFP1_VERSION}`, then `dsl-compile --py {file} --output {compiled}` and "
        f"`millpond run {compiled}` (or set {PYTHON_ENV} to that virtualenv's python)"
    )


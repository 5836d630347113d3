"""kfp 1.8's own interpreter: a virtual environment cached under the user's cache folder.

kfp 1.x and 2.x are the same package, so v1 code compiles in a second environment, never in
millpond's. It lives in ``$XDG_CACHE_HOME/millpond/kfp-1.8.22-pyX.Y`` (``~/.cache`` without
XDG_CACHE_HOME), outside any MILLPOND_HOME, so every home of the user shares one. It is made
once, with the interpreter running millpond (``python -m venv``, then that venv's ``pip
install kfp==1.8.22``: the user's pip settings, index and cache apply), in a folder beside it
that is renamed into place only when kfp imports there. A lock file makes a second first run
wait for the first instead of building too; a build killed half-way (kill -9) leaves only that
temporary folder, which the next build removes. pip's output goes to a log beside the venv.

``MILLPOND_KFP1_PYTHON`` names an interpreter that already has kfp 1.8 (a machine with no
index to install from); nothing is built then.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO

from filelock import FileLock, Timeout

from millpond.errors import UserError
from millpond.runners.guardian import die_with_parent

KFP1_VERSION = "1.8.22"
PYTHON_ENV = "MILLPOND_KFP1_PYTHON"
READY = ".millpond-ready"  # written inside the venv, before the rename, once kfp imports there
STEP_TIMEOUT_S = 900.0  # one step of the build (venv, pip install, the import check)
# Variables that would point the side interpreter at millpond's own packages (kfp 2).
DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")

# Shows a long step while it runs: called with a line that says what is happening.
Progress = Callable[[str], AbstractContextManager[object]]


class SideEnvironmentUnavailable(UserError):
    """kfp 1.8's environment could not be made: ``reason`` is the failing tool's last line."""

    def __init__(self, reason: str, venv: Path, log: Path | None) -> None:
        super().__init__(f"kfp {KFP1_VERSION} could not be installed in {venv}: {reason}")
        self.reason = reason
        self.venv = venv
        self.log = log


@contextlib.contextmanager
def line_progress(message: str) -> Iterator[None]:
    """The progress of a caller with no terminal of its own: one line on stderr."""
    print(f"{message}...", file=sys.stderr, flush=True)
    yield


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/millpond``; the XDG default (``~/.cache``) when it is unset or not absolute."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "millpond"


def venv_dir() -> Path:
    return cache_root() / f"kfp-{KFP1_VERSION}-py{sys.version_info.major}.{sys.version_info.minor}"


def log_path(venv: Path) -> Path:
    return venv.with_name(venv.name + ".log")


def is_ready(venv: Path) -> bool:
    """A finished build whose interpreter still resolves (its base Python may have been removed since)."""
    return (venv / READY).is_file() and (venv / "bin" / "python").exists()


def interpreter(progress: Progress = line_progress) -> Path:
    """The python that has kfp 1.8: ``MILLPOND_KFP1_PYTHON``'s, else the cached venv's, built now if need be."""
    named = os.environ.get(PYTHON_ENV, "").strip()
    if named:
        python = Path(named).expanduser()
        if not (python.is_file() and os.access(python, os.X_OK)):
            raise UserError(f"{PYTHON_ENV}={named}: not an executable file (it names a python that has kfp 1.8)")
        return python
    venv = venv_dir()
    if not is_ready(venv):
        try:
            _build_once(venv, progress)
        except OSError as exc:  # the cache folder cannot be written (permissions, a full disk)
            reason = f"{exc.strerror or exc}: {exc.filename or venv.parent}"
            raise SideEnvironmentUnavailable(reason, venv, None) from None
    return venv / "bin" / "python"


def _build_once(venv: Path, progress: Progress) -> None:
    """Build ``venv`` unless another process does: the lock beside it decides who."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(venv) + ".lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        with progress(f"waiting for another millpond to install kfp {KFP1_VERSION} in {venv}"):
            lock.acquire()
    try:
        if is_ready(venv):
            return
        _clear_leftovers(venv)
        log = log_path(venv)
        with progress(f"KFP v1 code: installing kfp {KFP1_VERSION} in a side environment, once (log: {log})"):
            _build(venv, log)
    finally:
        lock.release()


def _clear_leftovers(venv: Path) -> None:
    """Remove what a killed build left (its temporary folder) and a venv that no longer works; we hold the lock."""
    for stale in venv.parent.glob(f".{venv.name}.*"):
        shutil.rmtree(stale, ignore_errors=True)
    if venv.exists() or venv.is_symlink():
        aside = venv.with_name(f".{venv.name}.stale-{os.getpid()}")
        venv.rename(aside)
        shutil.rmtree(aside, ignore_errors=True)


def _build(venv: Path, log: Path) -> None:
    building = venv.with_name(f".{venv.name}.building-{os.getpid()}")
    python = building / "bin" / "python"
    steps = [
        ("python -m venv", [sys.executable, "-m", "venv", str(building)]),
        ("pip install", [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
                         f"kfp=={KFP1_VERSION}"]),
        ("import check", [str(python), "-c", "import kfp, kfp.compiler, kfp.dsl; print(kfp.__version__)"]),
    ]
    try:
        with log.open("wb") as out:
            out.write(f"# kfp {KFP1_VERSION} side environment, built {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
            for label, argv in steps:
                output = _run_step(argv, out)
                if output is None:
                    raise SideEnvironmentUnavailable(f"{label} took longer than {STEP_TIMEOUT_S:.0f} s", venv, log)
                code, text = output
                if code != 0:
                    raise SideEnvironmentUnavailable(f"{label} failed: {last_line(text)}", venv, log)
            if text.strip().splitlines()[-1:] != [KFP1_VERSION]:
                raise SideEnvironmentUnavailable(f"the import check found kfp {last_line(text)}", venv, log)
        _retarget(building, venv)
        (building / READY).write_text(f"kfp=={KFP1_VERSION}\n{sys.executable}\n")
        building.rename(venv)
    except BaseException:  # a failure, or Ctrl-C: nothing half-made stays behind
        shutil.rmtree(building, ignore_errors=True)
        raise


def _run_step(argv: list[str], out: BinaryIO) -> tuple[int, str] | None:
    """Run one step, its output going straight to the log: (exit status, that output), None on timeout."""
    out.write(f"$ {' '.join(argv)}\n".encode())
    out.flush()
    start = out.tell()
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        preexec_fn=die_with_parent(),  # noqa: PLW1509 - prctl only, resolved before the fork: pip dies with us
    )
    try:
        proc.wait(timeout=STEP_TIMEOUT_S)
    except BaseException as exc:  # the timeout, or Ctrl-C: the step's whole group goes
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if not isinstance(exc, subprocess.TimeoutExpired):
            raise
        return None
    out.seek(0, os.SEEK_END)
    with open(out.name, "rb") as log:
        log.seek(start)
        return proc.returncode, log.read().decode("utf-8", errors="replace")


def last_line(text: str) -> str:
    """What a failed pip said last: its last ``ERROR:`` line, else its last line that is not a warning."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    if errors:
        return errors[-1]
    plain = [line for line in lines if not line.startswith("WARNING:")]
    return (plain or lines or ["no output"])[-1]


def _retarget(building: Path, venv: Path) -> None:
    """Point the venv's scripts (pip's and kfp's shebangs, ``activate``) and its pyvenv.cfg at its final name."""
    old, new = str(building), str(venv)
    for script in [*(building / "bin").iterdir(), building / "pyvenv.cfg"]:
        if script.is_symlink() or not script.is_file():
            continue
        try:
            text = script.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if old in text:
            script.write_text(text.replace(old, new), encoding="utf-8")

"""Lightweight Python components: skip kfp's ``pip install`` prelude, cache their packages.

A component compiled by kfp starts ``sh -c "<pip install kfp==… [packages]> && "$0" "$@""``.
When kfp is importable here the prelude is dropped and the program runs with this
interpreter; ``packages_to_install`` go into a virtual environment cached per
requirement set (built with uv), never into millpond's own environment. That venv
sees millpond's site-packages after its own, so kfp imports from there.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from millpond.errors import TaskFailure
from millpond.runners.guardian import die_with_parent, guardian

_KFP_OWN = ("kfp", "typing-extensions", "typing_extensions")
# pip options that take a value; the ones uv understands are passed on, --trusted-host is not.
_OPTIONS_WITH_VALUE = {"--index-url", "-i", "--extra-index-url", "--trusted-host", "-f", "--find-links"}
_PASSED_ON = {"--index-url", "-i", "--extra-index-url", "-f", "--find-links"}
_POLL_S = 0.2
READY = ".millpond-ready"  # written in a venv once it is complete


class EnvironmentError_(TaskFailure):
    """Building a task's Python environment failed: the task fails with this message."""


@dataclass(frozen=True)
class Prelude:
    """What kfp's prelude asked for, and the command that follows it."""

    requirements: tuple[str, ...]
    index_options: tuple[str, ...]
    program: list[str]


def _requirement_name(req: str) -> str:
    name = req.split(";")[0]
    for sep in "=<>!~[ ":
        name = name.split(sep)[0]
    return name.strip().lower()


def split_prelude(command: list[str]) -> Prelude | None:
    """Recognise kfp's install prelude; None when the command is not a kfp lightweight one."""
    if len(command) < 4 or command[:2] != ["sh", "-c"]:
        return None
    found = _parse_prelude(command[2])
    return None if found is None else Prelude(found[0], found[1], command[3:])


@functools.lru_cache(maxsize=256)
def _parse_prelude(script: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(requirements, index options) of a prelude script; shlex is slow, and every task of a loop repeats it."""
    if "pip install" not in script or not script.rstrip().endswith('"$0" "$@"'):
        return None
    requirements: list[str] = []
    options: list[tuple[str, str]] = []
    for chunk in script.split("pip install")[1:]:
        words = shlex.split(chunk.split("&&")[0].replace("\\\n", " "))
        i = 0
        while i < len(words):
            word = words[i]
            if word in _OPTIONS_WITH_VALUE and i + 1 < len(words):
                if word in _PASSED_ON and (word, words[i + 1]) not in options:
                    options.append((word, words[i + 1]))
                i += 2
                continue
            if word.startswith("-") or word.startswith("$"):
                i += 1
                continue
            if _requirement_name(word) not in _KFP_OWN and word not in requirements:
                requirements.append(word)
            i += 1
    flat = tuple(part for pair in options for part in pair)
    return tuple(requirements), flat


# kfp's executor program (every kfp 2.x release since the prelude split), whitespace-normalised.
_EXECUTOR_PROGRAM = (
    'program_path=$(mktemp -d) printf "%s" "$0" > "$program_path/ephemeral_component.py" '
    '_KFP_RUNTIME=true python3 -m kfp.dsl.executor_main --component_module_path '
    '"$program_path/ephemeral_component.py" "$@"'
)


def executor_call(argv: list[str]) -> tuple[str, list[str]] | None:
    """(component source, executor arguments) when argv is exactly kfp's executor program."""
    if len(argv) < 4 or argv[:2] != ["sh", "-ec"] or " ".join(argv[2].split()) != _EXECUTOR_PROGRAM:
        return None
    return argv[3], argv[4:]


def _own_site_packages() -> list[str]:
    paths = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    return sorted(p for p in paths if os.path.isdir(p))


def python_bin_dir(prelude: Prelude, venvs_dir: Path, cancel: threading.Event | None = None) -> Path:
    """The bin folder whose ``python3`` runs the component: ours, or a cached venv's.

    Building a venv can take minutes (a large package): a cancelled run stops it (``cancel``).
    """
    if not prelude.requirements:
        return Path(sys.executable).parent
    return ensure_venv(prelude, venvs_dir, cancel)[0] / "bin"


def venv_key(prelude: Prelude) -> str:
    """The cached venv's name: its requirements, index options and the interpreter that builds it."""
    key_material = json.dumps(
        {
            "req": sorted(prelude.requirements),
            "opt": list(prelude.index_options),
            "py": sys.version,
            "exe": sys.executable,
        }
    )
    return hashlib.sha256(key_material.encode()).hexdigest()[:16]


def ensure_venv(
    prelude: Prelude, venvs_dir: Path, cancel: threading.Event | None = None, env: Mapping[str, str] | None = None
) -> tuple[Path, bool]:
    """The cached venv of ``prelude``'s requirements under ``venvs_dir``, and whether this call built it.

    Two builders of the same venv at once (two runs, two tasks on one Ray node) take turns on a
    lock beside it; the second finds it ready. ``env`` is the installer's environment (this
    process's when None): its pip and uv index settings apply, as they would to kfp's ``pip install``.
    """
    venv = venvs_dir / venv_key(prelude)
    ready = venv / READY
    if ready.exists():
        return venv, False
    venvs_dir.mkdir(parents=True, exist_ok=True)
    cancel = cancel or threading.Event()
    lock = FileLock(str(venv) + ".lock")
    while True:  # another run may be building the same venv: wait for it, but not past a cancel
        try:
            lock.acquire(timeout=_POLL_S)
            break
        except Timeout:
            if cancel.is_set():
                raise EnvironmentError_("cancelled while waiting for another run to build the venv") from None
    try:
        if ready.exists():
            return venv, False
        _build_venv(venv, prelude, cancel, installer_environment(os.environ if env is None else env))
        ready.write_text("\n".join(prelude.requirements) + "\n")
    finally:
        lock.release()
    return venv, True


# pip's index settings, which kfp's ``pip install`` prelude would obey, as uv's (uv reads only its own).
_PIP_TO_UV = {
    "PIP_INDEX_URL": "UV_INDEX_URL",
    "PIP_EXTRA_INDEX_URL": "UV_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS": "UV_FIND_LINKS",
    "PIP_TRUSTED_HOST": "UV_INSECURE_HOST",
}


def installer_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with pip's index settings given to uv too, where uv's own are not set."""
    out = dict(env)
    for pip_name, uv_name in _PIP_TO_UV.items():
        value = env.get(pip_name, "").strip()
        if value and uv_name not in env:
            # pip separates its lists with spaces; uv's --find-links list takes commas
            out[uv_name] = ",".join(value.split()) if uv_name == "UV_FIND_LINKS" else value
    return out


def _uv() -> str:
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if found:
        return found
    try:
        from uv import find_uv_bin  # noqa: PLC0415 - uv's binary, only when none is on PATH

        return find_uv_bin()
    except Exception as exc:  # uv is a dependency; this only fires in a broken install
        raise EnvironmentError_(f"uv is not available to build a task environment: {exc}") from None


def _build_venv(venv: Path, prelude: Prelude, cancel: threading.Event, env: dict[str, str]) -> None:
    if venv.exists():
        shutil.rmtree(venv)  # a half-built one from a killed run
    uv = _uv()
    steps = [
        [uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
        [
            uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
            *prelude.index_options, *prelude.requirements,
        ],
    ]
    for step in steps:
        code, output = _run_step(step, cancel, env)
        if code is None:
            shutil.rmtree(venv, ignore_errors=True)
            raise EnvironmentError_("cancelled while installing packages_to_install")
        if code != 0:
            detail = output.strip().splitlines()
            shutil.rmtree(venv, ignore_errors=True)
            reqs = " ".join(prelude.requirements)
            cause = detail[-1] if detail else "uv failed"
            raise EnvironmentError_(f"could not install packages_to_install ({reqs}): {cause}")
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "_millpond_parent.pth").write_text("\n".join(_own_site_packages()) + "\n")


def _run_step(argv: list[str], cancel: threading.Event, env: dict[str, str]) -> tuple[int | None, str]:
    """Run one uv command to its end, or kill it (and its children) on cancel: (exit status or None, output)."""
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**env, **guardian().env()}, start_new_session=True,
        preexec_fn=die_with_parent(),  # noqa: PLW1509 - it only calls prctl, resolved before the fork
    )
    while True:
        try:
            output, _ = proc.communicate(timeout=_POLL_S)
            return proc.returncode, output
        except subprocess.TimeoutExpired:
            if cancel.is_set():
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.communicate()
                return None, ""

"""kfp 1.8's side environment for the tests, built once per session, the hard way first.

Building it is the slow part (pip installs kfp 1.8.22: ~25 s with pip's cache warm), so one
build serves every test of the session. When ``XDG_CACHE_HOME`` names a cache that already
holds it, that one is used. Otherwise the build happens in a fresh cache folder as a user
would meet it at its worst: a first ``millpond run`` is stopped (SIGTERM) while pip is
installing, a second is killed with SIGKILL there, then two runs start at once. What that
showed is kept in :class:`SideEnv` for the tests that check it (``test_kfp1_source.py``).
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from millpond.pipelines.kfp1.side_env import KFP1_VERSION, is_ready

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "kfp_v1"
SEED003 = EXAMPLES / "seed003_calculation" / "pipeline.py"
MILLPOND_BIN = Path(sys.executable).parent / "millpond"
VENV_NAME = f"kfp-{KFP1_VERSION}-py{sys.version_info.major}.{sys.version_info.minor}"


@dataclass
class KillStory:
    """What a SIGKILL of the first build left, and what the two runs after it did."""

    leftovers: list[str]  # entries of the cache folder right after the kill
    pip_survivors: list[int]  # processes still working in the killed build's folder
    # a build stopped by SIGTERM before that: (exit status, stderr, the cache folder's entries after)
    interrupted: tuple[int, str, list[str]]
    runs: list[tuple[int, str, str]] = field(default_factory=list)  # (exit status, stdout, stderr) of each
    after: list[str] = field(default_factory=list)  # the cache folder's entries once both ended


@dataclass
class SideEnv:
    cache: Path  # what XDG_CACHE_HOME must be for millpond to find the environment
    story: KillStory | None  # None: an existing environment was reused

    @property
    def venv(self) -> Path:
        return self.cache / "millpond" / VENV_NAME

    def env(self) -> dict[str, str]:
        return {"XDG_CACHE_HOME": str(self.cache), "PIP_CACHE_DIR": pip_cache()}


def pip_cache() -> str:
    """pip's usual cache, kept when a test moves XDG_CACHE_HOME (so pip need not download again)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return os.environ.get("PIP_CACHE_DIR") or str(Path(base) / "pip")


def spawn(home: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(MILLPOND_BIN), *args], env={**os.environ, "MILLPOND_HOME": str(home), **env},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _processes_using(folder: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if str(folder).encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def _stopped_while_pip_works(home: Path, env: dict[str, str], cache: Path, how: int) -> subprocess.Popen[str]:
    """A first ``millpond run`` of v1 code, sent ``how`` once pip is installing kfp; it has ended on return."""
    log = cache / "millpond" / f"{VENV_NAME}.log"
    log.unlink(missing_ok=True)
    proc = spawn(home, env, "run", str(SEED003), "-p", "a=3")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if log.is_file() and "Collecting kfp" in log.read_text(errors="replace"):
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"the build ended before it could be stopped: {proc.communicate()}"
    proc.send_signal(how)
    proc.wait(timeout=60)
    return proc


@functools.cache
def side_env(scratch: Path) -> SideEnv:
    """The session's environment (cached per ``scratch``: each test module asks for it)."""
    existing = os.environ.get("XDG_CACHE_HOME")
    if existing and is_ready(Path(existing) / "millpond" / VENV_NAME):
        return SideEnv(Path(existing), None)
    cache, home = scratch / "cache", scratch / "home"
    env = {"XDG_CACHE_HOME": str(cache), "PIP_CACHE_DIR": pip_cache()}
    stopped = _stopped_while_pip_works(home, env, cache, signal.SIGTERM)
    interrupted = (stopped.returncode, stopped.communicate()[1], sorted(p.name for p in (cache / "millpond").iterdir()))
    _stopped_while_pip_works(home, env, cache, signal.SIGKILL).communicate()
    building = [p for p in (cache / "millpond").iterdir() if ".building-" in p.name]
    time.sleep(1.0)  # the kernel delivers pip's parent-death signal; give it a moment to die
    survivors = [pid for folder in building for pid in _processes_using(folder)]
    story = KillStory(sorted(p.name for p in (cache / "millpond").iterdir()), survivors, interrupted)
    # Two first runs at once on one fresh home: the side environment's build lock, and the new
    # metadata database both turn to WAL (SQLite's immediate "database is locked", store.sqlite_wal).
    pair_home = scratch / "home-pair"
    runs = [spawn(pair_home, env, "run", str(SEED003), "-p", "a=3", "-o", "json") for _ in range(2)]
    for proc in runs:
        out, err = proc.communicate(timeout=600)
        story.runs.append((proc.returncode, out, err))
    story.after = sorted(p.name for p in (cache / "millpond").iterdir())
    return SideEnv(cache, story)


@pytest.fixture(scope="session")
def kfp1(tmp_path_factory: pytest.TempPathFactory) -> SideEnv:
    """The session's side environment (each module that imports this fixture gets the same one)."""
    scratch = tmp_path_factory.getbasetemp() / "kfp1-side-env"
    scratch.mkdir(exist_ok=True)
    return side_env(scratch)


@pytest.fixture
def v1(kfp1: SideEnv, monkeypatch: pytest.MonkeyPatch) -> SideEnv:
    """This test's millpond finds the session's side environment."""
    for name, value in kfp1.env().items():
        monkeypatch.setenv(name, value)
    return kfp1

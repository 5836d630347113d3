"""Shared fixtures: an isolated MILLPOND_HOME per test and the real CLI, in-process or as a process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis times its own input generation and fails a test whose draws are slow; on a shared 2-core CI
# machine running four workers beside servers that measures the machine, not the code, so that check is off.
settings.register_profile("millpond", suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("millpond")

# No test may touch the user's own ~/.millpond: a test without the ``home`` fixture (or a process it
# starts) gets this session's scratch home instead. Set before millpond reads its settings.
os.environ["MILLPOND_HOME"] = tempfile.mkdtemp(prefix="millpond-test-home-")

from millpond.cli.main import main  # noqa: E402 - after the scratch home is in place

pytest_plugins = [
    "tests.s3_server",  # the session's one SeaweedFS server (s3_server fixture)
    "tests.pg_server",  # one PostgreSQL server (pg_server, pg_url fixtures)
    "tests.ray_cluster",  # a local Ray head and two worker nodes, started when a test asks (ray_cluster fixture)
    "tests.kfp1_env",  # kfp 1.8's side environment, built once when a test asks (kfp1, v1 fixtures)
    "tests.kube_sdk_env",  # the Kubeflow and KServe SDKs' side environment, built once per cache (kube_sdks fixture)
    "tests.containers_support",  # Podman, images made here and a local registry (podman, python_image, registry)
]

PIPELINES = Path(__file__).parent / "pipelines"
MILLPOND_BIN = Path(sys.executable).parent / "millpond"


@pytest.hookimpl(tryfirst=True)  # before the tmp_path factory reads --basetemp
def pytest_configure(config: pytest.Config) -> None:
    """Under ``-n N`` (the controller, before its workers start): where they write their groups, and a
    short base folder. xdist puts each worker's tmp_path under ``popen-gwN/``, and a test that writes
    tmp_path into a name (tests/runs/test_names_and_paths.py's absolute task names) finds its error
    line elides a name over ~70 characters: under ``/tmp/pytest-of-USER/pytest-N/popen-gwN/`` it did."""
    from tests.markers import GROUPS_ENV

    if hasattr(config, "workerinput") or getattr(config.option, "dist", "no") == "no":
        return
    if config.option.dist == "loadgroup":
        os.environ[GROUPS_ENV] = tempfile.mkdtemp(prefix="millpond-test-groups-")
    if not config.option.basetemp:
        config.option.basetemp = short = tempfile.mkdtemp(prefix="mp-")
        os.environ["MILLPOND_TEST_BASETEMP"] = short


def pytest_unconfigure(config: pytest.Config) -> None:
    from tests.markers import GROUPS_ENV

    if not hasattr(config, "workerinput"):
        for made in (GROUPS_ENV, "MILLPOND_TEST_BASETEMP"):
            if os.environ.get(made):
                shutil.rmtree(os.environ.pop(made), ignore_errors=True)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` by the groups tests/markers.py gives (xdist 3.8's own loses them under pytest 9)."""
    from tests.markers import GROUPS_ENV, make_group_scheduler

    if config.getvalue("dist") == "loadgroup" and os.environ.get(GROUPS_ENV):
        return make_group_scheduler(config, log)
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Markers from what each test uses (tests/markers.py), and the xdist groups of the heavy ones."""
    from tests.markers import apply_markers

    apply_markers(items, groups_first=bool(os.environ.get("PYTEST_XDIST_WORKER")))


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh MILLPOND_HOME; what the test left running in it (a job's supervisor, an operation's
    runner, a server) is SIGKILLed with its process group afterwards, passed or failed, so a failed
    test cannot leave a background process running for the rest of the session."""
    path = tmp_path / "home"
    monkeypatch.setenv("MILLPOND_HOME", str(path))
    yield path
    _end_background_processes(path)


def _end_background_processes(home: Path) -> None:
    """Read the home's background records directly (the test may have left settings that do not parse)."""
    from millpond.runners.processes import ProcessIdentity

    for record in sorted((home / "processes").glob("*.json")) if (home / "processes").is_dir() else []:
        try:
            data = json.loads(record.read_text())
            identity = ProcessIdentity(int(data["pid"]), data.get("ticks"))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if identity.is_running():
            for kill in (os.killpg, os.kill):
                try:
                    kill(identity.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def database(request: pytest.FixtureRequest, home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The metadata database URL a test runs on: the home's SQLite file, then a fresh PostgreSQL database.

    A module that exercises the store says ``pytestmark = pytest.mark.usefixtures("database")``
    and each of its tests runs twice; ``-m "not postgresql"`` runs the SQLite half only.
    """
    if request.param == "sqlite":
        monkeypatch.delenv("MILLPOND_DATABASE_URL", raising=False)
        yield f"sqlite:///{home / 'millpond.db'}"
        return
    url: str = request.getfixturevalue("pg_url")
    monkeypatch.setenv("MILLPOND_DATABASE_URL", url)
    yield url
    assert not (home / "millpond.db").exists(), "a process wrote the home's SQLite file instead of PostgreSQL"


@pytest.fixture
def cli(home: Path, capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run ``millpond ARGS`` in this process and capture what it prints."""

    def invoke(*args: Any) -> CliResult:
        capsys.readouterr()
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return invoke


def spawn_cli(home: Path, *args: Any, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``millpond ARGS`` as its own process (for concurrency tests)."""
    full_env = {**os.environ, "MILLPOND_HOME": str(home), **(env or {})}
    return subprocess.Popen(
        [str(MILLPOND_BIN), *[str(a) for a in args]],
        env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def task(result: dict[str, Any], name: str) -> dict[str, Any]:
    matches = [t for t in result["tasks"] if t["name"] == name or t["path"] == name]
    assert matches, f"no task {name!r} in {[t['path'] for t in result['tasks']]}"
    return matches[0]

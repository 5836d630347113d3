"""millpond.cli.forked_cli: commands forked from a warm process behave as `millpond` processes do."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from millpond.cli.forked_cli import ForkedCli

MILLPOND = Path(sys.executable).parent / "millpond"

QUEUE = """apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: default-flavor
"""


@pytest.fixture(scope="module")
def forked() -> Iterator[ForkedCli]:
    cli = ForkedCli()
    yield cli
    cli.close()


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "MILLPOND_HOME": str(home)}


@pytest.mark.parametrize("argv", [
    ["apply", "-f", "queue.yaml"],
    ["apply", "-f", "missing.yaml"],
    ["get", "nosuchkind"],
    ["get", "resourceflavors"],
    ["--no-such-flag"],
])
def test_a_forked_command_ends_as_the_real_process_does(forked: ForkedCli, tmp_path: Path, argv: list[str]) -> None:
    (tmp_path / "queue.yaml").write_text(QUEUE)
    real_home, forked_home = tmp_path / "real", tmp_path / "forked"
    real = subprocess.run([str(MILLPOND), *argv], env=_env(real_home), cwd=tmp_path, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, check=False)
    done = forked.run(argv, _env(forked_home), timeout_s=120, cwd=str(tmp_path))
    def said(code: int, out: str, err: str, home: Path) -> tuple[int, str, str]:
        return code, out.replace(str(home), "HOME"), err.replace(str(home), "HOME")

    assert said(done.returncode, done.stdout, done.stderr, forked_home) == \
        said(real.returncode, real.stdout, real.stderr, real_home)


def test_each_command_has_its_own_environment_and_home(forked: ForkedCli, tmp_path: Path) -> None:
    (tmp_path / "queue.yaml").write_text(QUEUE)
    first, second = tmp_path / "one", tmp_path / "two"
    assert forked.run(["apply", "-f", "queue.yaml"], _env(first), 120, cwd=str(tmp_path)).returncode == 0
    listed = forked.run(["get", "resourceflavors"], _env(second), 120, cwd=str(tmp_path))
    assert "default-flavor" not in listed.stdout  # the first command's home is not the second's
    assert "default-flavor" in forked.run(["get", "resourceflavors"], _env(first), 120).stdout


def test_a_command_past_its_timeout_is_killed_and_says_so(forked: ForkedCli, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = forked.run(["server", "--port", str(port)], _env(tmp_path / "home"), timeout_s=3.0)  # serves until killed
    assert done.returncode == 124 and "timed out after 3s" in done.stderr


def test_the_warm_process_ends_with_its_caller(tmp_path: Path) -> None:
    cli = ForkedCli()
    warm = cli._warm
    cli.close()
    assert warm.poll() is not None

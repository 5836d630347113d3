"""A task forked from the warm server behaves exactly like one started as its own process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import PIPELINES, task

POOLED = PIPELINES / "pooled.py"
MODES = {"forked": "1", "plain": "0"}


@pytest.fixture(params=sorted(MODES))
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("MILLPOND_FORK_SERVER", MODES[request.param])
    return str(request.param)


def test_environment_cwd_logs_and_session(cli, mode: str) -> None:
    result = cli("run", POOLED, "--pipeline", "pooled-describe", "-o", "json")
    assert result.code == 0, result.err
    seen = result.json()["outputs"]["Output"]
    assert seen == {
        "cwd_is_attempt_work_dir": True,
        "tmpdir_is_private": True,
        "custom_env": "on",
        "kfp_runtime": "true",
        "session_leader": mode == "forked",  # plain: the sh wrapper leads the session, as in a container
        "python_prefix": sys.prefix,  # millpond's own interpreter either way
        "umask": "0o22",
        "stdin_is_empty": True,
        "forked_from_server": mode == "forked",
    }
    log = Path(task(result.json(), "describe")["log"]).read_text()
    assert "to stdout: hello" in log and "to stderr: hello" in log
    assert "Got executor_input" in log


@pytest.mark.parametrize("code", [3, 1])
def test_exit_codes(cli, mode: str, code: int) -> None:
    result = cli("run", POOLED, "--pipeline", "pooled-exit", "-p", f"code={code}", "-o", "json")
    assert result.code == 1
    failed = task(result.json(), "exit-with")
    assert failed["exit_code"] == code
    assert f"exited with status {code}" in failed["error"]


def test_a_signal_is_reported_as_128_plus_its_number(cli, mode: str) -> None:
    result = cli("run", POOLED, "--pipeline", "pooled-signal", "-p", "signal_number=15", "-o", "json")
    assert task(result.json(), "kill-self")["exit_code"] == 143


def test_a_task_that_crashes_its_process_leaves_the_others_running(cli, mode: str) -> None:
    result = cli("run", POOLED, "--pipeline", "pooled-crash", "-o", "json")
    data = result.json()
    assert task(data, "crash")["exit_code"] == 134  # SIGABRT
    assert task(data, "with-children")["state"] == "SUCCEEDED"
    # A second run on the same engine settings still works: the server survived the crash.
    again = cli("run", POOLED, "--pipeline", "pooled-children", "-o", "json")
    assert again.json()["outputs"]["Output"] == "from-child|from-grandchild|"


def test_a_task_with_children_of_its_own(cli, mode: str) -> None:
    result = cli("run", POOLED, "--pipeline", "pooled-children", "-o", "json")
    assert result.code == 0, result.err
    assert result.json()["outputs"]["Output"] == "from-child|from-grandchild|"


def test_a_deadline_stops_the_task(cli, mode: str) -> None:
    result = cli("run", POOLED, "--pipeline", "pooled-timeout", "-o", "json")
    assert result.code == 1
    assert "timed out after 1s" in task(result.json(), "nap")["error"]


def test_the_next_task_finds_its_attempt_folder_empty(cli, home: Path, mode: str) -> None:
    """Attempt folders are kept for the run and reused: what one task left in its work dir and TMPDIR is gone
    when the next one starts there, its module lies alone in its folder, and the run's end removes them all."""
    result = cli("run", POOLED, "--pipeline", "pooled-reused-folder", "-o", "json")
    assert result.code == 0, result.err
    seen = result.json()["outputs"]["Output"]
    assert seen["same_folder"] is True  # one task at a time: the second reuses the first one's folder
    assert seen["cwd"] == []
    assert [path for path in seen["tmp"] if path != seen["module_folder"]] == []  # plain: kfp's mktemp -d is there
    assert seen["module_alone"] == ["ephemeral_component.py"]
    assert not list((home / "staging").iterdir())

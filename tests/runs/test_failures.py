"""A failing task: the run FAILS with its exit code and error, the log is kept, nothing half-written shows."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import PIPELINES, task


def test_failed_task_fails_the_run_and_keeps_its_log(cli) -> None:
    result = cli("run", PIPELINES / "failing.py", "--pipeline", "fails", "-o", "json")
    assert result.code == 1
    data = result.json()
    assert data["state"] == "FAILED"
    assert "write-then-fail" in data["error"]
    broken = task(data, "write-then-fail")
    assert broken["state"] == "FAILED"
    assert broken["exit_code"] == 1
    assert "exited with status 1" in broken["error"]
    log = Path(broken["log"]).read_text()
    assert "boom-marker: about to fail" in log
    assert "RuntimeError: deliberate failure" in log
    # The dependent task never ran; the independent one did.
    assert task(data, "after")["state"] == "SKIPPED"
    assert task(data, "fine")["state"] == "SUCCEEDED"

    logs = cli("runs", "logs", data["run_id"], "write-then-fail")
    assert logs.code == 0
    assert "boom-marker" in logs.out


def test_failed_task_leaves_no_artifact_under_its_final_uri(cli, home: Path) -> None:
    result = cli("run", PIPELINES / "failing.py", "--pipeline", "fails", "-o", "json")
    data = result.json()
    run_dir = home / "artifacts" / "fails" / data["run_id"]
    assert not (run_dir / "write-then-fail" / "data").exists()
    assert task(data, "write-then-fail")["outputs"] == {}
    assert not list((home / "staging").iterdir())  # the attempt's staging folder is gone too


def test_killed_task_leaves_no_artifact(cli, home: Path) -> None:
    result = cli("run", PIPELINES / "failing.py", "--pipeline", "dies", "-o", "json")
    assert result.code == 1
    data = result.json()
    died = task(data, "write-then-die")
    assert died["state"] == "FAILED"
    assert died["exit_code"] == 137  # as in a container: sh reports its child's SIGKILL as 128 + 9
    assert not (home / "artifacts" / "dies" / data["run_id"] / "write-then-die" / "data").exists()


def test_container_command_missing_on_host_fails_clearly(cli) -> None:
    result = cli("run", PIPELINES / "failing.py", "--pipeline", "missing-tool", "-o", "json")
    assert result.code == 1
    failed = task(result.json(), "missing-tool")
    assert "command not found on this machine: 'no-such-tool-millpond'" in failed["error"]
    assert "no-such-tool-millpond" in Path(failed["log"]).read_text()

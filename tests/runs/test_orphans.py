"""Every process a training instance, a pipeline task or a DataProcess script started ends with it,
whatever session or group it moved to: ``setsid sleep N &`` leaves nothing running once the job
succeeded, was deleted or lost its supervisor to ``kill -9`` (then read), nor once the task or script ended
(``runners.process_groups``: each carries a mark of its own, swept from /proc when it ends).

Each test looks for its own ``sleep N`` (a number no other test uses) in /proc."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from millpond.datasets.mounts import fuse_available, is_mounted
from millpond.store.training import JobStore
from tests.conftest import PIPELINES
from tests.datasets_support import manifest
from tests.training_support import arena, wait_status


def _seconds() -> str:
    """A sleep length no other test uses, so /proc shows this test's sleep only."""
    return str(random.randrange(100000, 999999))


def sleeping(seconds: str) -> list[int]:
    """Running (not zombie) ``sleep SECONDS`` processes, anywhere on the machine."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                if stat.read().rsplit(")", 1)[-1].split()[0] in ("Z", "X"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", seconds.encode()] or argv[:3] == [b"setsid", b"sleep", seconds.encode()]:
            found.append(int(entry))
    return found


def wait_for(condition, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture
def seconds():
    """A sleep length of this test's; whatever of it is still running afterwards is killed (a failed test)."""
    value = _seconds()
    yield value
    for pid in sleeping(value):
        os.kill(pid, signal.SIGKILL)


def test_a_succeeded_job_leaves_no_process_of_its_instances(capsys, home: Path, seconds: str) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "j", "--workers", "2",
                 f"setsid sleep {seconds} & echo done").code == 0
    info = wait_status(capsys, "j")
    assert info["status"] == "SUCCEEDED", info
    assert sleeping(seconds) == []


def test_deleting_a_running_job_ends_what_its_instances_moved_out_of_their_session(capsys, home: Path,
                                                                                    seconds: str) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "d", f"setsid sleep {seconds} & sleep 300").code == 0
    assert wait_for(lambda: sleeping(seconds)), arena(capsys, "get", "d", "-e").out
    assert arena(capsys, "delete", "d").code == 0
    assert wait_for(lambda: not sleeping(seconds))
    assert sleeping(seconds) == []


def test_a_supervisor_killed_with_sigkill_leaves_no_process_of_its_instances(capsys, home: Path,
                                                                              seconds: str) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "k", f"setsid sleep {seconds} & sleep 300").code == 0
    assert wait_for(lambda: sleeping(seconds)), arena(capsys, "get", "k", "-e").out
    job = JobStore().get("k", "default")
    assert job is not None and job.supervisor_pid
    os.kill(job.supervisor_pid, signal.SIGKILL)
    assert wait_status(capsys, "k")["status"] == "FAILED"  # the read that finds the supervisor dead ends the rest
    assert wait_for(lambda: not sleeping(seconds)), "the escaped sleep outlived its killed supervisor"


def test_pipeline_tasks_leave_no_process_behind(cli, seconds: str) -> None:
    shell = _seconds()
    try:
        run = cli("run", PIPELINES / "orphans.py", "-p", f"python_seconds={seconds}", "-p",
                  f"shell_seconds={shell}", "-o", "json")
        assert run.code == 0 and run.json()["state"] == "SUCCEEDED", run
        assert sleeping(seconds) == [], "the forked Python task's escaped child outlived it"
        assert sleeping(shell) == [], "the shell task's escaped child outlived it"
    finally:
        for pid in sleeping(shell):
            os.kill(pid, signal.SIGKILL)


def test_a_dataprocess_script_leaves_no_process_behind(cli, home: Path, tmp_path: Path, seconds: str) -> None:
    if fuse_available() is not None:
        pytest.skip(f"FUSE unavailable: {fuse_available()}")
    store = tmp_path / "store"
    store.mkdir()
    (store / "a.txt").write_text("a")
    (tmp_path / "ds.yaml").write_text(manifest("work", f"local://{store}", secret=False))
    assert cli("apply", "-f", tmp_path / "ds.yaml").code == 0
    (tmp_path / "process.yaml").write_text(f"""\
apiVersion: data.fluid.io/v1alpha1
kind: DataProcess
metadata: {{name: leaky}}
spec:
  dataset: {{name: work, namespace: default, mountPath: /data}}
  processor:
    script:
      command: ["sh"]
      source: |
        setsid sleep {seconds} &
        ls /data
""")
    try:
        assert cli("apply", "-f", tmp_path / "process.yaml").code == 0
        assert wait_for(lambda: _phase(cli) in ("Complete", "Failed"), 120), _phase(cli)
        assert _phase(cli) == "Complete"
        assert sleeping(seconds) == []
    finally:
        folder = home / "mnt" / "default" / "work"
        if is_mounted(str(folder)):
            subprocess.run(["fusermount3", "-u", "-z", str(folder)], check=False)


def _phase(cli) -> str:
    result = cli("get", "dataprocess", "leaky", "-o", "json")
    return ((result.json().get("status") or {}).get("phase") or "") if result.code == 0 else ""


def test_a_job_an_instance_submits_is_not_the_instances_to_end(capsys, home: Path) -> None:
    """As a pod that creates a PyTorchJob through the API: the job it submitted outlives it."""
    submit = (f"{sys.executable} -c 'from millpond.cli.arena import main; main()' "
              "submit pytorch --name inner 'sleep 120'")
    assert arena(capsys, "submit", "pytorch", "--name", "outer", submit).code == 0
    assert wait_status(capsys, "outer")["status"] == "SUCCEEDED", arena(capsys, "logs", "outer").out
    # the outer instance's processes were swept before its job read SUCCEEDED: the inner job still runs
    inner = wait_status(capsys, "inner", ("RUNNING", "SUCCEEDED", "FAILED"))
    assert inner["status"] == "RUNNING", inner
    assert arena(capsys, "delete", "inner").code == 0

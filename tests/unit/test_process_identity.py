"""``ProcessIdentity``: the one check every background-process record asks (pid + start time)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from millpond.runners.background import records, register
from millpond.runners.processes import ProcessIdentity


def test_a_process_is_alive_while_it_runs_a_zombie_is_not_running_and_a_reaped_one_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        seen = ProcessIdentity.of(child.pid)
        assert seen.start is not None and seen.is_alive() and seen.is_running()
        assert seen.signal()  # SIGTERM, as the process recorded
        deadline = time.monotonic() + 10
        while seen.is_running():  # a zombie until reaped: alive, no longer running
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert seen.is_alive() and not seen.signal()
    finally:
        child.kill()
        child.wait()
    assert not seen.is_alive() and not seen.is_running() and not seen.kill_group()


def test_a_pid_with_another_start_time_or_none_is_never_taken_for_the_recorded_process() -> None:
    me = ProcessIdentity.own()
    assert me.is_running()
    assert not ProcessIdentity(me.pid, str(int(me.start or "0") + 1)).is_alive()  # the pid, reused
    assert not ProcessIdentity(me.pid, None).is_alive()  # no start time read: it never counts
    assert not ProcessIdentity(0, me.start).is_alive()


def test_a_background_record_names_its_process_by_identity(home: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        written = register("training-job", "default/j", "uid-1", ProcessIdentity.of(child.pid))
        (read,) = [record for record in records() if record.pid == child.pid]
        assert read == written and read.identity == ProcessIdentity.of(child.pid) and read.running
        assert read.identity.kill_group()  # the session it leads
        child.wait(timeout=10)
        assert not read.running
    finally:
        child.kill()
        child.wait()

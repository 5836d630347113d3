"""spawn_detached through the home's zygote: a warm fork that behaves as ``python -m``, and every way back to it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from millpond.runners import background, warm_spawn
from millpond.runners.detached import spawn_detached
from millpond.runners.processes import ProcessIdentity

PROBE = """\
import json, os, sys, time
print(json.dumps({"name": __name__, "argv": sys.argv, "pid": os.getpid(), "sid": os.getsid(0),
                  "env": dict(os.environ), "cwd": os.getcwd(), "umask": oct(os.umask(0)),
                  "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd"))}), flush=True)
if "--wait" in sys.argv:
    time.sleep(120)
sys.exit(3)
"""


def wait_for(predicate: Callable[[], object], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def answers(path: str) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(path)
        except OSError:
            return False
        return True


def zygotes() -> list[background.BackgroundProcess]:
    return [record for record in background.running() if record.kind == warm_spawn.PROCESS_KIND]


def ready_zygote(home: Path) -> background.BackgroundProcess:
    paths = warm_spawn.ZygotePaths.of(home)
    wait_for(lambda: zygotes() and answers(paths.socket))
    [zygote] = zygotes()
    return zygote


@pytest.fixture
def folder(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder holding the probe module (python -m finds it there, as the zygote's child must)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "warm_probe.py").write_text(PROBE)
    monkeypatch.chdir(work)
    monkeypatch.setenv(warm_spawn.WARM_VAR, "1")
    return work


def spawn(log: Path, *args: str, env: dict[str, str] | None = None) -> ProcessIdentity:
    return spawn_detached("warm_probe", list(args), log=log, env=env or {**os.environ, "PROBE": "yes"},
                          kind="probe", served="default/p", uid="u1")


def report(log: Path) -> dict[str, object]:
    wait_for(lambda: log.exists() and log.read_text().strip())
    found: dict[str, object] = json.loads(log.read_text().splitlines()[0])
    return found


def test_a_warm_start_runs_the_module_as_python_m_would(home: Path, folder: Path) -> None:
    cold = spawn(home / "cold.log")
    assert parent_of(cold.pid) == os.getpid()  # no zygote yet: a new interpreter, and one is started
    zygote = ready_zygote(home)
    env = {**os.environ, "PROBE": "warm"}
    old = os.umask(0o027)
    try:
        warm = spawn(home / "warm.log", "a", "b c", env=env)
    finally:
        os.umask(old)
    assert parent_of(warm.pid) == zygote.pid
    seen, before = report(home / "warm.log"), report(home / "cold.log")
    assert seen["name"] == "__main__"
    assert seen["argv"] == [str(folder / "warm_probe.py"), "a", "b c"]
    assert before["argv"] == [str(folder / "warm_probe.py")]  # the same as python -m gives
    assert seen["env"] == env  # exactly the given mapping
    assert seen["cwd"] == str(folder)
    assert seen["sid"] == warm.pid  # a session of its own
    assert seen["umask"] == "0o27"
    assert seen["fds"] == before["fds"]
    probes = [r for r in background.records() if r.kind == "probe"]
    assert sorted((r.pid, r.ticks, r.uid) for r in probes) == sorted([(cold.pid, cold.start, "u1"),
                                                                      (warm.pid, warm.start, "u1")])
    wait_for(lambda: not warm.is_alive())  # exited 3, and the zygote reaped it: no zombie left


def test_a_warm_child_outlives_the_process_that_asked(home: Path, folder: Path) -> None:
    spawn(home / "first.log")
    zygote = ready_zygote(home)
    script = ("import json, os; from pathlib import Path; from millpond.runners.detached import spawn_detached\n"
              "p = spawn_detached('warm_probe', ['--wait'], log=Path(os.environ['LOG']), env=dict(os.environ),"
              " kind='probe', served='default/q')\nprint(json.dumps([p.pid, p.start]))\n")
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "LOG": str(home / "q.log")},
                          capture_output=True, text=True, timeout=120, check=True)
    pid, ticks = json.loads(done.stdout)
    child = ProcessIdentity(pid, ticks)
    assert parent_of(pid) == zygote.pid
    assert child.is_running()  # its caller has exited
    assert any(r.kind == "probe" and r.object == "default/q" and r.pid == pid for r in background.running())
    assert report(home / "q.log")["sid"] == pid
    child.kill_group()
    wait_for(lambda: not child.is_alive())


def test_a_killed_zygote_falls_back_and_is_replaced(home: Path, folder: Path) -> None:
    spawn(home / "first.log")
    zygote = ready_zygote(home)
    os.kill(zygote.pid, signal.SIGKILL)
    wait_for(lambda: not zygote.running)
    after = spawn(home / "after.log")
    assert parent_of(after.pid) == os.getpid()  # started cold, as before zygotes
    assert report(home / "after.log")["name"] == "__main__"
    replacement = ready_zygote(home)
    assert replacement.pid != zygote.pid
    assert parent_of(spawn(home / "warm.log").pid) == replacement.pid


def test_a_zygote_running_other_code_exits_and_a_fresh_one_starts(
        home: Path, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spawn(home / "first.log")
    zygote = ready_zygote(home)
    with monkeypatch.context() as patch:
        patch.setattr(warm_spawn, "fingerprint", lambda env: "millpond edited since")  # as after an upgrade
        stale = spawn(home / "stale.log")
    assert parent_of(stale.pid) == os.getpid()  # old code never runs it
    wait_for(lambda: not zygote.running)
    replacement = ready_zygote(home)
    assert replacement.pid != zygote.pid


def test_warm_spawning_turned_off(home: Path, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(warm_spawn.WARM_VAR, "0")
    first, second = spawn(home / "1.log"), spawn(home / "2.log")
    assert parent_of(first.pid) == parent_of(second.pid) == os.getpid()
    assert report(home / "2.log")["name"] == "__main__"
    assert zygotes() == []
    assert not Path(warm_spawn.ZygotePaths.of(home).socket).exists()

"""Nothing millpond starts for a home outlives its use unseen.

A dataset's shared FUSE mount ends with its last user — a DataProcess, a pipeline task, one
killed with ``kill -9`` included — while a mount the user made stays; ``millpond dataset
load`` is a DataLoad like any other; ``millpond ps`` lists what runs. Real SeaweedFS, real
FUSE mounts, real processes: what the tests look at is /proc and the kernel's mount table.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from millpond.datasets.mounts import fuse_available, is_mounted
from millpond.runners.sandbox import sandbox_problem
from tests.conftest import PIPELINES, spawn_cli
from tests.datasets_support import create_s3_dataset, manifest

pytestmark = [
    pytest.mark.s3,
    pytest.mark.skipif(
        fuse_available() is not None or sandbox_problem() is not None,
        reason=f"needs FUSE and bubblewrap: {fuse_available() or sandbox_problem()}",
    ),
]

FILES = {"raw/a.txt": b"alpha", "raw/b.txt": b"beta"}
BOUND_S = 60.0  # only says "it does not hang"


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[-1].split()[0] in ("Z", "X"):
                return []  # ended, not yet reaped: not a running process
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return [word.decode(errors="replace") for word in cmdline.read().split(b"\0") if word]
    except OSError:
        return []


def ended(pid: int) -> bool:
    """Whether ``pid`` has finished exiting (gone, or a zombie): a killed process takes a moment to end."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] in ("Z", "X")
    except OSError:
        return True


def _processes(match: Callable[[list[str]], bool]) -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit() and match(_argv(int(entry)))]


def _of_home(pid: int) -> bool:
    """Whether ``pid`` works for this test's home (other tests on this machine run runners of their own)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return f"MILLPOND_HOME={os.environ['MILLPOND_HOME']}".encode() in environ.read().split(b"\0")
    except OSError:
        return False


def mount_daemons(folder: Path) -> list[int]:
    """The FUSE daemons serving ``folder``, found in /proc whatever millpond recorded."""
    daemon = ("millpond.datasets.fuse_mount", "millpond.datasets.shared_mounts")
    return _processes(lambda argv: str(folder) in argv and any(word in daemon for word in argv))


def runner(kind: str, name: str) -> int:
    """The pid of the background runner of operation ``kind`` ``name``."""
    module = "millpond.datasets.operations"
    found = _processes(lambda argv: module in argv and argv[argv.index(module) + 1:][:2] == [kind, name])
    found = [pid for pid in found if _of_home(pid)]
    assert len(found) == 1, found
    return found[0]


def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not check():
        assert time.monotonic() < deadline, f"still not {what} after {BOUND_S:.0f}s"
        time.sleep(0.1)


def process(name: str, source: str) -> str:
    """A DataProcess over dataset ``ds`` mounted at /data, running ``source`` with bash."""
    lines = "".join(f"        {line}\n" for line in source.strip().splitlines())
    return (
        "apiVersion: data.fluid.io/v1alpha1\nkind: DataProcess\n"
        f"metadata: {{name: {name}}}\n"
        "spec:\n  dataset: {name: ds, namespace: default, mountPath: /data}\n"
        "  processor:\n    script:\n      image: debian\n      command: [bash]\n      source: |\n"
        f"{lines}"
    )


def phase(cli, kind: str, name: str) -> str:
    return cli("get", kind, name, "-o", "json").json()["status"].get("phase", "")


@pytest.fixture
def shared(cli, home: Path, tmp_path: Path, s3_server):
    """Dataset ``ds`` over a bucket; yields its shared mount folder, unmounted (lazily) whatever the test left."""
    create_s3_dataset(cli, home, tmp_path, s3_server, dict(FILES))
    folder = (home / "mnt" / "default" / "ds").resolve()
    yield folder
    for pid in _processes(lambda argv: bool(argv)):  # whatever a failed test left running for this home
        if pid != os.getpid() and _of_home(pid):
            os.kill(pid, signal.SIGKILL)
    if is_mounted(str(folder)):
        subprocess.run(["fusermount3", "-u", "-z", str(folder)], check=False)
    for pid in mount_daemons(folder):
        os.kill(pid, signal.SIGKILL)


def test_a_data_process_ends_the_mount_it_started(cli, tmp_path: Path, shared: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "p.yaml").write_text(process("count", f"ls /data/raw | wc -l > {out}/count"))
    result = cli("apply", "--wait", "-f", tmp_path / "p.yaml")
    assert result.code == 0, result.err
    assert (out / "count").read_text().strip() == "2"  # the step did see the dataset through the mount
    assert not is_mounted(str(shared))
    assert mount_daemons(shared) == []  # its daemon ended with its only user, not left behind
    assert "Dataset default/ds" not in cli("ps").out


def test_two_users_keep_the_mount_until_both_have_ended(cli, tmp_path: Path, shared: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    for name in ("first", "second"):
        script = f"""
            touch {marks}/{name}-in
            until [ -e {marks}/{name}-go ]; do sleep 0.05; done
            cat /data/raw/b.txt > {marks}/{name}-read
        """
        (tmp_path / f"{name}.yaml").write_text(process(name, script))
        assert cli("apply", "-f", tmp_path / f"{name}.yaml").code == 0
    until(lambda: (marks / "first-in").exists() and (marks / "second-in").exists(), "both steps inside")
    assert len(mount_daemons(shared)) == 1  # one mount shared by both
    listing = cli("ps").out
    assert "DataProcess default/first" in listing and "DataProcess default/second" in listing
    mount_line = [line for line in listing.splitlines() if line.startswith("mount")]
    assert len(mount_line) == 1 and "shared, used by" in mount_line[0], listing
    assert "DataProcess default/first" in mount_line[0] and "DataProcess default/second" in mount_line[0]

    (marks / "first-go").touch()
    until(lambda: phase(cli, "dataprocess", "first") == "Complete", "first Complete")
    assert is_mounted(str(shared)) and len(mount_daemons(shared)) == 1  # the second still uses it
    (marks / "second-go").touch()
    until(lambda: phase(cli, "dataprocess", "second") == "Complete", "second Complete")
    assert (marks / "second-read").read_text() == "beta"  # read through the mount after the first had left
    assert not is_mounted(str(shared))
    assert mount_daemons(shared) == []


def test_a_user_killed_with_kill_9_does_not_keep_the_mount(cli, tmp_path: Path, shared: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    # A background job, as scripts start them: forked before the mark appears, it outlives its shell.
    (tmp_path / "p.yaml").write_text(process("stuck", f"sleep 600 &\necho $! > {marks}/in\nwait"))
    assert cli("apply", "-f", tmp_path / "p.yaml").code == 0
    until(lambda: (marks / "in").exists(), "inside")
    assert len(mount_daemons(shared)) == 1
    killed = runner("DataProcess", "stuck")
    os.kill(killed, signal.SIGKILL)  # no finally, no release: only its lease is left
    until(lambda: ended(killed), "the runner dead")
    # The next reconcile ends what the dead runner left: its script, the mount nobody uses now.
    result = cli("ps")
    assert result.code == 0, result.err
    # bwrap took the script's shell with it, not the shell's background job: that is left of the runner.
    assert "ended: what was left of the runner of DataProcess default/stuck" in result.err
    until(lambda: not is_mounted(str(shared)) and mount_daemons(shared) == [], "unmounted, its daemon gone")
    assert "DataProcess default/stuck" not in cli("ps").out


def test_a_killed_user_s_mount_ends_by_itself(cli, tmp_path: Path, shared: Path) -> None:
    """Nobody runs millpond after the kill: the mount's own daemon sees its last user gone."""
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "p.yaml").write_text(process("stuck", f"touch {marks}/in\nexec sleep 600"))
    assert cli("apply", "-f", tmp_path / "p.yaml").code == 0
    until(lambda: (marks / "in").exists(), "inside")
    os.killpg(runner("DataProcess", "stuck"), signal.SIGKILL)  # the runner and its whole group
    until(lambda: not is_mounted(str(shared)) and mount_daemons(shared) == [], "unmounted, its daemon gone")


def test_a_mount_whose_daemon_was_killed_is_mounted_afresh_for_the_next_user(cli, tmp_path: Path, shared: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    holding = f"touch {marks}/in\nuntil [ -e {marks}/go ]; do sleep 0.05; done"
    (tmp_path / "hold.yaml").write_text(process("hold", holding))
    assert cli("apply", "-f", tmp_path / "hold.yaml").code == 0
    until(lambda: (marks / "in").exists(), "inside")
    [daemon] = mount_daemons(shared)
    os.kill(daemon, signal.SIGKILL)  # the mount stays in the kernel's table, answering every read with an error
    until(lambda: mount_daemons(shared) == [], "the daemon gone")
    assert is_mounted(str(shared))
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "read.yaml").write_text(process("read", f"cat /data/raw/a.txt > {out}/a"))
    result = cli("apply", "--wait", "-f", tmp_path / "read.yaml")
    assert result.code == 0, result.err
    assert (out / "a").read_text() == "alpha"
    (marks / "go").touch()
    until(lambda: phase(cli, "dataprocess", "hold") in ("Complete", "Failed"), "hold ended")
    assert not is_mounted(str(shared)) and mount_daemons(shared) == []


def test_a_mount_the_user_made_stays_until_unmount(cli, tmp_path: Path, shared: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    assert cli("dataset", "mount", "ds", mine).code == 0
    try:
        (tmp_path / "p.yaml").write_text(process("quick", "ls /data > /dev/null"))
        assert cli("apply", "--wait", "-f", tmp_path / "p.yaml").code == 0
        assert not is_mounted(str(shared))  # the step's shared mount ended with it
        cli("ps")  # a reconcile ends nothing the user asked for
        assert is_mounted(str(mine)) and (mine / "raw" / "a.txt").read_bytes() == b"alpha"
        assert "mounted by dataset mount" in cli("ps").out
        assert cli("dataset", "unmount", mine).code == 0
        assert mount_daemons(mine.resolve()) == []
    finally:
        if is_mounted(str(mine)):
            subprocess.run(["fusermount3", "-u", "-z", str(mine)], check=False)


def test_a_pipeline_task_releases_the_dataset_mount(cli, home: Path, tmp_path: Path, s3_server) -> None:
    source = tmp_path / "mnist-source"
    (source / "train").mkdir(parents=True)
    (source / "train" / "hello.txt").write_text("digits")
    (source / "README").write_text("readme")
    levels = [{"mediumtype": "MEM", "path": str(tmp_path / "shm"), "quota": "64Mi"}]
    (tmp_path / "ds.yaml").write_text(manifest("mnist", f"local://{source}", secret=False, levels=levels))
    assert cli("apply", "-f", tmp_path / "ds.yaml").code == 0
    folder = (home / "mnt" / "default" / "mnist").resolve()
    try:
        result = cli("run", PIPELINES / "dataset_volume.py", "-o", "json")
        assert result.code == 0, result.err
        assert result.json()["outputs"]["Output"] == "README,train|digits"
        assert not is_mounted(str(folder))
        assert mount_daemons(folder) == []
    finally:
        if is_mounted(str(folder)):
            subprocess.run(["fusermount3", "-u", "-z", str(folder)], check=False)


def test_dataset_load_is_a_data_load(cli, tmp_path: Path, shared: Path) -> None:
    result = cli("dataset", "load", "ds", "raw")
    assert result.code == 0, result.err
    assert "2 files" in result.out and "fetched 2 " in result.out
    created = [line for line in result.err.splitlines() if line.startswith("dataload/ds-load-")]
    assert len(created) == 1, result.err
    name = created[0].split()[0].removeprefix("dataload/")
    assert len(name) == len("ds-load-") + 5
    shown = cli("get", "dataload", name, "-o", "json").json()
    assert shown["status"]["phase"] == "Complete"
    assert shown["spec"]["dataset"] == {"name": "ds", "namespace": "default"}
    assert shown["spec"]["target"] == [{"path": "/raw"}]
    assert shown["status"]["infos"]["files"] == "2"
    table = cli("get", "dataloads").out
    assert name in table and "Complete" in table
    again = cli("dataset", "load", "ds")
    assert again.code == 0 and "fetched 0 " in again.out
    assert len([line for line in cli("get", "dataloads").out.splitlines()[1:] if line.startswith("ds-load-")]) == 2
    # Bad input is refused before any DataLoad exists.
    assert cli("dataset", "load", "ds", "no/such").code == 2
    assert cli("dataset", "load", "ds", "../up").code == 2
    assert len(cli("get", "dataloads").out.splitlines()) == 3


def test_ps_lists_runners_cron_schedules_and_mounts(cli, tmp_path: Path, shared: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "p.yaml").write_text(process("slow", f"touch {marks}/in\nuntil [ -e {marks}/go ]; do sleep 0.05; done"))
    (tmp_path / "cron.yaml").write_text(
        "apiVersion: data.fluid.io/v1alpha1\nkind: DataLoad\nmetadata: {name: nightly}\n"
        "spec:\n  dataset: {name: ds, namespace: default}\n  policy: Cron\n  schedule: '0 3 * * *'\n"
    )
    assert cli("apply", "-f", tmp_path / "p.yaml", "-f", tmp_path / "cron.yaml").code == 0
    until(lambda: (marks / "in").exists(), "inside")
    until(lambda: "nightly" in cli("ps").out, "the Cron schedule listed")
    rows = {(row["kind"], row["object"].split(" at ")[0]): row for row in cli("ps", "-o", "json").json()}
    assert rows[("operation", "DataProcess default/slow")]["pid"] == runner("DataProcess", "slow")
    assert rows[("operation", "DataProcess default/slow")]["state"] == "Executing"
    assert rows[("cron", "DataLoad default/nightly")]["pid"] == runner("DataLoad", "nightly")
    assert rows[("cron", "DataLoad default/nightly")]["state"].startswith("waiting, next run ")
    assert rows[("mount", "Dataset default/ds")]["pid"] == mount_daemons(shared)[0]
    assert "DataProcess default/slow" in rows[("mount", "Dataset default/ds")]["state"]
    table = cli("ps").out.splitlines()
    assert table[0].split() == ["KIND", "OBJECT", "PID", "STARTED", "STATE"]
    # A deleted Cron operation's runner serves nobody: the next reconcile ends it.
    cron_pid = runner("DataLoad", "nightly")
    assert cli("delete", "dataload", "nightly").code == 0
    reconciled = cli("ps")
    assert "ended: runner of DataLoad default/nightly" in reconciled.err
    until(lambda: ended(cron_pid), "the Cron runner ended")
    (marks / "go").touch()
    until(lambda: phase(cli, "dataprocess", "slow") == "Complete", "slow Complete")
    until(lambda: [row for row in cli("ps", "-o", "json").json() if row["kind"] != "engine"] == [], "nothing left")


def test_ps_lists_the_server_while_it_runs(cli, home: Path) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = spawn_cli(home, "server", "--port", port)
    try:
        until(lambda: any(row["kind"] == "server" for row in cli("ps", "-o", "json").json()), "the server listed")
        [row] = [row for row in cli("ps", "-o", "json").json() if row["kind"] == "server"]
        assert row["object"] == f"http://127.0.0.1:{port}" and row["pid"] == server.pid
    finally:
        server.terminate()
        server.wait(BOUND_S)
    assert not [row for row in cli("ps", "-o", "json").json() if row["kind"] == "server"]


def test_dataset_load_goes_on_when_its_data_load_process_is_killed(home: Path, tmp_path: Path, cli, s3_server) -> None:
    """The command follows the DataLoad as every status reader does: a killed process is resumed, never waited on."""
    files = {f"many/{i:04d}.bin": b"x" * 1000 for i in range(1000)}  # listed and fetched in a few seconds
    create_s3_dataset(cli, home, tmp_path, s3_server, files)
    load = spawn_cli(home, "dataset", "load", "ds")

    def data_loads() -> list[int]:
        return [pid for pid in _processes(lambda argv: "millpond.datasets.operations" in argv and "DataLoad" in argv)
                if _of_home(pid)]

    try:
        until(lambda: bool(data_loads()), "the DataLoad's process started")
        [pid] = data_loads()
        until(lambda: any(row["pid"] == pid for row in cli("ps", "-o", "json").json()), "its process recorded")
        os.kill(pid, signal.SIGSTOP)  # held where it is, so it cannot finish first
        time.sleep(1)  # the command sees it running (it polls every 0.2 s)
        os.kill(pid, signal.SIGKILL)
        out, err = load.communicate(timeout=BOUND_S + 30)  # never hangs: the DataLoad resumes and ends
    finally:
        if load.poll() is None:
            load.kill()
    assert load.returncode == 0, err
    assert "1000 files" in out, out
    [name] = [line.split()[0] for line in cli("get", "dataloads").out.splitlines()[1:]]
    log = (home / "operations" / f"default_DataLoad_{name}.log").read_text()
    assert f"DataLoad {name}: its process (pid {pid}) died; resuming it" in log

"""Namespace B's things on one machine, for tests that try to reach them from inside a task of namespace A.

``namespace_b`` (multi-user mode on, as ``millpond server --multi-user`` exports it) makes, in the test's
home: B's Secret, a finished run of B (its artifact and its task's log), B's PVC folder (a claim applied in
namespace team-b), B's dataset cache blocks (the home's disk tier and the memory tier ``/dev/shm/millpond``)
and a FUSE mount folder, the server's TLS key, the database file, and a run of B still running (its task
and the ``sleep`` it started, by their host pids). The environment also holds the server's own secrets
(its API token, a cloud key), which no task of a multi-user server may inherit.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from millpond.runners import isolation
from millpond.server.tls import Subjects, ensure_certificate
from tests.conftest import CliResult, spawn_cli, task
from tests.datasets_support import manifest
from tests.kube_sdk_env import cache_root

HERE = Path(__file__).parent
PIPELINES = HERE / "pipelines.py"


def _visible_probe() -> Path:
    """probe.py where a confined task can read it: a checkout under ``/tmp`` is hidden from tasks (their
    ``/tmp`` is private), so the probe is copied to the tests' cache (under the user's home, which is not
    covered), once per content."""
    source = (HERE / "probe.py").read_bytes()
    folder = cache_root() / "isolation"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"probe-{hashlib.sha256(source).hexdigest()[:12]}.py"
    if not target.exists():
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(source)
        os.replace(partial, target)
    return target


PROBE = _visible_probe()
SERVER_SECRETS = {"MILLPOND_TOKEN": "server-api-token", "AWS_SECRET_ACCESS_KEY": "server-cloud-key",
                  "SERVER_DB_PASSWORD": "server-db-password"}

# Each test module of this folder says ``pytestmark = NEEDS_ISOLATION``.
NEEDS_ISOLATION = pytest.mark.skipif(isolation.isolation_problem() is not None,
                                     reason=f"no isolation here: {isolation.isolation_problem()}")


@dataclass
class NamespaceB:
    """What of namespace B a task of namespace A tries to reach, and B's running processes."""

    home: Path
    paths: dict[str, str]
    pids: list[int]
    runner: subprocess.Popen[str]
    contents: dict[str, str]

    def targets(self) -> str:
        return json.dumps({"paths": self.paths, "pids": self.pids, "env": sorted(SERVER_SECRETS),
                           "list": {"home": str(self.home)}})

    def untouched(self) -> bool:
        """Nothing was written into B's folders, and B's files hold what B wrote."""
        folders = [Path(p) for p in self.paths.values() if Path(p).is_dir()]
        return not any((folder / "written-by-a").exists() for folder in folders) and all(
            Path(p).read_text() == text for p, text in self.contents.items())

    def alive(self) -> bool:
        return all(Path(f"/proc/{pid}").exists() for pid in self.pids)


def report_of(text: str) -> dict:
    """The probe's report from what it printed (a task's output or a log)."""
    for line in text.splitlines():
        if "isolation-report: " in line:
            return json.loads(line.split("isolation-report: ", 1)[1])
    raise AssertionError(f"no report in: {text[-2000:]}")


def assert_isolated(report: dict, b: NamespaceB) -> None:
    """Every attempt on B's things failed; B's processes were neither seen nor signalled."""
    for name, tried in report["paths"].items():
        assert tried["read"] != "ok", f"{name} ({b.paths[name]}) was readable: {report}"
        assert tried["write"] != "ok", f"{name} ({b.paths[name]}) was writable: {report}"
    for pid, tried in report["pids"].items():
        assert not tried["seen"] and tried["signal0"] == "ESRCH" and tried["kill"] == "ESRCH", (pid, tried)
    assert report["env"] == [], f"the server's secrets reached the task: {report['env']}"
    assert report["processes"] <= 8, report  # its own: the sandbox's init, the task and what it started
    shown = set(report["listings"]["home"])  # the cover of the home: the task's own folders' parents at most
    assert not shown & {"secrets", "volumes", "cache", "mounts", "tls", "millpond.db", "logs"}, shown
    assert b.alive()
    assert b.untouched()


def local_dataset_yaml(tmp_path: Path, name: str, namespace: str, files: dict[str, str]) -> str:
    """A Dataset (and its runtime) ``namespace/name`` over a local folder holding ``files``, as manifest text."""
    source = tmp_path / f"{namespace}-{name}-ufs"
    source.mkdir()
    for key, text in files.items():
        (source / key).write_text(text)
    return manifest(name, f"local://{source}", secret=False).replace(
        f"  name: {name}\n", f"  name: {name}\n  namespace: {namespace}\n")


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _descends_from(pid: int, ancestor: int) -> bool:
    """Whether ``ancestor`` is ``pid``'s parent, grand-parent, ... (another test's B runs on other workers)."""
    while pid > 1:
        pid = _parent(pid)
        if pid == ancestor:
            return True
    return False


def _host_pids(marker: str, ancestor: int, timeout: float = 90) -> list[int]:
    """The host pids of the process under ``ancestor`` whose command line is ``marker``, and of its parent."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").strip()
                if command == marker.encode() and _descends_from(int(entry), ancestor):
                    return [int(entry), _parent(int(entry))]
            except (OSError, ValueError, IndexError):
                continue
        time.sleep(0.2)
    raise AssertionError(f"no process {marker!r} started")


@pytest.fixture
def namespace_b(home: Path, cli: Callable[..., CliResult], tmp_path: Path,
                monkeypatch: pytest.MonkeyPatch) -> Iterator[NamespaceB]:
    monkeypatch.setenv("MILLPOND_MULTI_USER", "1")
    for name, value in SERVER_SECRETS.items():
        monkeypatch.setenv(name, value)
    assert cli("secret", "create", "b-secret", "-n", "team-b", "--from-literal", "password=b-value").code == 0
    finished = cli("run", PIPELINES, "--pipeline", "team_b", "--experiment", "team-b", "-o", "json")
    assert finished.code == 0, finished.err
    produced = task(finished.json(), "b-produce")
    claim = tmp_path / "claim.yaml"
    claim.write_text("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: b-claim, namespace: team-b}\n"
                     "spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n")
    applied = cli("apply", "-f", claim)
    assert applied.code == 0, applied.err
    volume = home / "volumes" / "team-b" / "b-claim"
    (volume / "data.txt").write_text("b-volume")
    # A dataset's cache blocks where datasets.config.tiers_of puts them, and a mount folder under the home
    disk_cache = home / "cache" / "ssd" / "team-b" / "b-data"
    disk_cache.mkdir(parents=True)
    (disk_cache / "block-0").write_text("b-cached")
    fuse = home / "mounts" / "team-b-b-data"
    fuse.mkdir(parents=True)
    (fuse / "file").write_text("b-mounted")
    memory_cache = isolation.MEMORY_TIER / f"test-{uuid.uuid4().hex[:8]}"
    memory_cache.mkdir(parents=True)
    (memory_cache / "block-0").write_text("b-cached-in-memory")
    tls = ensure_certificate(home, Subjects.of([]))
    pids: list[int] = []
    runner = spawn_cli(home, "run", PIPELINES, "--pipeline", "team_b_sleeping", "--experiment", "team-b",
                       env={"MILLPOND_MULTI_USER": "1"})
    try:
        pids = _host_pids("sleep 987.654", runner.pid)
        staged = sorted((home / "staging").glob("*-platform"))  # B's secret files, bound at /mnt/b-secret
        assert staged, list((home / "staging").iterdir())
        paths = {
            "artifact": produced["outputs"]["data"], "task log": produced["log"],
            "secret": str(home / "secrets" / "team-b" / "b-secret.json"), "secrets folder": str(home / "secrets"),
            "secret as files": str(staged[0]), "secret in the environment of b's task": f"/proc/{pids[1]}/environ",
            "pvc folder": str(volume), "pvc file": str(volume / "data.txt"),
            "dataset cache": str(disk_cache / "block-0"), "memory cache": str(memory_cache / "block-0"),
            "mount folder": str(fuse), "database": str(home / "millpond.db"), "tls key": str(tls.key),
        }
        for path in paths.values():
            assert Path(path).exists(), path
        contents = {paths["artifact"]: "b-artifact", paths["pvc file"]: "b-volume",
                    paths["dataset cache"]: "b-cached", paths["memory cache"]: "b-cached-in-memory"}
        yield NamespaceB(home, paths, pids, runner, contents)
    finally:
        runner.terminate()
        try:
            runner.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            runner.kill()
            runner.communicate()
        shutil.rmtree(memory_cache, ignore_errors=True)
    deadline = time.monotonic() + 30  # B's run, stopped, took its confined processes with it
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids), "B's processes outlived its stopped run"

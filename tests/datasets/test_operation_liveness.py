"""A data operation whose process is killed is seen dead: resumed (DataLoad, DataMigrate) copying only
what is missing, or Failed saying its process died — at the next status read, or when a server starts.

The copies run through a slow link (a rate-limited proxy in front of the SeaweedFS fixture), so a
test kills the operation's process with SIGKILL mid-copy without racing it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from millpond.datasets.cache.index import CacheIndex
from millpond.datasets.config import load_config
from millpond.datasets.operations import liveness
from millpond.datasets.operations.runner import wait
from millpond.runners.processes import start_ticks
from millpond.store.resources import ProcessRecord, ResourceStore
from millpond.store.secrets import ConfigStore
from tests.datasets_support import SECRET, manifest, payload, s3_options
from tests.slow_link import SlowLink

pytestmark = pytest.mark.s3

# A DataMigrate (one file at a time) of FILES files; a DataLoad fetches 64 files at once, so its
# dataset holds many small ones, cached in waves of 64 (the cache index is written every second).
FILES, FILE_SIZE = 16, 256 * 1024
LOAD_FILES, LOAD_FILE_SIZE = 256, 16 * 1024
TOTAL = FILES * FILE_SIZE  # 4 MiB either way
assert TOTAL == LOAD_FILES * LOAD_FILE_SIZE
RATE = 512 * 1024  # bytes a second each way: a copy lasts about 8 s
HEADERS = 1024  # at most, per request (or response) through the link, besides the bytes copied
DEADLINE_S = 60  # only says "it does not hang"


@pytest.fixture
def link(s3_server) -> Iterator[SlowLink]:
    slow = SlowLink(s3_server.endpoint_url, RATE)
    yield slow
    slow.close()


@pytest.fixture(autouse=True)
def _end_leftovers(home: Path) -> Iterator[None]:
    """Whatever operation process of this test's home is still running at its end is killed (by pid)."""
    yield
    for pid in _operation_pids(home):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _operation_pids(home: Path, kind: str | None = None, name: str | None = None) -> list[int]:
    """Live (not zombie) ``python -m millpond.datasets.operations KIND NAME`` processes of ``home``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if b"millpond.datasets.operations" not in argv or state in ("Z", "X"):
            continue
        if f"MILLPOND_HOME={home}".encode() not in environ:
            continue
        words = [w.decode() for w in argv]
        at = words.index("millpond.datasets.operations")
        if (kind is None or words[at + 1] == kind) and (name is None or words[at + 2] == name):
            found.append(int(entry.name))
    return found


def _until(what: str, check: Callable[[], Any], timeout: float = DEADLINE_S) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout:.0f}s: {what}")


def _kill(pid: int) -> None:
    """SIGKILL, and wait until it is gone (or a zombie: killed, not yet reaped)."""
    os.kill(pid, signal.SIGKILL)

    def gone() -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] in ("Z", "X")
        except OSError:
            return True

    _until(f"process {pid} gone", gone, 10)


def _one_process(home: Path, kind: str, name: str, besides: tuple[int, ...] = ()) -> int:
    pids = _until(f"a process of {kind} {name}",
                  lambda: [p for p in _operation_pids(home, kind, name) if p not in besides])
    assert len(pids) == 1, pids
    return int(pids[0])


def _status(cli, kind: str, name: str) -> dict[str, Any]:
    result = cli("get", kind, name, "-o", "json")
    assert result.code == 0, result.err
    return result.json()["status"]


def _ended(cli, kind: str, name: str) -> dict[str, Any]:
    """The status once Complete or Failed, read as users read it (each read checks the process)."""
    def ended() -> dict[str, Any] | None:
        status = _status(cli, kind, name)
        return status if status["phase"] in ("Complete", "Failed") else None

    return _until(f"{kind} {name} ended", ended)  # type: ignore[no-any-return]


def _apply(cli, tmp_path: Path, text: str, name: str) -> None:
    (tmp_path / f"{name}.yaml").write_text(text)
    result = cli("apply", "-f", tmp_path / f"{name}.yaml")
    assert result.code == 0, result.err


def _secret(home: Path, s3_server) -> None:
    ConfigStore(home).create(
        "secret", SECRET, {"aws.accessKeyId": s3_server.access_key, "aws.secretKey": s3_server.secret_key},
        replace=True,
    )


def _slow_dataset(cli, home: Path, tmp_path: Path, s3_server, link: SlowLink) -> dict[str, bytes]:
    """A dataset ``slow`` whose S3 is reached through ``link``, holding LOAD_FILES files of LOAD_FILE_SIZE bytes."""
    _secret(home, s3_server)
    bucket = s3_server.create_bucket()
    files = {f"part-{i:03d}.bin": payload(f"part{i}", LOAD_FILE_SIZE) for i in range(LOAD_FILES)}
    s3_server.filesystem().pipe({f"{bucket}/data/{key}": data for key, data in files.items()})
    options = {"alluxio.underfs.s3.endpoint": link.url, "alluxio.underfs.s3.endpoint.region": s3_server.region,
               "alluxio.underfs.s3.disable.dns.buckets": "true"}
    levels = [{"mediumtype": "SSD", "path": str(tmp_path / "cache-ssd"), "quota": "256Mi"}]
    (tmp_path / "slow.yaml").write_text(manifest("slow", f"s3://{bucket}/data", options=options, levels=levels))
    assert cli("apply", "-f", tmp_path / "slow.yaml").code == 0
    return files


def _cached_bytes(name: str) -> int:
    """Bytes of the files the dataset's cache index holds complete (what a DataLoad would skip)."""
    index = CacheIndex(load_config(name).state_dir)
    try:
        return sum(row.size for row in index.entries() if row.complete)
    finally:
        index.close()


def _encrypt() -> str:
    return (
        "      encryptOptions:\n"
        f"        - {{name: aws.accessKeyId, valueFrom: {{secretKeyRef: {{name: {SECRET}, key: aws.accessKeyId}}}}}}\n"
        f"        - {{name: aws.secretKey, valueFrom: {{secretKeyRef: {{name: {SECRET}, key: aws.secretKey}}}}}}\n"
    )


def _migrate(name: str, source: str, target: str, extra: str = "") -> str:
    """A DataMigrate out of dataset ``source`` (Fluid's rule: one side is a dataset) to the URI ``target``."""
    return (
        f"apiVersion: data.fluid.io/v1alpha1\nkind: DataMigrate\nmetadata: {{name: {name}}}\nspec:\n"
        f"  from:\n    dataset: {{name: {source}, namespace: default, path: /}}\n"
        f"  to:\n    externalStorage:\n      uri: {target}\n{_encrypt()}{extra}"
    )


def _migration(cli, home: Path, tmp_path: Path, s3_server, link: SlowLink) -> tuple[str, str, dict[str, bytes]]:
    """(source dataset, target URI through the slow link, the source's files): FILES objects to copy."""
    _secret(home, s3_server)
    source, target = s3_server.create_bucket(), s3_server.create_bucket()
    files = {f"part-{i:02d}.bin": payload(f"m{i}", FILE_SIZE) for i in range(FILES)}
    fs = s3_server.filesystem()
    for key, data in files.items():
        fs.pipe_file(f"{source}/in/{key}", data)
    levels = [{"mediumtype": "SSD", "path": str(tmp_path / "cache-src"), "quota": "256Mi"}]
    (tmp_path / "src.yaml").write_text(manifest("src", f"s3://{source}/in", options=s3_options(s3_server),
                                                levels=levels))
    assert cli("apply", "-f", tmp_path / "src.yaml").code == 0
    return "src", f"minio://{link.host}/{target}/out/", files


def _copied(s3_server, target_uri: str) -> dict[str, bytes]:
    bucket_and_prefix = target_uri.split("/", 3)[3].rstrip("/")
    fs = s3_server.filesystem()
    return {Path(path).name: fs.cat_file(path) for path in fs.find(bucket_and_prefix)}


def test_a_killed_dataload_resumes_and_fetches_only_what_is_missing(
    cli, home, tmp_path, s3_server, link
) -> None:
    files = _slow_dataset(cli, home, tmp_path, s3_server, link)
    _apply(cli, tmp_path, "apiVersion: data.fluid.io/v1alpha1\nkind: DataLoad\nmetadata: {name: warm}\n"
           "spec:\n  dataset: {name: slow, namespace: default}\n", "load")
    first = _one_process(home, "DataLoad", "warm")
    _until("some files cached", lambda: _cached_bytes("slow") > 0 and _status(cli, "dataload", "warm")["progress"])
    _kill(first)
    killed_at = time.monotonic()
    cached = _cached_bytes("slow")
    assert 0 < cached < TOTAL  # killed mid-copy
    _, down_before = link.settle()

    reading = time.monotonic()
    seen = _status(cli, "dataload", "warm")  # the read that sees the process dead resumes it
    seen_after = time.monotonic() - reading
    assert seen["phase"] in ("Pending", "Executing")
    _one_process(home, "DataLoad", "warm", besides=(first,))
    final = _ended(cli, "dataload", "warm")
    complete_after = time.monotonic() - killed_at

    assert final["phase"] == "Complete", final
    assert int(final["infos"]["fetchedBytes"]) == TOTAL - cached  # only what was missing
    _, down_after = link.counts()
    missing_files = (TOTAL - cached) // LOAD_FILE_SIZE
    assert TOTAL - cached <= down_after - down_before < TOTAL - cached + HEADERS * (missing_files + 16)
    assert _cached_bytes("slow") == TOTAL
    log = (home / "operations" / "default_DataLoad_warm.log").read_text()
    assert f"DataLoad warm: its process (pid {first}) died; resuming it (1 of at most 3 resumes)" in log
    from millpond.datasets.cache.engine import open_cache

    cache = open_cache("slow")
    assert all(cache.read_file(key) == data for key, data in files.items())
    print(f"\nDataLoad killed: resumed in {seen_after:.2f}s (one `millpond get`), Complete {complete_after:.2f}s "
          f"after the kill; {cached} of {TOTAL} bytes were cached and not fetched again")


def test_a_killed_datamigrate_resumes_copying_only_the_missing_files(cli, home, tmp_path, s3_server, link) -> None:
    source, target, files = _migration(cli, home, tmp_path, s3_server, link)
    _apply(cli, tmp_path, _migrate("move", source, target), "move")
    first = _one_process(home, "DataMigrate", "move")
    _until("a file copied", lambda: (_status(cli, "datamigrate", "move").get("progress") or {}).get("bytes"))
    _kill(first)
    killed_at = time.monotonic()
    up_before, _ = link.settle()
    at_kill = _copied(s3_server, target)
    assert 0 < len(at_kill) < FILES  # killed mid-copy

    reading = time.monotonic()
    seen = _status(cli, "datamigrate", "move")
    seen_after = time.monotonic() - reading
    assert seen["phase"] in ("Pending", "Executing"), seen
    final = _ended(cli, "datamigrate", "move")
    complete_after = time.monotonic() - killed_at

    assert final["phase"] == "Complete", final
    assert _copied(s3_server, target) == files
    infos = final["infos"]
    skipped = int(infos["skippedBytes"])
    assert int(infos["skippedFiles"]) >= len(at_kill) - 1  # the file being written when it died is written again
    assert (infos["files"], infos["bytes"]) == (str(FILES), str(TOTAL))
    up_after, _ = link.counts()
    sent = up_after - up_before
    assert TOTAL - skipped <= sent < TOTAL - skipped + HEADERS * (FILES + 16)  # only the missing files were sent
    assert not list((home / "operations").glob("*.copied"))  # the journal goes when the migrate completes
    print(f"\nDataMigrate killed: resumed in {seen_after:.2f}s (one `millpond get`), Complete {complete_after:.2f}s "
          f"after the kill; {infos['skippedFiles']} of {FILES} files were complete and not copied again")


def test_an_operation_whose_process_keeps_dying_ends_failed(cli, home, tmp_path, s3_server, link) -> None:
    source, target, _ = _migration(cli, home, tmp_path, s3_server, link)
    _apply(cli, tmp_path, _migrate("doomed", source, target), "doomed")
    killed: tuple[int, ...] = ()
    for attempt in range(liveness.MAX_RESUMES + 1):
        pid = _one_process(home, "DataMigrate", "doomed", besides=killed)
        _kill(pid)
        killed += (pid,)
        status = _status(cli, "datamigrate", "doomed")
        if attempt < liveness.MAX_RESUMES:
            assert status["phase"] in ("Pending", "Executing"), status
    assert status["phase"] == "Failed", status
    message = status["conditions"][0]["message"]
    assert message == (f"DataMigrate doomed: its process (pid {killed[-1]}) died; "
                       f"it was resumed {liveness.MAX_RESUMES} times and died each time")
    assert _operation_pids(home, "DataMigrate", "doomed") == []
    assert _status(cli, "datamigrate", "doomed")["phase"] == "Failed"


def test_a_killed_step_waiting_on_run_after_fails_and_wait_says_why(cli, home, tmp_path, s3_server, link) -> None:
    source, target, _ = _migration(cli, home, tmp_path, s3_server, link)
    backup = tmp_path / "backups"
    _apply(cli, tmp_path, _migrate("first", source, target) + f"""\
---
apiVersion: data.fluid.io/v1alpha1
kind: DataBackup
metadata: {{name: after}}
spec:
  dataset: slow
  backupPath: local://{backup}
  runAfter: {{kind: DataMigrate, name: first}}
""", "chain")
    waiting = _one_process(home, "DataBackup", "after")
    _until("waiting", lambda: _status(cli, "databackup", "after").get("waitingFor"))
    _kill(waiting)
    started = time.monotonic()
    status = wait("DataBackup", "after", timeout=DEADLINE_S)  # the SDK's wait sees it, with no `get` before
    print(f"\nDataBackup killed while Pending: Failed after {time.monotonic() - started:.2f}s (wait())")
    assert status["phase"] == "Failed"
    assert status["conditions"][0]["message"] == f"DataBackup after: its process (pid {waiting}) died"
    assert "waitingFor" not in status
    assert _status(cli, "datamigrate", "first")["phase"] in ("Pending", "Executing")  # the step before goes on
    assert wait("DataMigrate", "first", timeout=DEADLINE_S)["phase"] == "Complete"
    assert not backup.exists()


def test_a_cron_operation_whose_process_died_is_seen(cli, home, tmp_path, s3_server, link) -> None:
    _slow_dataset(cli, home, tmp_path, s3_server, link)
    _apply(cli, tmp_path, """\
apiVersion: data.fluid.io/v1alpha1
kind: DataProcess
metadata: {name: nightly}
spec:
  dataset: {name: slow, namespace: default, mountPath: /data}
  processor: {script: {image: debian, command: [bash], source: "ls /data"}}
  policy: Cron
  schedule: "0 0 1 1 *"
---
apiVersion: data.fluid.io/v1alpha1
kind: DataLoad
metadata: {name: hourly}
spec:
  dataset: {name: slow, namespace: default}
  policy: Cron
  schedule: "0 0 1 1 *"
""", "cron")
    process_pid = _one_process(home, "DataProcess", "nightly")
    load_pid = _one_process(home, "DataLoad", "hourly")
    _until("scheduled", lambda: _status(cli, "dataprocess", "nightly").get("nextScheduleTime"))
    _kill(process_pid)
    _kill(load_pid)
    status = _status(cli, "dataprocess", "nightly")
    assert status["phase"] == "Failed"
    assert status["conditions"][0]["message"] == (
        f"DataProcess nightly: its process (pid {process_pid}) died; its schedule no longer runs"
    )
    assert _status(cli, "dataload", "hourly")["phase"] != "Failed"  # its schedule resumed in a new process
    _one_process(home, "DataLoad", "hourly", besides=(load_pid,))


def test_a_recorded_pid_reused_by_another_process_is_not_taken_for_the_operation(cli, home) -> None:
    store = ResourceStore()
    store.apply([{"apiVersion": "data.fluid.io/v1alpha1", "kind": "DataProcess", "metadata": {"name": "proc"},
                  "spec": {"dataset": {"name": "any"}, "processor": {"script": {"source": "true"}}}}])
    store.set_status("DataProcess", "proc", {"phase": "Executing", "conditions": []})
    other = subprocess.Popen(["sleep", "60"])
    try:
        ticks = start_ticks(other.pid)
        assert ticks is not None
        store.record_process("DataProcess", "proc", "default", ProcessRecord(other.pid, ticks))
        assert _status(cli, "dataprocess", "proc")["phase"] == "Executing"  # the recorded process, alive
        # The same pid, started at another time: the operation's process died and its pid went to another.
        store.record_process("DataProcess", "proc", "default", ProcessRecord(other.pid, str(int(ticks) - 1)))
        status = _status(cli, "dataprocess", "proc")
        assert status["phase"] == "Failed"
        assert status["conditions"][0]["message"] == f"DataProcess proc: its process (pid {other.pid}) died"
        assert other.poll() is None  # and the other process was left alone
    finally:
        other.kill()
        other.wait()


def test_an_operation_that_ended_before_its_process_exited_is_not_failed(cli, home) -> None:
    """The reader saw Executing, then the process wrote Complete and exited: Complete stays."""
    store = ResourceStore()
    store.apply([{"apiVersion": "data.fluid.io/v1alpha1", "kind": "DataBackup", "metadata": {"name": "done"},
                  "spec": {"dataset": "any", "backupPath": "local:///nowhere"}}])
    process = subprocess.Popen(["sleep", "0.3"])
    record = ProcessRecord(process.pid, start_ticks(process.pid) or "")
    store.record_process("DataBackup", "done", "default", record, status={"phase": "Executing"})
    seen = store.get("DataBackup", "done")  # what a reader read while the operation ran
    store.set_status("DataBackup", "done", {"phase": "Complete", "conditions": []})  # its last write...
    process.wait()  # ...then its exit
    assert seen is not None and seen.status["phase"] == "Executing"
    assert liveness.observed(store, seen)["phase"] == "Complete"
    assert store.get("DataBackup", "done").status["phase"] == "Complete"  # type: ignore[union-attr]


def test_a_server_start_resumes_an_operation_killed_while_it_was_down(cli, home, tmp_path, s3_server, link) -> None:
    from tests.server.test_server_api import _request
    from tests.server_support import Served

    _slow_dataset(cli, home, tmp_path, s3_server, link)
    _apply(cli, tmp_path, "apiVersion: data.fluid.io/v1alpha1\nkind: DataLoad\nmetadata: {name: warm}\n"
           "spec:\n  dataset: {name: slow, namespace: default}\n", "load")
    first = _one_process(home, "DataLoad", "warm")
    _until("some files cached", lambda: _cached_bytes("slow") > 0)
    _kill(first)
    cached = _cached_bytes("slow")
    assert 0 < cached < TOTAL  # killed mid-copy
    store = ResourceStore()
    assert store.get("DataLoad", "warm").status["phase"] == "Executing"  # type: ignore[union-attr]

    started = time.monotonic()
    served = Served()
    try:
        # The stored status, read with no status read that would check the process: the server's start did.
        _until("resumed by the server", lambda: _operation_pids(home, "DataLoad", "warm"))
        resumed_after = time.monotonic() - started
        stored = _until("Complete", lambda: (s := store.get("DataLoad", "warm").status)["phase"]  # type: ignore[union-attr]
                        in ("Complete", "Failed") and s)
        assert stored["phase"] == "Complete", stored
        assert int(stored["infos"]["fetchedBytes"]) == TOTAL - cached
        code, body = _request(f"{served.url}/apis/millpond/v1/dataloads/warm")
        assert code == 200 and body["status"]["phase"] == "Complete"
    finally:
        served.stop()
    print(f"\nDataLoad killed while no server ran: resumed {resumed_after:.2f}s after the server started")

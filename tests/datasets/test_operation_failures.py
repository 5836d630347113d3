"""Every way a data operation can fail ends it ``Failed`` with a one-line reason, soon.

Against real storage faults: a SeaweedFS whose buckets answer every PUT with 500, a port where
nothing listens, a host name that does not resolve, a host that never answers (a listener whose
queue is full: its SYNs are dropped, as a black-holed address's are), the shared corpus's
DataLoads over such hosts, an error nobody foresaw (the dataset's cache index is not a
database), and SIGTERM to the operation's process. ``apply --wait`` runs as its own process, so
a hang fails the test instead of hanging it; the seconds until ``Failed`` are recorded as the
test's ``seconds_until_failed`` property (``-o junit_family=legacy --junitxml=FILE``). The bound
asserted only says "it does not hang".
"""

from __future__ import annotations

import http.server
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond import fluid
from millpond.datasets.mounts import fuse_available, is_mounted
from millpond.fluid import constants, models
from millpond.runners.sandbox import sandbox_problem
from millpond.store.secrets import ConfigStore
from tests.conftest import spawn_cli
from tests.datasets_support import manifest, payload
from tests.s3_server import S3Server, _free_ports

pytestmark = pytest.mark.s3

CORPUS = (Path(__file__).parents[2] / "../shared/conformance/fluid-manifests").resolve()
HANG_S = 60  # longer than this is a hang: the bound only says "it does not hang"
KEYS = "failing-keys"


@pytest.fixture
def work(cli, home: Path, tmp_path: Path) -> Iterator[Path]:
    """A ReadWrite dataset ``work`` over a local folder holding 40 files; the folder."""
    store = tmp_path / "store"
    (store / "raw").mkdir(parents=True)
    for i in range(40):
        (store / "raw" / f"part-{i:03d}.bin").write_bytes(payload(f"part{i}", 30_000 + i))
    levels = [{"mediumtype": "MEM", "path": str(tmp_path / "shm"), "quota": "256Mi"}]
    (tmp_path / "ds.yaml").write_text(
        manifest("work", f"local://{store}", secret=False, levels=levels, access="ReadWriteMany")
    )
    assert cli("apply", "-f", tmp_path / "ds.yaml").code == 0
    yield store
    folder = home / "mnt" / "default" / "work"  # a DataProcess's mount, which outlives it
    if is_mounted(str(folder)):
        subprocess.run(["fusermount3", "-u", "-z", str(folder)], check=False)


@pytest.fixture
def black_hole() -> Iterator[str]:
    """``127.0.0.1:PORT`` where a connection is never accepted: the listener's one-place queue is full."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    filler = socket.create_connection(listener.getsockname())
    try:
        yield "127.0.0.1:%d" % listener.getsockname()[1]
    finally:
        filler.close()
        listener.close()


@pytest.fixture
def runners(home: Path) -> Iterator[Callable[[str, str], int]]:
    """The pid of this home's background process for an operation; any left at the end is killed, with its children."""

    def find(kind: str, name: str) -> int:
        for pid in _home_runners(home):
            if _cmdline(pid)[-3:-1] == [kind, name]:
                return pid
        raise AssertionError(f"no process runs {kind} {name}")

    yield find
    for pid in _home_runners(home):
        try:
            os.killpg(pid, signal.SIGKILL)  # each leads its own process group: its scripts go with it
        except ProcessLookupError:
            pass


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def _home_of(pid: int) -> str | None:
    try:
        variables = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for variable in variables:
        if variable.startswith(b"MILLPOND_HOME="):
            return variable.split(b"=", 1)[1].decode(errors="replace")
    return None


def _home_runners(home: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and "millpond.datasets.operations" in _cmdline(int(entry.name)):
            if _home_of(int(entry.name)) == str(home):
                found.append(int(entry.name))
    return found


def _keys(home: Path, server: S3Server) -> None:
    ConfigStore(home).create(
        "secret", KEYS, {"aws.accessKeyId": server.access_key, "aws.secretKey": server.secret_key}, replace=True
    )


def _migrate_out(name: str, uri: str, secret: str = KEYS, parallelism: int = 1) -> str:
    return f"""\
apiVersion: data.fluid.io/v1alpha1
kind: DataMigrate
metadata: {{name: {name}}}
spec:
  from: {{dataset: {{name: work, namespace: default, path: /raw/}}}}
  to:
    externalStorage:
      uri: "{uri}"
      encryptOptions:
        - {{name: aws.accessKeyId, valueFrom: {{secretKeyRef: {{name: {secret}, key: aws.accessKeyId}}}}}}
        - {{name: aws.secretKey, valueFrom: {{secretKeyRef: {{name: {secret}, key: aws.secretKey}}}}}}
  parallelism: {parallelism}
"""


def _apply_wait(home: Path, path: Path) -> tuple[int, str, float]:
    """``millpond apply --wait -f PATH`` as a process: (exit status, stderr, seconds it took)."""
    started = time.monotonic()
    process = spawn_cli(home, "apply", "--wait", "-f", path)
    try:
        _, err = process.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        pytest.fail(f"apply --wait still waiting after {HANG_S}s (the operation hangs); stderr: {err}")
    return process.returncode, err, time.monotonic() - started


def _status(cli, kind: str, name: str) -> dict[str, Any]:
    result = cli("get", kind, name, "-o", "json")
    assert result.code == 0, result.err
    return result.json()["status"]


def _failed_message(cli, kind: str, name: str) -> str:
    status = _status(cli, kind, name)
    assert status["phase"] == "Failed", status
    (condition,) = status["conditions"]
    assert condition["type"] == "Failed" and condition["reason"].lower() == f"{kind}failed", condition
    assert "\n" not in condition["message"]
    return condition["message"]


def _one_error_line(err: str) -> str:
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


def _until(check: Callable[[], bool], what: str, limit_s: float = HANG_S) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < limit_s, f"not {what} after {limit_s}s"
        time.sleep(0.1)
    return time.monotonic() - started


def test_a_bucket_that_fails_every_put_fails_the_migrate_with_the_500(
    cli, home: Path, tmp_path: Path, work: Path, failing_s3_server: S3Server, record_property
) -> None:
    _keys(home, failing_s3_server)
    bucket = failing_s3_server.create_bucket()
    host = failing_s3_server.endpoint_url.split("://", 1)[1]
    (tmp_path / "ops.yaml").write_text(_migrate_out("to-s3", f"minio://{host}/{bucket}/out/"))
    code, err, seconds = _apply_wait(home, tmp_path / "ops.yaml")
    record_property("seconds_until_failed", round(seconds, 1))
    assert code == 1
    message = _failed_message(cli, "datamigrate", "to-s3")
    assert message.startswith(f"DataMigrate to-s3: cannot write minio://{host}/{bucket}/out/part-"), message
    assert "500 Internal Server Error (InternalError: " in message and "(tried 3 times in " in message, message
    assert _one_error_line(err) == f"error: {message}"


@pytest.mark.parametrize("where", ["closed port", "unresolvable host"])
def test_a_closed_port_or_an_unknown_host_fails_the_migrate_saying_so(
    cli, home: Path, tmp_path: Path, work: Path, s3_server: S3Server, record_property, where: str
) -> None:
    _keys(home, s3_server)
    if where == "closed port":
        host = f"127.0.0.1:{_free_ports(1)[0]}"
        cause = f"cannot connect to {host}: Connection refused (tried 3 times in "
    else:
        host = "no-such-host.invalid:9000"  # .invalid never resolves (RFC 2606)
        cause = "cannot resolve no-such-host.invalid: failed to lookup address information"
    (tmp_path / "ops.yaml").write_text(_migrate_out("to-closed", f"minio://{host}/bucket/out/"))
    code, err, seconds = _apply_wait(home, tmp_path / "ops.yaml")
    record_property("seconds_until_failed", round(seconds, 1))
    assert code == 1
    message = _failed_message(cli, "datamigrate", "to-closed")
    assert message.startswith(f"DataMigrate to-closed: cannot write minio://{host}/bucket/out/part-"), message
    assert cause in message, message
    assert _one_error_line(err) == f"error: {message}"


def test_a_host_that_never_answers_fails_the_migrate_in_seconds(
    cli, home: Path, tmp_path: Path, work: Path, s3_server: S3Server, black_hole: str, record_property
) -> None:
    _keys(home, s3_server)
    (tmp_path / "ops.yaml").write_text(_migrate_out("to-nowhere", f"minio://{black_hole}/bucket/out/", parallelism=4))
    code, err, seconds = _apply_wait(home, tmp_path / "ops.yaml")
    record_property("seconds_until_failed", round(seconds, 1))
    assert code == 1
    message = _failed_message(cli, "datamigrate", "to-nowhere")
    assert message.startswith(f"DataMigrate to-nowhere: cannot write minio://{black_hole}/bucket/out/part-"), message
    assert f"no answer from {black_hole} in time (timed out)" in message, message
    assert _one_error_line(err) == f"error: {message}"


def test_a_refused_request_is_not_retried(
    cli, home: Path, tmp_path: Path, work: Path, s3_server: S3Server, record_property
) -> None:
    ConfigStore(home).create("secret", "wrong", {"aws.accessKeyId": s3_server.access_key, "aws.secretKey": "nope"})
    bucket = s3_server.create_bucket()
    host = s3_server.endpoint_url.split("://", 1)[1]
    (tmp_path / "ops.yaml").write_text(_migrate_out("wrong-key", f"minio://{host}/{bucket}/out/", secret="wrong"))
    code, err, seconds = _apply_wait(home, tmp_path / "ops.yaml")
    record_property("seconds_until_failed", round(seconds, 1))
    message = _failed_message(cli, "datamigrate", "wrong-key")
    assert code == 1 and "403 Forbidden (SignatureDoesNotMatch" in message and "tried" not in message, message
    assert s3_server.filesystem().ls(bucket) == []


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared Fluid manifest corpus is not beside the repository")
@pytest.mark.parametrize(
    ("dataset_file", "load_file", "load", "unreachable"),
    [
        ("docs_en_samples_automatic_clean_up_data_operation_15.yaml",
         "docs_en_samples_automatic_clean_up_data_operation_16.yaml", "hbase-dataload", "black hole"),
        ("docs_en_samples_api_proxy_12.yaml", "docs_en_samples_data_warmup_23.yaml", "spark-dataload", "closed port"),
    ],
)
def test_a_corpus_dataload_over_an_unreachable_host_fails(
    cli, home: Path, tmp_path: Path, black_hole: str, runners, record_property,
    dataset_file: str, load_file: str, load: str, unreachable: str,
) -> None:
    """The corpus's Dataset with its web mirror replaced by an unreachable address, and its DataLoad as written."""
    host = black_hole if unreachable == "black hole" else f"127.0.0.1:{_free_ports(1)[0]}"
    documents = list(yaml.safe_load_all((CORPUS / dataset_file).read_text()))
    for document in documents:
        if document["kind"] == "Dataset":
            mount = document["spec"]["mounts"][0]
            scheme, _, rest = mount["mountPoint"].partition("://")
            mount["mountPoint"] = f"http://{host}/{rest.split('/', 1)[1]}"
        else:  # its runtime: the cache away from the machine's /dev/shm
            for level in document["spec"]["tieredstore"]["levels"]:
                level["path"] = str(tmp_path / "cache")
    (tmp_path / "dataset.yaml").write_text(yaml.safe_dump_all(documents))
    assert cli("apply", "-f", tmp_path / "dataset.yaml").code == 0
    code, err, seconds = _apply_wait(home, CORPUS / load_file)
    record_property("seconds_until_failed", round(seconds, 1))
    assert code == 1
    message = _failed_message(cli, "dataload", load)
    assert message.startswith(f"DataLoad {load}: cannot list http://{host}/"), message
    cause = "no answer in time" if unreachable == "black hole" else "Cannot connect to host"
    assert cause in message, message
    assert _one_error_line(err) == f"error: {message}"


class _Stalling(http.server.BaseHTTPRequestHandler):
    """A web folder that lists its files and answers HEAD, but never sends a file's bytes."""

    files = {"a.bin": 1000, "b.bin": 2000, "c.bin": 3000}
    release = threading.Event()

    def do_HEAD(self) -> None:  # noqa: N802 - the handler API's name
        name = self.path.rsplit("/", 1)[-1]
        if self.path.rstrip("/") == "/data":
            body = "".join(f'<a href="{n}">{n}</a>\n' for n in self.files).encode()
            self._answer(200, "text/html", len(body))
            return body
        if name not in self.files:
            self._answer(404, "text/plain", 0)
            return None
        self._answer(200, "application/octet-stream", self.files[name])
        return None

    def do_GET(self) -> None:  # noqa: N802
        body = self.do_HEAD()
        if body is not None:
            self.wfile.write(body)
        elif self.path.rsplit("/", 1)[-1] in self.files:
            self.release.wait(HANG_S * 2)  # the headers came; the bytes never do

    def _answer(self, code: int, kind: str, length: int) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_a_web_store_that_stops_sending_fails_the_load_in_seconds(
    cli, home: Path, tmp_path: Path, runners, record_property
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stalling)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        levels = [{"mediumtype": "MEM", "path": str(tmp_path / "shm"), "quota": "64Mi"}]
        url = f"http://127.0.0.1:{server.server_port}/data/"
        (tmp_path / "ds.yaml").write_text(manifest("web", url, secret=False, levels=levels))
        assert cli("apply", "-f", tmp_path / "ds.yaml").code == 0
        (tmp_path / "load.yaml").write_text(
            "apiVersion: data.fluid.io/v1alpha1\nkind: DataLoad\nmetadata: {name: stalled}\n"
            "spec:\n  dataset: {name: web, namespace: default}\n"
        )
        code, err, seconds = _apply_wait(home, tmp_path / "load.yaml")
    finally:
        _Stalling.release.set()
        server.shutdown()
    record_property("seconds_until_failed", round(seconds, 1))
    message = _failed_message(cli, "dataload", "stalled")
    assert code == 1 and message.startswith(f"DataLoad stalled: cannot read {url}"), message
    assert "no answer in time" in message, message
    assert _one_error_line(err) == f"error: {message}"


def test_an_error_nobody_foresaw_fails_the_load_and_logs_its_traceback(
    cli, home: Path, tmp_path: Path, work: Path, record_property
) -> None:
    assert cli("dataset", "sync", "work").code == 0
    (index,) = (home / "datasets" / "default").glob("work-*/index.db")
    for leftover in (index.with_name("index.db-wal"), index.with_name("index.db-shm")):
        leftover.unlink(missing_ok=True)
    index.write_bytes(b"this is not a SQLite database " * 200)  # as a torn or overwritten file would be
    (tmp_path / "load.yaml").write_text(
        "apiVersion: data.fluid.io/v1alpha1\nkind: DataLoad\nmetadata: {name: broken-index}\n"
        "spec:\n  dataset: {name: work, namespace: default}\n"
    )
    code, err, seconds = _apply_wait(home, tmp_path / "load.yaml")
    record_property("seconds_until_failed", round(seconds, 1))
    assert code == 1
    message = _failed_message(cli, "dataload", "broken-index")
    log = home / "operations" / "default_DataLoad_broken-index.log"
    assert message == f"DataLoad broken-index: unexpected DatabaseError: file is not a database (traceback in {log})"
    assert _one_error_line(err) == f"error: {message}"
    assert "Traceback (most recent call last)" in log.read_text()


@pytest.mark.skipif(
    fuse_available() is not None or sandbox_problem() is not None,
    reason=f"DataProcess needs FUSE and a sandbox: {fuse_available() or sandbox_problem()}",
)
def test_sigterm_fails_a_running_and_a_waiting_operation_and_stops_the_script(
    cli, home: Path, tmp_path: Path, work: Path, runners, record_property
) -> None:
    marker = "987654"  # the script's sleep, found among processes afterwards
    (tmp_path / "ops.yaml").write_text(f"""\
apiVersion: data.fluid.io/v1alpha1
kind: DataProcess
metadata: {{name: sleepy}}
spec:
  dataset: {{name: work, namespace: default, mountPath: /data}}
  processor:
    script: {{image: debian, command: [bash], source: "touch /data/started; sleep {marker}\\n"}}
---
apiVersion: data.fluid.io/v1alpha1
kind: DataLoad
metadata: {{name: after-sleepy}}
spec:
  dataset: {{name: work, namespace: default}}
  runAfter: {{kind: DataProcess, name: sleepy}}
""")
    assert cli("apply", "-f", tmp_path / "ops.yaml").code == 0
    _until(lambda: (work / "started").exists(), "started the script")
    assert _status(cli, "dataprocess", "sleepy")["phase"] == "Executing"
    assert _status(cli, "dataload", "after-sleepy")["phase"] == "Pending"

    os.kill(runners("DataLoad", "after-sleepy"), signal.SIGTERM)
    waiting = _until(lambda: _status(cli, "dataload", "after-sleepy")["phase"] == "Failed", "Failed")
    assert _failed_message(cli, "dataload", "after-sleepy") == "DataLoad after-sleepy: cancelled by SIGTERM"
    assert _status(cli, "dataprocess", "sleepy")["phase"] == "Executing"

    os.kill(runners("DataProcess", "sleepy"), signal.SIGTERM)
    running = _until(lambda: _status(cli, "dataprocess", "sleepy")["phase"] == "Failed", "Failed")
    record_property("seconds_until_failed", f"pending {waiting:.1f}, executing {running:.1f}")
    assert _failed_message(cli, "dataprocess", "sleepy") == "DataProcess sleepy: cancelled by SIGTERM"
    _until(lambda: not _sleepers(home, marker), "stopped the script")
    time.sleep(1)  # nothing writes Executing over it afterwards
    assert _status(cli, "dataprocess", "sleepy")["phase"] == "Failed"


def _sleepers(home: Path, marker: str) -> list[int]:
    return [
        int(entry.name) for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and _cmdline(int(entry.name))[-2:] == ["sleep", marker]
        and _home_of(int(entry.name)) == str(home)
    ]


def test_a_flow_stops_at_the_failed_step_and_wait_raises_its_reason(
    home: Path, tmp_path: Path, failing_s3_server: S3Server, record_property
) -> None:
    folder = tmp_path / "ufs"
    folder.mkdir()
    (folder / "model.pt").write_bytes(b"weights" * 1000)
    _keys(home, failing_s3_server)
    client = fluid.FluidClient(fluid.ClientConfig())
    client.create_dataset(dataset_name="flowing", mount_point=f"local://{folder}", mode="ReadWrite")
    dataset = client.get_dataset("flowing")
    dataset.bind_runtime(runtime_type=constants.ALLUXIO_RUNTIME_KIND, replicas=1, cache_capacity_GiB=1,
                         cache_medium="SSD", wait=True)
    bucket = failing_s3_server.create_bucket()
    host = failing_s3_server.endpoint_url.split("://", 1)[1]
    keys = [models.EncryptOption(name=key, value_from=models.EncryptOptionSource(
        secret_key_ref=models.SecretKeySelector(name=KEYS, key=key))) for key in ("aws.accessKeyId", "aws.secretKey")]
    flow = dataset.migrate(path="/model.pt", migrate_direction=constants.DATA_MIGRATE_DIRECTION_TO,
                           external_storage=models.ExternalStorage(uri=f"minio://{host}/{bucket}/ckpt/",
                                                                   encrypt_options=keys)).preload()
    started = time.monotonic()
    run = flow.run(run_id="doomed")
    with pytest.raises(fluid.DataFlowFailed) as failed:
        run.wait(timeout=HANG_S)
    record_property("seconds_until_failed", round(time.monotonic() - started, 1))
    cause = f"cannot write minio://{host}/{bucket}/ckpt/model.pt: 500 Internal Server Error"
    assert failed.value.step == "doomed-step1" and cause in str(failed.value), str(failed.value)
    assert str(failed.value).startswith('failed to wait data operation doomed-step1: DataMigrate "default/doomed-step1"'
                                        f" failed: {cause}")

    def second() -> dict[str, Any]:
        return next(iter(run.get_current_status()[1].values()))

    _until(lambda: second()["phase"] == "Failed", "Failed")
    message = second()["conditions"][0]["message"]
    assert message.startswith(f"DataLoad doomed-step2: runAfter DataMigrate doomed-step1 failed: {cause}"), message
    assert "startTime" not in second()  # it never ran
    client.cleanup_dataset("flowing")


@pytest.mark.parametrize("fault", ["black hole", "closed port", "500 to every PUT"])
def test_the_s3fs_fallback_fails_as_soon(
    black_hole: str, failing_s3_server: S3Server, record_property, fault: str
) -> None:
    """Where obstore is not installed, S3 goes through s3fs/botocore: their retries and timeouts are bounded too."""
    from millpond.datasets.ufs import UfsError, _s3fs_ufs, s3_settings

    keys = {"access_key": failing_s3_server.access_key, "secret_key": failing_s3_server.secret_key}
    endpoint = {
        "black hole": f"http://{black_hole}", "closed port": f"http://127.0.0.1:{_free_ports(1)[0]}",
        "500 to every PUT": failing_s3_server.endpoint_url,
    }[fault]
    bucket = failing_s3_server.create_bucket()
    ufs = _s3fs_ufs(f"s3://{bucket}/out", bucket, "out", s3_settings({"endpoint": endpoint, **keys}))
    started = time.monotonic()
    with pytest.raises(UfsError) as failed:
        ufs.put("model.pt", b"weights")
    record_property("seconds_until_failed", round(time.monotonic() - started, 1))
    assert time.monotonic() - started < HANG_S
    assert str(failed.value).startswith(f"cannot write s3://{bucket}/out/model.pt: "), str(failed.value)
    expected = {"black hole": "no answer in time", "closed port": "Could not connect to the endpoint URL",
                "500 to every PUT": "500 Internal Server Error (InternalError: "}[fault]
    assert expected in str(failed.value) and "\n" not in str(failed.value), str(failed.value)

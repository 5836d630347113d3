"""A real ``millpond server --mlmd-port`` for the ML Metadata tests, pipelines run on its home, and gRPC stubs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from millpond.mlmd.proto import metadata_store_pb2 as mlmd
from millpond.mlmd.proto import metadata_store_service_pb2 as api
from millpond.mlmd.proto import metadata_store_service_pb2_grpc as service

MILLPOND = Path(sys.executable).parent / "millpond"
__all__ = ["api", "mlmd"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def millpond(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``millpond ARGS`` on ``home``, in a process of its own."""
    return subprocess.run([str(MILLPOND), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "MILLPOND_HOME": str(home)}, check=False)


def run_pipeline(home: Path, package: Path, *args: str) -> dict[str, Any]:
    """One run of ``package`` to its end (SUCCEEDED), as ``millpond run -o json`` reports it."""
    done = millpond(home, "run", str(package), *args, "-o", "json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["state"] == "SUCCEEDED", result
    return result


@dataclass
class MlmdServer:
    """A running ``millpond server`` with its ML Metadata endpoint (``target``: host:port for gRPC)."""

    url: str
    target: str
    process: subprocess.Popen[bytes]
    log: Path

    def stub(self, token: str | None = None) -> Stub:
        return Stub(grpc.insecure_channel(self.target), token)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def start_server(home: Path, *args: str) -> MlmdServer:
    """``millpond server --mlmd-port`` on free ports of loopback, once both its HTTP and gRPC ports answer."""
    port, mlmd_port = free_port(), free_port()
    log = home.parent / f"server-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([str(MILLPOND), "server", "--port", str(port), "--mlmd-port", str(mlmd_port),
                                    *args], env={**os.environ, "MILLPOND_HOME": str(home)}, stdout=out,
                                   stderr=subprocess.STDOUT)
    served = MlmdServer(f"http://127.0.0.1:{port}", f"127.0.0.1:{mlmd_port}", process, log)
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{served.url}/apis/v2beta1/healthz", timeout=5):
                break
        except OSError:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)
    with grpc.insecure_channel(served.target) as channel:
        grpc.channel_ready_future(channel).result(timeout=30)
    return served


@dataclass(frozen=True)
class Recorded:
    """The server, and the two runs (``millpond run -o json``): the first ran both tasks, the second hit the cache."""

    server: MlmdServer
    first: dict[str, Any]
    second: dict[str, Any]

    def task(self, run: dict[str, Any], name: str) -> dict[str, Any]:
        [found] = [task for task in run["tasks"] if task["name"] == name]
        return found


class Stub:
    """``MetadataStoreServiceStub`` whose every call sends ``authorization: Bearer TOKEN`` when given, and the
    ``metadata`` given."""

    def __init__(self, channel: grpc.Channel, token: str | None, metadata: tuple[tuple[str, str], ...] = ()) -> None:
        self.channel = channel
        self._stub = service.MetadataStoreServiceStub(channel)
        self._metadata = ((("authorization", f"Bearer {token}"),) if token else ()) + metadata

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._stub, name)
        return lambda request: method(request, metadata=self._metadata, timeout=60)


def refused(call: Any, request: Any) -> grpc.RpcError:
    """The error a call answers (it must fail)."""
    try:
        call(request)
    except grpc.RpcError as error:
        return error
    raise AssertionError(f"{request!r} was answered")

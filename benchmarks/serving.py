"""Model serving latency and throughput: millpond's model server beside the ``kserve`` package's.

    .venv/bin/python benchmarks/serving.py                 # creates the peer's venv on first use
    .venv/bin/python benchmarks/serving.py --quick         # millpond and kserve only, 500 requests (~1 min)
    .venv/bin/python benchmarks/serving.py --runs 5        # five measurements of every server, one start

The digits classifier (scikit-learn LogisticRegression on load_digits, saved as ``model.joblib``)
is served by each, one process each, one worker each:

- millpond: ``python -m millpond.serving.model_server --format sklearn`` with its defaults (uvloop
  and httptools when installed, adaptive batching of concurrent requests);
- the peer: ``kserve.ModelServer`` (kserve from PyPI, in its own virtual environment that this
  script creates with ``python -m venv`` and ``pip install kserve scikit-learn==OURS``) serving a
  ``kserve.Model`` whose load and predict are those of KServe's sklearnserver (that server is not
  published on PyPI; its model class is a few lines over ``kserve.utils.utils``'s
  ``get_predict_input``/``get_predict_response``, written out below, predicting on the whole
  input at once as sklearnserver does).

Further columns show where millpond's figure comes from: ``unbatched`` (``--max-batch-size 1``),
``asyncio+h11`` (``--loop asyncio --http h11``, when uvloop and httptools are installed: without them
it is the default), ``gateway`` (the InferenceService's own port, ``serving.front.start``, in front
of the default one: the routing's cost is the difference) and ``server`` (``millpond server``'s
gateway in front of the same one).

The same client measures all in the same run: one row per request (64 pixels); p50/p99 latency
of sequential requests on one keep-alive connection, then throughput and p99 latency with 16
concurrent clients (threads, one keep-alive connection each), for KServe v1 (``:predict`` with
``instances``) and the Open Inference Protocol v2 (``/infer``, an FP32 tensor). Answers are checked
against ``model.predict`` before timing, and again under concurrency (batched answers). The client
is Python (http.client) on the same machine, so absolute figures include its cost; the ratio is
what to read. The servers are measured in four turns each, taken in order (millpond, ..., kserve,
millpond, ...), and each one's turns summed: on a shared machine a burst of load elsewhere then
falls on every server rather than on whichever was being measured.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import sklearn
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VENV = Path.home() / ".cache" / "millpond" / "bench-kserve-venv"
CLIENTS = 16
ROUNDS = 4  # each server measured in this many turns, taken in order, of a quarter of the requests

def _uv() -> bool:
    """uvloop and httptools are importable (the model server's defaults then)."""
    import importlib.util  # noqa: PLC0415

    return all(importlib.util.find_spec(name) is not None for name in ("uvloop", "httptools"))


REPLICA = "millpond"  # the model server the gateways route to
SERVERS = ("millpond", "unbatched", *(("asyncio+h11",) if _uv() else ()), "gateway", "server", "kserve")
QUICK = ("millpond", "kserve")

PEER = textwrap.dedent(
    """
    import os, pathlib, sys
    import joblib
    from kserve import Model, ModelServer
    from kserve.utils.utils import get_predict_input, get_predict_response

    class SKLearnModel(Model):  # what KServe's sklearnserver does: load the one model file, predict
        def __init__(self, name, model_dir):
            super().__init__(name)
            self.model_dir = model_dir
            self.ready = False

        def load(self):
            files = [p for p in pathlib.Path(self.model_dir).iterdir() if p.suffix in (".joblib", ".pkl", ".pickle")]
            self._model = joblib.load(files[0])
            self.ready = True
            return self.ready

        def predict(self, payload, headers=None):
            return get_predict_response(payload, self._model.predict(get_predict_input(payload)), self.name)

    model = SKLearnModel("digits", sys.argv[1])
    model.load()
    ModelServer(http_port=int(sys.argv[2]), workers=1, enable_grpc=False,
                enable_latency_logging=False).start([model])
    """
)


# The InferenceService's own port (serving.front.start) in front of one model server: the routing's cost.
FRONT = textwrap.dedent(
    """
    import signal, sys, threading
    from millpond.runners.processes import ProcessIdentity
    from millpond.serving import endpoints, front
    from millpond.serving.endpoints import Endpoints, Revision

    me = ProcessIdentity.own()
    revision = Revision("digits-predictor-00001", 100, (sys.argv[1],))
    endpoints.write(Endpoints(name="digits", namespace="default", uid="bench", model_name="digits", protocol="v1",
                              port=int(sys.argv[2]), revisions=(revision,), supervisor_pid=me.pid,
                              supervisor_ticks=me.start, updated="2026-01-01T00:00:00Z"))
    handle = front.start(int(sys.argv[2]), "default", "digits")
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    stopped.wait()
    handle.stop()
    """
)


def free_port() -> int:
    import socket  # noqa: PLC0415

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def peer_python(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"creating the peer's venv in {venv} (pip install kserve scikit-learn=={sklearn.__version__}) ...")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "kserve", f"scikit-learn=={sklearn.__version__}"], check=True
        )
    return python


class Client:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def post(self, path: str, body: bytes) -> Any:
        self.conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = self.conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"{path}: {response.status} {data[:200]!r}")
        return json.loads(data)


def wait_ready(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/v2/health/ready")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{what} not ready after 120 s")


def bodies(rows: np.ndarray) -> dict[str, tuple[str, list[bytes]]]:
    v1 = [json.dumps({"instances": [row.tolist()]}).encode() for row in rows]
    v2 = [
        json.dumps(
            {"inputs": [{"name": "input-0", "shape": [1, 64], "datatype": "FP32", "data": row.tolist()}]}
        ).encode()
        for row in rows
    ]
    return {"v1": ("/v1/models/digits:predict", v1), "v2": ("/v2/models/digits/infer", v2)}


def answer_of(protocol: str, body: Any) -> list[int]:
    return body["predictions"] if protocol == "v1" else body["outputs"][0]["data"]


def percentile(times: list[float], fraction: float) -> float:
    ordered = sorted(times)
    return ordered[max(0, int(len(ordered) * fraction) - 1)]


@dataclass
class Sample:
    """What one server answered in one round: sequential latencies, then the 16 clients' requests."""

    sequential: list[float] = field(default_factory=list)
    concurrent: list[float] = field(default_factory=list)
    elapsed: float = 0.0

    def add(self, other: Sample) -> None:
        self.sequential += other.sequential
        self.concurrent += other.concurrent
        self.elapsed += other.elapsed

    def figures(self) -> dict[str, float]:
        return {
            "p50_ms": statistics.median(self.sequential) * 1000,
            "p99_ms": percentile(self.sequential, 0.99) * 1000,
            "rps": len(self.concurrent) / self.elapsed,
            "p99_16_ms": percentile(self.concurrent, 0.99) * 1000,
        }


def measure(port: int, protocol: str, path: str, payloads: list[bytes], expected: list[int],
            requests: int) -> Sample:
    sample = Sample()
    client = Client(port)
    for i in range(20):  # warm up
        client.post(path, payloads[i % len(payloads)])
    for i in range(requests):
        started = time.perf_counter()
        client.post(path, payloads[i % len(payloads)])
        sample.sequential.append(time.perf_counter() - started)
    per_client = max(1, requests * 2 // CLIENTS)
    barrier = threading.Barrier(CLIENTS + 1)
    errors: list[BaseException] = []
    concurrent: list[list[float]] = [[] for _ in range(CLIENTS)]

    def run(n: int) -> None:
        own, offset, spent = Client(port), n * 37, concurrent[n]
        own.post(path, payloads[offset % len(payloads)])
        barrier.wait()
        try:
            for i in range(per_client):
                at = (offset + i) % len(payloads)
                started = time.perf_counter()
                answer = own.post(path, payloads[at])
                spent.append(time.perf_counter() - started)
                if answer_of(protocol, answer) != [expected[at]]:  # a batched answer split back to the wrong request
                    raise RuntimeError(f"request {at}: answered {answer_of(protocol, answer)}, expected {expected[at]}")
        except BaseException as exc:  # noqa: BLE001 - reported after the run
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    sample.elapsed = time.perf_counter() - started
    if errors:
        raise SystemExit(f"concurrent requests failed: {errors[0]}")
    sample.concurrent = [t for spent in concurrent for t in spent]
    return sample


METRICS = (
    ("p50_ms", "p50 latency (ms)"),
    ("p99_ms", "p99 latency (ms)"),
    ("rps", f"throughput, {CLIENTS} clients (req/s)"),
    ("p99_16_ms", f"p99 latency, {CLIENTS} clients (ms)"),
)


def report(results: dict[tuple[str, str], dict[str, float]], servers: tuple[str, ...]) -> dict[tuple[str, str], float]:
    """Print one run's table; the ratios millpond / kserve by (protocol, metric)."""
    print(f"{'protocol':<9}{'metric':<34}" + "".join(f"{name:>13}" for name in servers) + f"{'ratio':>9}")
    ratios = {}
    for protocol in ("v1", "v2"):
        for key, label in METRICS:
            values = {name: results[(protocol, name)][key] for name in servers}
            ratios[(protocol, key)] = values["millpond"] / values["kserve"]
            print(f"{protocol:<9}{label:<34}" + "".join(f"{values[name]:>13.2f}" for name in servers)
                  + f"{ratios[(protocol, key)]:>9.2f}")
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="sequential requests per protocol and server")
    parser.add_argument("--runs", type=int, default=1, help="measure every server this many times (one start)")
    parser.add_argument("--quick", action="store_true", help="millpond and kserve only, 500 requests")
    parser.add_argument("--servers", help=f"a comma-separated subset of {','.join(SERVERS)} (millpond and kserve "
                                          "are always measured)")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="the peer's virtual environment")
    args = parser.parse_args()
    servers = SERVERS
    if args.quick:
        servers, args.requests = QUICK, min(args.requests, 500)
    if args.servers:
        wanted = {"millpond", "kserve", *args.servers.split(",")}
        if wanted - set(SERVERS):
            parser.error(f"--servers: unknown {', '.join(sorted(wanted - set(SERVERS)))}")
        servers = tuple(name for name in SERVERS if name in wanted)

    x, y = load_digits(return_X_y=True)
    model = LogisticRegression(max_iter=300).fit(x[:1500], y[:1500])
    rows = x[1500:].astype(np.float32)
    expected = model.predict(rows).tolist()
    work = Path(tempfile.mkdtemp(prefix="millpond-bench-serving-"))
    (work / "model").mkdir()
    joblib.dump(model, work / "model" / "model.joblib")
    (work / "peer.py").write_text(PEER)

    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), MILLPOND_HOME=str(work / "home"))
    ports = {name: free_port() for name in ("millpond", "unbatched", "asyncio+h11", "gateway", "server", "kserve")}
    ours = [sys.executable, "-m", "millpond.serving.model_server", "--name", "digits", "--model-dir",
            str(work / "model"), "--format", "sklearn"]
    commands = {
        "millpond": [*ours, "--port", str(ports["millpond"])],
        "unbatched": [*ours, "--max-batch-size", "1", "--port", str(ports["unbatched"])],
        "asyncio+h11": [*ours, "--loop", "asyncio", "--http", "h11", "--port", str(ports["asyncio+h11"])],
        "gateway": [sys.executable, "-c", FRONT, f"http://127.0.0.1:{ports[REPLICA]}", str(ports["gateway"])],
        # millpond server's gateway (serving_routes) to the same replica, through the endpoints file "gateway" wrote
        "server": [sys.executable, "-c", "from millpond.cli.main import main; main()", "server",
                   "--port", str(ports["server"])],
        "kserve": [str(peer_python(args.venv)), str(work / "peer.py"), str(work / "model"), str(ports["kserve"])],
    }
    if "server" in servers and "gateway" not in servers:
        raise SystemExit("--servers: server needs gateway (it routes through the endpoints file gateway writes)")
    started: dict[str, subprocess.Popen[bytes]] = {}
    runs: list[dict[tuple[str, str], float]] = []
    try:
        for name in servers:  # the gateway's replica (the one before it) starts first
            started[name] = subprocess.Popen(commands[name], env=env, stdout=subprocess.DEVNULL,
                                             stderr=None if name not in ("kserve", "server") else subprocess.DEVNULL)
            wait_ready(ports[name], started[name], name)
        for protocol, (path, payloads) in bodies(rows).items():
            for name in servers:
                client = Client(ports[name])
                got = [answer_of(protocol, client.post(path, body))[0] for body in payloads]
                assert got == expected, f"{name} {protocol}: answers differ from model.predict"
        print(f"\ndigits (sklearn LogisticRegression), one row per request; kserve {kserve_version(args.venv)}, "
              f"{args.requests} sequential requests, {CLIENTS} concurrent clients; {os.cpu_count()} CPUs; "
              f"uvloop and httptools {'installed' if _uv() else 'not installed'}")
        for run in range(args.runs):
            samples = {(protocol, name): Sample() for protocol in ("v1", "v2") for name in servers}
            for _ in range(ROUNDS):  # the servers take turns: a burst of load elsewhere falls on all of them
                for protocol, (path, payloads) in bodies(rows).items():
                    for name in servers:
                        samples[(protocol, name)].add(measure(ports[name], protocol, path, payloads, expected,
                                                              max(1, args.requests // ROUNDS)))
            results = {key: sample.figures() for key, sample in samples.items()}
            print(f"\nrun {run + 1} of {args.runs} (load average {os.getloadavg()[0]:.1f})")
            runs.append(report(results, servers))
    finally:
        for proc in started.values():
            proc.terminate()
            proc.wait(timeout=30)
    print("ratio: millpond / kserve (latency: lower is better; throughput: higher is better); gateway: the "
          f"InferenceService's own port (serving.front) in front of {REPLICA}; server: millpond server's gateway "
          f"in front of {REPLICA}")
    if len(runs) > 1:
        print(f"\nmillpond / kserve over {len(runs)} runs: median (min to max)")
        for protocol in ("v1", "v2"):
            for key, label in METRICS:
                values = sorted(ratios[(protocol, key)] for ratios in runs)
                spread = f"{statistics.median(values):>9.2f} ({values[0]:.2f} to {values[-1]:.2f})"
                print(f"{protocol:<9}{label:<34}{spread}")


def kserve_version(venv: Path) -> str:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "from importlib.metadata import version; print(version('kserve'))"],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() or "?"


if __name__ == "__main__":
    main()

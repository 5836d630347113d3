"""Model serving latency and throughput: millpond's model server beside the ``kserve`` package's.

    .venv/bin/python benchmarks/serving.py                 # creates the peer's venv on first use
    .venv/bin/python benchmarks/serving.py --requests 500  # a quick trial

The digits classifier (scikit-learn LogisticRegression on load_digits, saved as ``model.joblib``)
is served twice, one process each, one worker each:

- millpond: ``python -m millpond.serving.model_server --format sklearn``;
- the peer: ``kserve.ModelServer`` (kserve from PyPI, in its own virtual environment that this
  script creates with ``python -m venv`` and ``pip install kserve scikit-learn==OURS``) serving a
  ``kserve.Model`` whose load and predict are those of KServe's sklearnserver (that server is not
  published on PyPI; its model class is a few lines over ``kserve.utils.utils``'s
  ``get_predict_input``/``get_predict_response``, written out below, predicting on the whole
  input at once as sklearnserver does).

millpond's server runs twice, on asyncio with h11 and on uvloop with httptools (what kserve runs
on), and a third column measures the routing: the InferenceService's own port
(``serving.front.start``) in front of the one before it, so its cost is the difference, and a
fourth ``millpond server``'s gateway in front of the same one. Without uvloop and httptools
installed, the second column is left out.

The same client measures all in the same run: one row per request (64 pixels); p50/p99 latency
of sequential requests on one keep-alive connection, then throughput with 16 concurrent clients
(threads, one keep-alive connection each), for KServe v1 (``:predict`` with ``instances``) and the
Open Inference Protocol v2 (``/infer``, an FP32 tensor). Answers are checked against
``model.predict`` before timing. The client is Python (http.client) on the same machine, so
absolute figures include its cost; the ratio is what to read.
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

def _uv() -> bool:
    """uvloop and httptools are importable (not millpond's dependencies: ``pip install uvloop httptools``)."""
    import importlib.util  # noqa: PLC0415

    return all(importlib.util.find_spec(name) is not None for name in ("uvloop", "httptools"))


REPLICA = "millpond+uv" if _uv() else "millpond"  # the model server the gateways route to
SERVERS = ("millpond", *(("millpond+uv",) if _uv() else ()), "gateway", "server", "kserve")

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


def measure(port: int, path: str, payloads: list[bytes], requests: int) -> dict[str, float]:
    client = Client(port)
    for i in range(100):  # warm up
        client.post(path, payloads[i % len(payloads)])
    times = []
    for i in range(requests):
        started = time.perf_counter()
        client.post(path, payloads[i % len(payloads)])
        times.append(time.perf_counter() - started)
    times.sort()
    per_client = max(1, requests * 2 // CLIENTS)
    barrier = threading.Barrier(CLIENTS + 1)
    errors: list[BaseException] = []

    def run(offset: int) -> None:
        own = Client(port)
        own.post(path, payloads[offset % len(payloads)])
        barrier.wait()
        try:
            for i in range(per_client):
                own.post(path, payloads[(offset + i) % len(payloads)])
        except BaseException as exc:  # noqa: BLE001 - reported after the run
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n * 37,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise SystemExit(f"concurrent requests failed: {errors[0]}")
    return {
        "p50_ms": statistics.median(times) * 1000,
        "p99_ms": times[int(len(times) * 0.99) - 1] * 1000,
        "rps": per_client * CLIENTS / elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="sequential requests per protocol and server")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="the peer's virtual environment")
    args = parser.parse_args()

    x, y = load_digits(return_X_y=True)
    model = LogisticRegression(max_iter=300).fit(x[:1500], y[:1500])
    rows = x[1500:].astype(np.float32)
    expected = model.predict(rows).tolist()
    work = Path(tempfile.mkdtemp(prefix="millpond-bench-serving-"))
    (work / "model").mkdir()
    joblib.dump(model, work / "model" / "model.joblib")
    (work / "peer.py").write_text(PEER)

    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), MILLPOND_HOME=str(work / "home"))
    ports = {name: free_port() for name in SERVERS}
    ours = [sys.executable, "-m", "millpond.serving.model_server", "--name", "digits", "--model-dir",
            str(work / "model"), "--format", "sklearn"]
    commands = {
        "millpond": [*ours, "--loop", "asyncio", "--http", "h11", "--port", str(ports["millpond"])],
        "millpond+uv": [*ours, "--loop", "uvloop", "--http", "httptools", "--port", str(ports.get("millpond+uv", 0))],
        "gateway": [sys.executable, "-c", FRONT, f"http://127.0.0.1:{ports[REPLICA]}", str(ports["gateway"])],
        # millpond server's gateway (serving_routes) to the same replica, through the endpoints file "gateway" wrote
        "server": [str(Path(sys.executable).parent / "millpond"), "server", "--port", str(ports["server"])],
        "kserve": [str(peer_python(args.venv)), str(work / "peer.py"), str(work / "model"), str(ports["kserve"])],
    }
    servers: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name in SERVERS:  # the gateway's replica (the one before it) starts first
            servers[name] = subprocess.Popen(commands[name], env=env, stdout=subprocess.DEVNULL,
                                             stderr=None if name not in ("kserve", "server") else subprocess.DEVNULL)
            wait_ready(ports[name], servers[name], name)
        results: dict[tuple[str, str], dict[str, float]] = {}
        for protocol, (path, payloads) in bodies(rows).items():
            for name in servers:
                client = Client(ports[name])
                got = [answer_of(protocol, client.post(path, body))[0] for body in payloads]
                assert got == expected, f"{name} {protocol}: answers differ from model.predict"
                results[(protocol, name)] = measure(ports[name], path, payloads, args.requests)
    finally:
        for proc in servers.values():
            proc.terminate()
            proc.wait(timeout=30)

    print(
        f"\ndigits (sklearn LogisticRegression), one row per request; kserve {kserve_version(args.venv)}, "
        f"{args.requests} sequential requests, {CLIENTS} concurrent clients; {os.cpu_count()} CPUs"
    )
    print(f"{'protocol':<9}{'metric':<34}" + "".join(f"{name:>13}" for name in SERVERS) + f"{'best/kserve':>13}")
    for protocol in ("v1", "v2"):
        for key, label in (
            ("p50_ms", "p50 latency (ms)"),
            ("p99_ms", "p99 latency (ms)"),
            ("rps", f"throughput, {CLIENTS} clients (req/s)"),
        ):
            values = {name: results[(protocol, name)][key] for name in SERVERS}
            ours = [values[name] for name in SERVERS if name.startswith("millpond")]
            best = max(ours) if key == "rps" else min(ours)
            print(f"{protocol:<9}{label:<34}" + "".join(f"{values[name]:>13.2f}" for name in SERVERS)
                  + f"{best / values['kserve']:>13.2f}")
    print("millpond: asyncio + h11; millpond+uv: uvloop + httptools (when installed); gateway: the "
          f"InferenceService's own port (serving.front) in front of {REPLICA}; server: millpond server's gateway "
          f"in front of {REPLICA}; best/kserve: the better "
          "millpond server over kserve (latency: lower is better; throughput: higher is better)")


def kserve_version(venv: Path) -> str:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "from importlib.metadata import version; print(version('kserve'))"],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() or "?"


if __name__ == "__main__":
    main()

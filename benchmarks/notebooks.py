"""Kubeflow Notebooks on millpond beside JupyterLab started by hand: time to a first answer, and the proxy's cost.

    .venv/bin/python benchmarks/notebooks.py               # 3 runs of each (~3 min)
    .venv/bin/python benchmarks/notebooks.py --runs 5 --messages 1000

Measured in the same run, wall milliseconds on the client side:

- **time to 1+1**: from ``kubectl apply -f notebook.yaml`` (the real kubectl, against ``millpond server``
  as its own process over a fresh home) until a kernel started through the proxy (``POST
  /notebook/NS/NAME/api/kernels``) answers ``1+1`` over its proxied WebSocket; *cold* is a fresh server's
  first notebook, applied ``--settle`` seconds (5) after the server answers (``--settle 0``: at once, when the
  first apply also waits for the server's start-up import of ``jsonschema``, ~3 s on a loaded 2-core
  machine), *warm* a second notebook beside it, *restart* the first one stopped and started again
  (``kubeflow-resource-stopped`` removed). The peer: ``jupyter lab --no-browser --port P`` started by
  hand on this machine (same Python, same flags millpond gives it), then a kernel started and asked
  ``1+1`` over its WebSocket directly. Each is the median of ``--runs`` runs, with the spread (min–max);
  issue 33's goal: ≤ 1.5× the hand-started one.
- **WebSocket round trip**, over the proxy and directly to the notebook's Jupyter (its loopback port and
  token, read from the home), alternating, ``--messages`` of each; p50 and p99, and the p50 the proxy adds
  (goal: ≤ 1 ms): a plain message echo (a keystroke sent to a terminal, ``["stdin", "a"]``, until its echo
  ``["stdout", …]`` comes back), and a kernel's ``execute_request`` of ``1+1`` until its ``execute_reply``
  (~50 ms here, most of it inside Jupyter and the kernel, on either path). Each path has a terminal and a
  kernel of its own: what one sends never arrives on the other.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import websocket

BIN = Path(sys.executable).parent
POLL_S = 0.02


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def http(url: str, method: str = "GET", body: object = None, headers: dict[str, str] | None = None) -> tuple[int, str]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={
        **({"Content-Type": "application/json"} if data is not None else {}), **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def execute_request(code: str) -> tuple[str, str]:
    msg_id = uuid.uuid4().hex
    return msg_id, json.dumps({
        "header": {"msg_id": msg_id, "username": "bench", "session": uuid.uuid4().hex,
                   "msg_type": "execute_request", "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell",
        "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True}})


def answer(socket_: websocket.WebSocket, code: str, wanted: str = "execute_result") -> str:
    """Run ``code``; the ``text/plain`` of its result (``wanted`` ``execute_reply``: its status)."""
    msg_id, message = execute_request(code)
    socket_.send(message)
    while True:
        reply = json.loads(socket_.recv())
        if reply.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if reply["msg_type"] == "error":
            raise RuntimeError(f"the kernel answered an error: {reply['content']}")
        if reply["msg_type"] == wanted:
            return str(reply["content"]["data"]["text/plain"]) if wanted == "execute_result" else \
                str(reply["content"]["status"])


def until_up(url: str, headers: dict[str, str] | None = None, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while http(url, headers=headers)[0] != 200:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")
        time.sleep(POLL_S)


def one_plus_one(base: str, headers: dict[str, str] | None = None) -> None:
    """Once ``base`` answers: a kernel started, asked 1+1 over its WebSocket (the answer checked)."""
    until_up(f"{base}/api/status", headers)
    status, text = http(f"{base}/api/kernels", "POST", {"name": "python3"}, headers)
    if status != 201:
        raise RuntimeError(f"starting a kernel: {status} {text}")
    channels = base.replace("http://", "ws://") + f"/api/kernels/{json.loads(text)['id']}/channels"
    socket_ = websocket.create_connection(channels, timeout=60,
                                          header=[f"{k}: {v}" for k, v in (headers or {}).items()])
    try:
        if answer(socket_, "1+1") != "2":
            raise RuntimeError("1+1 was not 2")
    finally:
        socket_.close()


def notebook_yaml(folder: Path, name: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(json.dumps({
        "apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": {"name": name, "namespace": "default"},
        "spec": {"template": {"spec": {"containers": [{
            "name": name, "image": "kubeflownotebookswg/jupyter-scipy:v1.8.0",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}}}))
    return path


def timed(action: Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


class Millpond:
    """``millpond server`` over a fresh home, with kubectl pointed at it."""

    def __init__(self, folder: Path, settle: float) -> None:
        self.folder, self.home, self.port = folder, folder / "home", free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "MILLPOND_HOME": str(self.home)}
        self.server = subprocess.Popen([str(BIN / "millpond"), "server", "--port", str(self.port)], env=self.env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        config = folder / "kubeconfig"
        config.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "m",
                                      "clusters": [{"name": "m", "cluster": {"server": self.url}}],
                                      "users": [{"name": "m", "user": {}}],
                                      "contexts": [{"name": "m", "context": {"cluster": "m", "user": "m"}}]}))
        self.kubectl = [str(BIN / "kubectl"), "--kubeconfig", str(config), "--cache-dir", str(folder / "cache")]
        until_up(f"{self.url}/apis/v2beta1/healthz", timeout=60)
        self.run("get", "notebooks")  # discovery cached, as a user's second kubectl finds it
        time.sleep(settle)  # a server started a moment before, as a user's is

    def run(self, *args: str) -> None:
        subprocess.run([*self.kubectl, *args], env=self.env, check=True, capture_output=True)

    def apply_to_answer(self, name: str) -> float:
        path = notebook_yaml(self.folder, name)
        return timed(lambda: (self.run("apply", "-f", str(path)),
                              one_plus_one(f"{self.url}/notebook/default/{name}"))[-1])

    def restart_to_answer(self, name: str) -> float:
        self.run("annotate", "notebook", name, "kubeflow-resource-stopped=2026-01-01T00:00:00Z")
        until_gone = time.monotonic() + 60
        while http(f"{self.url}/notebook/default/{name}/api/status")[0] == 200 and time.monotonic() < until_gone:
            time.sleep(POLL_S)
        return timed(lambda: (self.run("annotate", "notebook", name, "kubeflow-resource-stopped-"),
                              one_plus_one(f"{self.url}/notebook/default/{name}"))[-1])

    def direct(self, name: str) -> tuple[int, str]:
        """The notebook's Jupyter: its loopback port and token (what the proxy reads; never a browser's)."""
        os.environ["MILLPOND_HOME"] = str(self.home)
        from millpond.notebooks import objects
        from millpond.settings import load_settings

        found = objects.endpoint(load_settings(), "default", name)
        if found is None:
            raise RuntimeError(f"notebook {name} is not running")
        return found.port, found.token

    def close(self) -> None:
        for name in ("first", "second"):
            subprocess.run([*self.kubectl, "delete", "notebook", name, "--ignore-not-found"], env=self.env,
                           capture_output=True)
        self.server.send_signal(signal.SIGTERM)
        self.server.wait(30)


def by_hand(folder: Path) -> float:
    """``jupyter lab`` started by hand, a kernel asked 1+1 over its WebSocket directly."""
    port, token = free_port(), uuid.uuid4().hex
    root = folder / f"lab-{port}"
    root.mkdir()
    env = {**os.environ, "JUPYTER_TOKEN": token, "JUPYTER_RUNTIME_DIR": str(root / "runtime"),
           "JUPYTER_CONFIG_DIR": str(root / "config"), "JUPYTER_DATA_DIR": str(root / "data"),
           "IPYTHONDIR": str(root / "ipython"), "JUPYTER_PLATFORM_DIRS": "1"}
    started = time.perf_counter()
    lab = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
                            "--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0", f"--ServerApp.root_dir={root}",
                            "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                            *(["--allow-root"] if os.geteuid() == 0 else [])],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        one_plus_one(f"http://127.0.0.1:{port}", {"Authorization": f"token {token}"})
        return (time.perf_counter() - started) * 1000
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        lab.wait(30)


def terminal(url: str, headers: list[str]) -> websocket.WebSocket:
    """A terminal's WebSocket, its first output (the prompt) read."""
    socket_ = websocket.create_connection(url, timeout=60, header=headers)
    socket_.settimeout(1.0)
    try:
        while True:
            socket_.recv()
    except websocket.WebSocketTimeoutException:
        pass
    socket_.settimeout(60)
    return socket_


def echo(socket_: websocket.WebSocket, key: str) -> None:
    socket_.send(json.dumps(["stdin", key]))
    while json.loads(socket_.recv())[0] != "stdout":
        pass


def echo_trips(millpond: Millpond, name: str, messages: int) -> tuple[list[float], list[float]]:
    """A keystroke's echo from a terminal, over the proxy and directly (a terminal each), alternating."""
    base = f"{millpond.url}/notebook/default/{name}"
    names = []
    for _ in range(2):
        status, text = http(f"{base}/api/terminals", "POST")
        assert status == 200, text
        names.append(json.loads(text)["name"])
    port, token = millpond.direct(name)
    proxied = terminal(base.replace("http://", "ws://") + f"/terminals/websocket/{names[0]}", [])
    direct = terminal(f"ws://127.0.0.1:{port}/notebook/default/{name}/terminals/websocket/{names[1]}",
                      [f"Authorization: token {token}"])
    through, straight = [], []
    try:
        for index in range(messages + 20):
            key = "a" if index % 2 == 0 else "\x7f"  # a letter, then erased: the line stays short
            one, two = timed(lambda k=key: echo(proxied, k)), timed(lambda k=key: echo(direct, k))
            if index >= 20:  # the first ones warm both paths
                through.append(one)
                straight.append(two)
    finally:
        proxied.close()
        direct.close()
    return through, straight


def round_trips(millpond: Millpond, name: str, messages: int) -> tuple[list[float], list[float]]:
    """execute 1+1 → execute_reply, over the proxy and directly, alternating: a kernel each (a kernel's iopub
    messages go to every socket open on it: one kernel would send each path the other's too)."""
    base = f"{millpond.url}/notebook/default/{name}"
    kernels = []
    for _ in range(2):
        status, text = http(f"{base}/api/kernels", "POST", {"name": "python3"})
        assert status == 201, text
        kernels.append(json.loads(text)["id"])
    port, token = millpond.direct(name)
    proxied = websocket.create_connection(base.replace("http://", "ws://") + f"/api/kernels/{kernels[0]}/channels",
                                          timeout=60)
    direct = websocket.create_connection(
        f"ws://127.0.0.1:{port}/notebook/default/{name}/api/kernels/{kernels[1]}/channels", timeout=60,
        header=[f"Authorization: token {token}"])
    through, straight = [], []
    try:
        for socket_ in (proxied, direct):  # warm both
            for _ in range(20):
                answer(socket_, "1+1", "execute_reply")
        for _ in range(messages):
            through.append(timed(lambda: answer(proxied, "1+1", "execute_reply") and None))
            straight.append(timed(lambda: answer(direct, "1+1", "execute_reply") and None))
    finally:
        proxied.close()
        direct.close()
    return through, straight


def p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def shown(samples: list[float]) -> str:
    return f"{statistics.median(samples):>8.0f} ms  ({min(samples):.0f}–{max(samples):.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds between the server's start and the "
                        "first apply")
    args = parser.parse_args()
    cold, warm, restart, hand = [], [], [], []
    through: list[float] = []
    straight: list[float] = []
    echo_through: list[float] = []
    echo_straight: list[float] = []
    with tempfile.TemporaryDirectory(prefix="notebooks-bench-", ignore_cleanup_errors=True) as top:
        by_hand(Path(top))  # the first start reads the installed files from disk: not counted for either side
        for run in range(args.runs):
            folder = Path(top) / f"run-{run}"
            folder.mkdir()
            hand.append(by_hand(folder))
            millpond = Millpond(folder, args.settle)
            try:
                cold.append(millpond.apply_to_answer("first"))
                warm.append(millpond.apply_to_answer("second"))
                restart.append(millpond.restart_to_answer("first"))
                if run == args.runs - 1:
                    through, straight = round_trips(millpond, "second", args.messages)
                    echo_through, echo_straight = echo_trips(millpond, "second", args.messages)
            finally:
                millpond.close()
    peer = statistics.median(hand)
    print(f"time to a kernel's 1+1, median of {args.runs} (min–max); the first apply {args.settle:g} s after "
          "the server answered")
    print(f"{'':44}{'time':>10}{'':16}{'ratio':>8}")
    print(f"{'jupyter lab by hand (peer)':44}{shown(hand)}{1:>7.2f}x")
    for label, samples in (("millpond: kubectl apply, cold (first)", cold),
                           ("millpond: kubectl apply, warm (second)", warm),
                           ("millpond: stopped, then started", restart)):
        print(f"{label:44}{shown(samples)}{statistics.median(samples) / peer:>7.2f}x   (goal ≤ 1.50x)")
    for label, via, plain in (("a terminal's echo of a keystroke", echo_through, echo_straight),
                              ("a kernel's execute 1+1 → execute_reply", through, straight)):
        added = statistics.median(via) - statistics.median(plain)
        print(f"WebSocket round trip, {label}, {len(via)} each, alternating")
        print(f"  direct to Jupyter:  p50 {p(plain, 0.5):.2f} ms  p99 {p(plain, 0.99):.2f} ms")
        print(f"  through the proxy:  p50 {p(via, 0.5):.2f} ms  p99 {p(via, 0.99):.2f} ms")
        print(f"  added by the proxy: p50 {added:.2f} ms  p99 {p(via, 0.99) - p(plain, 0.99):.2f} ms"
              "   (goal: ≤ 1 ms at p50)")


if __name__ == "__main__":
    main()

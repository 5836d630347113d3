"""A real local Ray cluster for tests: one head and two worker "nodes", each a ``ray start`` of its own.

Use it by loading this module as a plugin (tests/conftest.py does) and asking for the fixture::

    def test_x(ray_cluster: RayCluster) -> None:
        ray_cluster.address            # "127.0.0.1:PORT", for ray.init / MILLPOND_RAY_ADDRESS
        ray_cluster.nodes["b"].node_id  # Ray's hex node id of worker node b
        ray_cluster.stop_node("b")      # SIGKILL the node's processes (a lost machine)
        ray_cluster.start_node("b")     # and bring it back (a new node id)

The nodes are ``head`` (custom resource ``node_head``), ``b`` (``node_b``) and ``c`` (``node_c``),
one CPU on each worker and none on the head (as Ray advises for a real cluster: the head's
processes keep their room, and tasks run on the workers), and the smallest object store Ray
accepts. A task pins itself to a node by asking for ``{"node_b": 0.01}``, or by what
only that node has (``SHAPES``): a GPU of type T4 on b (declared to Ray, no device), 6 GiB of
memory on c (2 GiB elsewhere).

Each node is a separate ``ray start --block`` process in a session of its own, with its own
``--temp-dir``, its own ports (found free at start) and its own millpond node folder: its
environment sets ``MILLPOND_NODE_DIR``, which every process Ray starts on that node inherits
(millpond's cluster runner keeps a task's work folder, log and staged files there, never in
the engine's paths). Nothing is shared between the nodes but what a real cluster shares: the
head's address, the token and the S3 server the tests point them at.

Token authentication is on (``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN_PATH`` to a file written
here), as on a real cluster: both variables are set in this process's environment when this
plugin loads (Ray reads them once per process), so drivers in it (the engine under test) and
every process it starts join with the token.

Nodes end by their process group — SIGTERM to ``ray start --block`` (which stops what it
started), then SIGKILL to the group and any Ray process still carrying the node's temp dir —
never ``ray stop``, which would stop every Ray process on the machine (other sessions' too).
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.s3_server import _die_with_parent
from tests.s3_server import _free_ports as free_ports

START_TIMEOUT_S = 90.0
NODE_NAMES = ("head", "b", "c")
OBJECT_STORE_BYTES = 80 * 1024 * 1024  # Ray's minimum is 75 MiB; the tests move only small results
NODE_DIR_VAR = "MILLPOND_NODE_DIR"
# What sets the workers apart, so a task's ordinary requests place it: only b has a GPU (a T4, as
# Ray would label it: resource "accelerator_type:T4"), only c has 6 GiB of memory (the others 2).
SHAPES: dict[str, dict[str, object]] = {
    "b": {"gpus": 1, "extra": {"accelerator_type:T4": 1.0}},
    "c": {"memory_bytes": 6 * 2**30},
}


def _session_token() -> Path:
    """The session's token file, named in this process's environment before any test imports Ray.

    Ray reads ``RAY_AUTH_MODE`` and the token once per process, when it first loads: set later
    (in the fixture), a driver in this process would join without it and be refused.
    """
    folder = Path(tempfile.mkdtemp(prefix="mpray-token-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "token"
    path.write_text(secrets.token_hex(32))
    path.chmod(0o600)
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(path)
    return path


TOKEN_PATH = _session_token()


def ray_binary() -> str | None:
    beside = Path(sys.executable).parent / "ray"
    return str(beside) if beside.is_file() else shutil.which("ray")


@dataclass
class RayNode:
    """One ``ray start`` of the cluster and what a test may ask of it."""

    name: str
    resource: str  # the custom resource only this node has ("node_b")
    node_dir: Path  # MILLPOND_NODE_DIR of every process on this node
    temp_dir: Path
    cpus: int
    gpus: int = 0  # declared to Ray only (no device): a task asking for one is placed here
    memory_bytes: int = 2 * 2**30  # declared to Ray (its scheduling unit), not a limit on the processes
    extra: dict[str, float] = field(default_factory=dict)  # more custom resources ("accelerator_type:T4")
    node_id: str = ""  # Ray's hex id; a restarted node gets a new one
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class RayCluster:
    address: str  # host:port of the head's GCS
    token_path: Path
    nodes: dict[str, RayNode]
    log_dir: Path
    _ray: str = field(repr=False, default="ray")

    def env(self) -> dict[str, str]:
        """What a driver (or a `millpond` process) needs to join the cluster."""
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(self.token_path)}

    # --- nodes --------------------------------------------------------------------------
    def start_node(self, name: str) -> RayNode:
        """Start node ``name`` (again: a restarted node joins with a new node id) and wait until it joined."""
        return self._start(name)[0]

    def _start(self, *names: str) -> list[RayNode]:
        """Launch ``names`` and wait for them to join; a node whose ``ray start`` exits (a port taken
        meanwhile, a stale socket of its previous life) is launched once more, with new ports."""
        for attempt in (1, 2):
            before = {str(n["NodeID"]) for n in self._alive_nodes()}
            nodes = [self._launch(name) for name in names if not self.nodes[name].alive]
            previous = {node.name: node.node_id for node in nodes}
            try:
                self._wait_for_new_nodes(nodes, before)
                break
            except RuntimeError:
                if attempt == 2:
                    raise
                for node in nodes:
                    if node.node_id == previous[node.name]:  # it did not join: end what is left of it
                        _kill_node(node, grace_s=0.0)
        return [self.nodes[name] for name in names]

    def _launch(self, name: str) -> RayNode:
        node = self.nodes[name]
        node.temp_dir.mkdir(parents=True, exist_ok=True)
        node.node_dir.mkdir(parents=True, exist_ok=True)
        # Ray's per-node ports: each local node needs its own, or the second one fails to bind.
        nm, om, agent_grpc, agent_http, metrics, runtime_env, worker_lo, dashboard = free_ports(8)
        argv = [
            self._ray, "start", "--block", "--disable-usage-stats",
            f"--num-cpus={node.cpus}", f"--num-gpus={node.gpus}", f"--memory={node.memory_bytes}",
            f"--resources={json.dumps({node.resource: 1, **node.extra})}",
            f"--object-store-memory={OBJECT_STORE_BYTES}",
            f"--temp-dir={node.temp_dir}",
            "--node-ip-address=127.0.0.1",
            f"--node-manager-port={nm}", f"--object-manager-port={om}",
            f"--dashboard-agent-grpc-port={agent_grpc}", f"--dashboard-agent-listen-port={agent_http}",
            f"--metrics-export-port={metrics}", f"--runtime-env-agent-port={runtime_env}",
            f"--min-worker-port={worker_lo}", f"--max-worker-port={worker_lo + 40}",
        ]
        if name == "head":
            # Ray 2.60 still starts its dashboard process (for the job API) without the UI: on its own port,
            # so two clusters on one machine (two test sessions) do not both want 8265
            argv += [f"--port={self.address.rsplit(':', 1)[1]}", "--head", "--include-dashboard=false",
                     f"--dashboard-port={dashboard}"]
        else:
            argv += [f"--address={self.address}"]
        env = {
            **os.environ, **self.env(), NODE_DIR_VAR: str(node.node_dir),
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_task_retry_delay_ms": "0",
            # millpond's guardian (a child of the worker, in a session of its own) must outlive a dying
            # worker to stop the task's processes; Ray would SIGKILL it first (see README, Cluster mode)
            "RAY_kill_child_processes_on_worker_exit": "false",
        }
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - the process keeps it
        node.process = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - a test process killed -9 leaves no `ray start`
        )
        log.close()
        return node

    def stop_node(self, name: str) -> None:
        """End node ``name`` at once, as a machine that is lost (SIGKILL to every process of the node)."""
        node = self.nodes[name]
        _kill_node(node, grace_s=0.0)

    def _wait_for_new_nodes(self, nodes: list[RayNode], before: set[str]) -> None:
        """Wait until each of ``nodes`` is a live node of the cluster (a new node id), and note its id."""
        deadline = time.monotonic() + START_TIMEOUT_S
        waiting = list(nodes)
        while waiting and time.monotonic() < deadline:
            if any(not node.alive for node in waiting):
                break
            for entry in self._alive_nodes():
                for node in list(waiting):
                    resources = entry.get("Resources")
                    if entry["NodeID"] not in before and isinstance(resources, dict) and node.resource in resources:
                        node.node_id = str(entry["NodeID"])
                        waiting.remove(node)
            if waiting:
                time.sleep(0.3)
        if waiting:
            node = waiting[0]
            log = (self.log_dir / f"{node.name}.log").read_text(errors="replace")[-3000:]
            why = "exited" if not node.alive else f"did not join within {START_TIMEOUT_S:.0f} s"
            raise RuntimeError(f"ray node {node.name} {why}:\n{log}")

    def _alive_nodes(self) -> list[dict[str, object]]:
        """The cluster's live nodes, asked of the GCS through a short-lived driver process."""
        if not self.nodes["head"].alive:
            return []
        code = (
            "import json, ray; ray.init(address=%r, logging_level='ERROR', log_to_driver=False); "
            "print(json.dumps([n for n in ray.nodes() if n['Alive']]))" % self.address
        )
        try:
            done = subprocess.run(
                [sys.executable, "-c", code], env={**os.environ, **self.env()}, capture_output=True, text=True,
                timeout=30,
            )
        except subprocess.TimeoutExpired:  # a busy machine, a GCS still settling a lost node: ask again
            return []
        if done.returncode != 0:
            return []
        return list(json.loads(done.stdout.strip().splitlines()[-1]))

    def close(self) -> None:
        """Stop every node, and remove their temp dirs (Ray's sessions, sockets and logs)."""
        for name in reversed(NODE_NAMES):
            _kill_node(self.nodes[name], grace_s=5.0)
        shutil.rmtree(self.nodes["head"].temp_dir.parent, ignore_errors=True)


def _node_processes(node: RayNode) -> list[int]:
    """Every process of this "machine": whose command line names the node's temp dir (Ray's raylet,
    workers, agents) or whose environment names its MILLPOND_NODE_DIR (whatever its tasks started)."""
    marker = str(node.temp_dir).encode()
    variable = f"{NODE_DIR_VAR}={node.node_dir}\0".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker in f.read():
                    found.append(int(entry))
                    continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                if variable in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _kill_node(node: RayNode, grace_s: float) -> None:
    """Stop the node's ``ray start`` (its group), then SIGKILL whatever of that node is left."""
    process = node.process
    if process is not None and process.poll() is None:
        if grace_s:
            process.terminate()  # ray start --block stops the processes it started
            try:
                process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    # Ray's workers and agents can sit in sessions of their own: find them by the node's temp dir.
    for _ in range(3):
        pids = _node_processes(node)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    node.process = None


def start_cluster(root: Path, attempts: int = 2) -> RayCluster:
    """Start the head and both workers under ``root``; on failure stop what started and try again once
    with new ports (a port found free can be taken by another process before Ray binds it), then raise."""
    for attempt in range(1, attempts + 1):
        try:
            return _start_cluster(root / f"attempt-{attempt}")
        except RuntimeError:
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


def _start_cluster(root: Path) -> RayCluster:
    binary = ray_binary()
    if binary is None:
        raise RuntimeError("ray is not installed: pip install 'millpond[ray]'")
    token_path = TOKEN_PATH
    log_dir = root / "logs"
    log_dir.mkdir(parents=True)
    # Ray puts its session under --temp-dir and its unix sockets there: keep the path short (107-byte limit).
    short = Path(tempfile.mkdtemp(prefix="mpray-"))
    nodes = {
        name: RayNode(
            name=name, resource=f"node_{name}", node_dir=root / "nodes" / name, temp_dir=short / name,
            cpus=0 if name == "head" else 1, **SHAPES.get(name, {}),  # type: ignore[arg-type]
        )
        for name in NODE_NAMES
    }
    (gcs_port,) = free_ports(1)
    cluster = RayCluster(
        address=f"127.0.0.1:{gcs_port}", token_path=token_path, nodes=nodes, log_dir=log_dir, _ray=binary
    )
    try:
        cluster.start_node("head")
        cluster._start(*NODE_NAMES[1:])  # the workers join together
    except BaseException:
        cluster.close()
        raise
    return cluster


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    """The session's Ray cluster (about 10-20 s to start on two cores); skips when Ray is not installed."""
    if ray_binary() is None:
        pytest.skip("ray is not installed (pip install 'millpond[ray]')")
    cluster = start_cluster(tmp_path_factory.mktemp("ray-cluster"))
    try:
        yield cluster
    finally:
        cluster.close()

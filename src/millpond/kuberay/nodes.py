"""One Ray node of a RayCluster: a ``ray start --block`` on this machine, started and ended by pid.

Each node is a process of its own session (``start_new_session``: Ray's GCS, raylet, dashboard and
workers are in its group and session), with:

- its own ports, found free on the loopback (GCS, dashboard, metrics, the raylet's, the agents',
  a range for workers), so several clusters and the test suite's cluster share the machine;
- its own ``--temp-dir`` (Ray's session, sockets, logs) under the cluster's short temp root;
- the cluster's auth token (``RAY_AUTH_MODE=token``: Ray 2.60's default, and a driver of another
  user on the machine cannot join), the interpreter's folder first on ``PATH`` (a job's ``python``
  is this Ray's), and the container's ``env``;
- a mark of its own in its environment (``process_groups.MARK_VAR``), which every process Ray
  starts for it inherits, and its supervisor's guardian token: stopping the node ends its group and
  session, then sweeps /proc for the mark (Ray's workers may leave the group); a supervisor killed
  with SIGKILL leaves its guardian to do the same, and the kernel kills ``ray start`` itself
  (``PR_SET_PDEATHSIG``), whose children share its fate.

Never ``ray stop``: it stops every Ray process of the machine, other clusters' too.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from millpond.kuberay.specs import NodeGroup
from millpond.runners.guardian import die_with_parent
from millpond.runners.ports import LOCAL_ADDR, free_ports
from millpond.runners.process_groups import MARK_VAR, marked, stop_groups
from millpond.runners.processes import start_ticks

READY_LINE = b"Ray runtime started"  # what ``ray start`` prints once its node has joined
STOP_GRACE_S = 5.0  # ray start --block stops its processes on SIGTERM; SIGKILL after this
WORKER_PORTS = 40  # the range of ports Ray's worker processes listen on
MIN_OBJECT_STORE = 80 * 2**20  # Ray refuses less than 75 MiB
OBJECT_STORE_SHARE = 0.3  # Ray's default share of the memory it is given (inside a pod: its limit)
_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generated-name alphabet


def ray_binary() -> str | None:
    """``ray`` beside this interpreter (the venv's), else on PATH."""
    beside = Path(sys.executable).parent / "ray"
    return str(beside) if beside.is_file() else shutil.which("ray")


def pod_suffix() -> str:
    """Five characters as Kubernetes generates them for a pod's name."""
    return "".join(secrets.choice(_SUFFIX) for _ in range(5))


@dataclass(frozen=True)
class HeadPorts:
    """The head's ports: what the cluster's endpoints show and every other node and driver joins by."""

    gcs: int
    dashboard: int
    metrics: int
    client: int

    @property
    def gcs_address(self) -> str:
        return f"{LOCAL_ADDR}:{self.gcs}"

    @property
    def dashboard_url(self) -> str:
        return f"http://{LOCAL_ADDR}:{self.dashboard}"


@dataclass
class RayNode:
    """A node started (or to start) for one replica of a group, as the supervisor follows it."""

    name: str  # as KubeRay names the pod: CLUSTER-head-xxxxx, CLUSTER-GROUP-worker-xxxxx
    group: str
    head: bool
    index: int  # its replica's index in its group
    log: Path
    temp_dir: Path
    mark: str = ""
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    ticks: str | None = None
    started_at: float = 0.0  # time.time() of its start
    ready: bool = False
    exit_code: int | None = None
    restarts: int = 0

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def check(self) -> None:
        """Update ``ready`` and ``exit_code`` from what is observed (its log, its process)."""
        if self.process is None:
            return
        code = self.process.poll()
        if code is not None:
            self.exit_code, self.ready = code, False
            return
        if not self.ready:
            try:
                with open(self.log, "rb") as log:
                    self.ready = READY_LINE in log.read()
            except OSError:
                pass


def _object_store(group: NodeGroup) -> int:
    shape = group.shape
    if shape.object_store_bytes:
        return max(shape.object_store_bytes, MIN_OBJECT_STORE)
    return max(int(shape.memory_bytes * OBJECT_STORE_SHARE), MIN_OBJECT_STORE)


def argv(binary: str, group: NodeGroup, node: RayNode, head: HeadPorts, gpus: int) -> list[str]:
    """``ray start --block`` for ``node``, on ports of its own (the head's named by ``head``)."""
    shape = group.shape
    manager, objects, agent_grpc, agent_http, metrics, runtime_env, workers = free_ports(7)
    args = [
        binary, "start", "--block", "--disable-usage-stats",
        f"--num-cpus={shape.num_cpus}", f"--num-gpus={gpus}",
        f"--object-store-memory={_object_store(group)}",
        f"--temp-dir={node.temp_dir}", f"--node-ip-address={LOCAL_ADDR}",
        f"--node-manager-port={manager}", f"--object-manager-port={objects}",
        f"--dashboard-agent-grpc-port={agent_grpc}", f"--dashboard-agent-listen-port={agent_http}",
        f"--runtime-env-agent-port={runtime_env}",
        f"--min-worker-port={workers}", f"--max-worker-port={workers + WORKER_PORTS}",
    ]
    if shape.memory_bytes:
        args.append(f"--memory={shape.memory_bytes}")
    if shape.resources:
        args.append(f"--resources={json.dumps(shape.resources)}")
    if node.head:
        args += [f"--port={head.gcs}", "--head", "--include-dashboard=true", f"--dashboard-host={LOCAL_ADDR}",
                 f"--dashboard-port={head.dashboard}", f"--metrics-export-port={head.metrics}",
                 f"--ray-client-server-port={head.client}"]
    else:
        args += [f"--address={head.gcs_address}", f"--metrics-export-port={metrics}"]
    return args


def environment(group: NodeGroup, token: Path, guardian: dict[str, str], gpu_indices: tuple[int, ...],
                mark: str) -> dict[str, str]:
    """What the node's processes run with: this machine's environment, the container's env, the token,
    the node's mark and the GPUs the ledger granted it."""
    env = {key: value for key, value in os.environ.items() if key != MARK_VAR}
    env.update(dict(group.shape.env))
    env.update(guardian)
    env.update({
        "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token), "RAY_USAGE_STATS_ENABLED": "0",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', os.defpath)}",
        "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpu_indices)), MARK_VAR: mark,
    })
    return env


def start(node: RayNode, args: list[str], env: dict[str, str]) -> None:
    """Start ``node``'s ``ray start --block`` (from the supervisor's main thread: the kernel kills it
    when that thread ends), its output appended to its log."""
    node.temp_dir.mkdir(parents=True, exist_ok=True)
    node.log.parent.mkdir(parents=True, exist_ok=True)
    with open(node.log, "ab") as log:
        node.process = subprocess.Popen(
            args, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=die_with_parent(),  # noqa: PLW1509 - prctl only, resolved before the fork
        )
    node.ticks = start_ticks(node.process.pid)
    node.started_at = time.time()
    node.ready, node.exit_code = False, None


def new_mark() -> str:
    return marked()[MARK_VAR]


def stop(nodes: list[RayNode], grace_s: float = STOP_GRACE_S) -> None:
    """End ``nodes`` by pid: SIGTERM to each group and session, SIGKILL after ``grace_s``, then every
    process still carrying a node's mark; their temp dirs removed."""
    started = [(node.process, node.ticks) for node in nodes if node.process is not None]
    stop_groups(started, grace_s, marks=[node.mark for node in nodes])
    for node in nodes:
        if node.process is not None and node.exit_code is None:
            node.exit_code = node.process.poll()
        node.ready = False
        shutil.rmtree(node.temp_dir, ignore_errors=True)

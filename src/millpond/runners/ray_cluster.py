"""Cluster mode's engine side: join a Ray cluster, and run one ProcessSpec there as a Ray task.

Ray is the whole distributed system; millpond only asks it to run a task's process with the
resources the task requested (``num_cpus``, ``memory``, ``num_gpus``, custom resources such as
``accelerator_type:A100`` or ``node_b``, or a node by id) and streams the process's log back.
The task runs through :mod:`millpond.runners.ray_node` on the node: the task's *workspace*
(an engine folder holding everything the process reads and writes: its work dir, staged
inputs, output folders) travels there as a list of entries (``runners.workspace_copy``) and
back when the process ends, and every engine path in the process description is rewritten
to the node's own folder, so the design holds on machines that share no filesystem. What
must be shared is what the task reaches by itself: the pipeline root (``s3://``), and the
database the engine writes (the engine's own machine only).

Ray's own retries are off (``max_retries=0``): a node lost or a worker killed mid-task ends the
attempt with a :class:`~millpond.runners.base.ProcessResult` whose error names what happened,
and millpond's retry policy decides whether the task runs again (on whichever node Ray picks).
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from millpond.errors import UserError
from millpond.runners.base import Demand, ProcessResult, ProcessSpec
from millpond.runners.ray_carry import carried_copies
from millpond.runners.ray_node import NodeFinished, NodeStarted, NodeTask, run_task
from millpond.runners.workspace_copy import WorkspaceCopyError, copy_of, size, write
from millpond.settings import under_shared_roots

INSTALL_HINT = "cluster mode needs Ray: pip install 'millpond[ray]'"
CONNECT_TIMEOUT_S = 5.0
FORCE_AFTER_S = 15.0  # a cancel the node has not acted on by then kills the Ray worker
MAX_WORKSPACE_BYTES = 512 * 1024 * 1024  # what one task may ship each way through Ray's object store


class ClusterUnavailable(UserError):
    """Cluster mode cannot start: Ray is not installed, or the address does not answer (exit 2, nothing recorded)."""


@dataclass(frozen=True)
class RayResources:
    """What one Ray task asks of the cluster (Ray's own units: CPUs, bytes, GPUs, custom amounts)."""

    num_cpus: float = 1.0
    memory: int = 0  # bytes
    num_gpus: float = 0.0
    resources: dict[str, float] = field(default_factory=dict)  # "accelerator_type:A100", "node_b"
    node_id: str | None = None  # hard affinity to one node (Ray's NodeAffinitySchedulingStrategy)
    soft: bool = False  # the affinity is a preference: another node may run it when that one cannot
    # A bundle of a placement group (ray.util.placement_group) the task runs in: a training job's instance
    placement_group: Any = None
    bundle_index: int = -1

    def options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}
        if self.memory:
            options["memory"] = self.memory
        if self.resources:
            options["resources"] = dict(self.resources)
        if self.node_id:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415 - Ray is optional: cluster mode only

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(self.node_id, soft=self.soft)
        elif self.placement_group is not None:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy  # noqa: PLC0415 - Ray is optional: cluster mode only

            options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                self.placement_group, placement_group_bundle_index=self.bundle_index
            )
        return options


def require_ray() -> None:
    try:
        import ray  # noqa: F401, PLC0415 - cluster mode imports it next anyway
    except ImportError:
        raise ClusterUnavailable(INSTALL_HINT) from None


def _reachable(address: str) -> None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterUnavailable(f"Ray address {address!r} is not HOST:PORT (the head's GCS port, 6379 by default)")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise ClusterUnavailable(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


_lock = threading.Lock()
_connected: str | None = None


def connect(address: str) -> None:
    """Join the cluster at ``address`` as a driver (once per process); one clear error when it cannot.

    The address is checked with a plain TCP connection first (bounded: ``CONNECT_TIMEOUT_S``), as
    ``ray.init`` would retry a dead address for a minute.
    """
    global _connected
    require_ray()
    with _lock:
        if _connected == address:
            return
        _reachable(address)
        if _connected is not None:
            raise ClusterUnavailable(f"this process already uses the Ray cluster at {_connected}, not {address}")
        import ray  # noqa: PLC0415 - Ray is optional: cluster mode only

        saved = _signal_handlers()
        _messages_to_stderr()
        try:
            ray.init(
                address=address, logging_level=logging.ERROR, log_to_driver=False, configure_logging=False,
                ignore_reinit_error=True,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ClusterUnavailable(f"cannot join the Ray cluster at {address}: {exc}") from None
        finally:
            _restore(saved)
        _connected = address


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _messages_to_stderr() -> None:
    """Send what Ray's driver prints about the cluster (``(raylet) The node … has been marked dead``) to
    stderr: a driver prints it on stdout, which is the command's output here (``-o json``)."""
    from ray._private import worker as ray_worker  # noqa: PLC0415 - Ray is optional: cluster mode only

    original = getattr(ray_worker, "print_to_stdstream", None)
    if original is None or getattr(original, "millpond", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        original({**data, "is_err": True}, ignore_prefix)

    to_stderr.millpond = True  # type: ignore[attr-defined]  # a mark on the function: ours, not installed twice
    ray_worker.print_to_stdstream = to_stderr


def _signal_handlers() -> dict[int, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.getsignal(sig) for sig in _STOP_SIGNALS}


def _restore(saved: dict[int, Any]) -> None:
    """Put back the handlers ``ray.init`` replaced: its SIGTERM handler exits at once, where millpond's
    stop handlers cancel the run, stop its tasks and record CANCELED (``runners.stopping``)."""
    for sig, handler in saved.items():
        if handler is not None:
            signal.signal(sig, handler)


@dataclass(frozen=True)
class ClusterNode:
    node_id: str
    address: str
    resources: dict[str, float]  # the node's totals: CPU, memory, GPU, custom resources


def cluster_nodes() -> list[ClusterNode]:
    """The live nodes of the connected cluster and their total resources."""
    import ray  # noqa: PLC0415 - Ray is optional: cluster mode only

    return [
        ClusterNode(node_id=str(n["NodeID"]), address=str(n.get("NodeManagerAddress", "")),
                    resources={k: float(v) for k, v in (n.get("Resources") or {}).items()})
        for n in ray.nodes()  # type: ignore[no-untyped-call]  # ray.nodes has no annotations
        if n.get("Alive")
    ]


def cluster_cpus() -> int:
    """How many CPUs the connected cluster's live nodes have together (the engine's parallelism there)."""
    return int(sum(node.resources.get("CPU", 0.0) for node in cluster_nodes()))


def unmet(request: RayResources, nodes: list[ClusterNode]) -> str | None:
    """Why no live node could ever run ``request`` (its totals fall short), or None when one could."""
    wanted = {"CPU": request.num_cpus, "GPU": request.num_gpus, "memory": float(request.memory), **request.resources}
    wanted = {k: v for k, v in wanted.items() if v}
    for node in nodes:
        if request.node_id and node.node_id != request.node_id and not request.soft:
            continue
        if all(node.resources.get(k, 0.0) >= v for k, v in wanted.items()):
            return None
    asked = ", ".join(f"{k}={_amount(k, v)}" for k, v in wanted.items())
    if request.node_id and not request.soft:
        asked += f" on node {request.node_id}"
    return f"no node of the Ray cluster has {asked} (nodes: {len(nodes)})"


def _amount(key: str, value: float) -> str:
    if key == "memory":
        return f"{value / 2**20:.0f}Mi"
    return f"{value:g}"


_remote: Any = None


def _remote_task() -> Any:
    global _remote
    if _remote is None:
        import ray  # noqa: PLC0415 - Ray is optional: cluster mode only

        # Ray's retries off: a lost node is an attempt millpond's retry policy judges.
        _remote = ray.remote(max_retries=0, retry_exceptions=False, num_returns="streaming")(run_task)
    return _remote


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def run_on_cluster(
    spec: ProcessSpec, cancel: threading.Event, resources: RayResources, workspace: Path,
    shared_roots: tuple[str, ...] = (),
) -> ProcessResult:
    """Run ``spec`` as a Ray task and wait for it; ``workspace`` holds every engine path it uses, but
    the folders it carries one way (``spec.carried``) and those under ``shared_roots`` (every node's).

    The log streams into ``spec.log_path`` as the node yields it; the workspace comes back with
    what the process wrote. ``spec.on_start`` is told ``None`` (the process's pid is another
    machine's, meaningless here) once the node has started the task.
    """
    import ray  # noqa: PLC0415 - Ray is optional: cluster mode only
    from ray import exceptions as ray_errors  # noqa: PLC0415 - Ray is optional: cluster mode only

    if cancel.is_set():
        return ProcessResult(exit_code=-1, seconds=0.0, error="cancelled before it started")
    workspace = workspace.resolve()
    reached = [workspace, *(folder.resolve() for folder in spec.carried)]
    outside = [
        str(b.source) for b in spec.binds
        if not any(_within(b.source.resolve(), folder) for folder in reached)
        and not under_shared_roots(b.source, shared_roots)
    ]
    if not _within(spec.cwd.resolve(), workspace) or outside:
        where = ", ".join(outside) or str(spec.cwd)
        return ProcessResult(
            exit_code=-1, seconds=0.0,
            error=f"cannot run on a Ray node: {where} is a folder of the engine's machine only",
        )
    if spec.datasets and spec.mounter is None:
        return ProcessResult(exit_code=-1, seconds=0.0, error="cannot run on a Ray node: its datasets have no mounter")
    files = copy_of(workspace)
    carried = carried_copies(spec.carried)
    carries = size(files) + sum(size(copy) for _, copy in carried)
    if carries > MAX_WORKSPACE_BYTES:
        return ProcessResult(
            exit_code=-1, seconds=0.0,
            error=f"the task's staged files ({carries / 2**20:.0f} MiB) exceed the "
                  f"{MAX_WORKSPACE_BYTES / 2**20:.0f} MiB a Ray task carries",
        )
    task = NodeTask(
        argv=list(spec.argv), env=dict(spec.env), cwd=str(spec.cwd.resolve()),
        binds=[(str(b.source.resolve()), b.target, b.read_only) for b in spec.binds],
        timeout_s=spec.timeout_s, workspace=str(workspace), files=files,
        python_bin=str(Path(sys.executable).parent), fetch=[(uri, str(path)) for uri, path in spec.fetch],
        datasets=list(spec.datasets), mounter=spec.mounter, carried=carried, packages=spec.packages,
        python_task=spec.python_task,
    )
    started = time.monotonic()
    spec.log_path.parent.mkdir(parents=True, exist_ok=True)
    generator = _remote_task().options(**resources.options()).remote(task)
    where = "a Ray node"
    stopped = threading.Event()

    def watch() -> None:  # cancel arrives on another thread; the generator's next() blocks
        while not stopped.wait(0.1):
            if cancel.is_set():
                ray.cancel(generator)  # the node stops the task's process group (ray_node)
                if not stopped.wait(FORCE_AFTER_S):
                    ray.cancel(generator, force=True)  # the worker dies, and its children with it
                return

    watcher = threading.Thread(target=watch, name="millpond-ray-cancel", daemon=True)
    watcher.start()
    finished: NodeFinished | None = None
    try:
        with open(spec.log_path, "ab", buffering=0) as log:
            for ref in generator:
                item = ray.get(ref)
                if isinstance(item, NodeStarted):
                    where = f"Ray node {item.node_id[:12]} ({item.host})"
                    log.write(f"[millpond] running on {where}\n".encode())  # the task's log says where it ran
                    if spec.on_start is not None:
                        spec.on_start(None)  # a remote pid means nothing here
                elif isinstance(item, bytes):
                    log.write(item)
                elif isinstance(item, NodeFinished):
                    log.write(item.log)
                    finished = item
    except ray_errors.TaskCancelledError:
        return ProcessResult(exit_code=-1, seconds=time.monotonic() - started, error="cancelled")
    except (ray_errors.NodeDiedError, ray_errors.WorkerCrashedError, ray_errors.ObjectLostError,
            ray_errors.OwnerDiedError) as exc:
        if cancel.is_set():
            return ProcessResult(exit_code=-1, seconds=time.monotonic() - started, error="cancelled")
        kind = "was lost" if isinstance(exc, ray_errors.NodeDiedError) else "died"
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        return ProcessResult(
            exit_code=-1, seconds=time.monotonic() - started,
            error=f"{where} running the task {kind} ({type(exc).__name__}: {first})",
        )
    except ray_errors.RayError as exc:
        if cancel.is_set():
            return ProcessResult(exit_code=-1, seconds=time.monotonic() - started, error="cancelled")
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        return ProcessResult(
            exit_code=-1, seconds=time.monotonic() - started, error=f"{where} failed the task: {first}"
        )
    finally:
        stopped.set()
        watcher.join()
    if finished is None:
        error = "cancelled" if cancel.is_set() else f"{where} ended the task without saying how"
        return ProcessResult(exit_code=-1, seconds=time.monotonic() - started, error=error)
    try:
        write(finished.files, workspace)  # what the process changed; none when the node could not prepare the task
    except (WorkspaceCopyError, OSError) as exc:
        return ProcessResult(
            exit_code=-1, seconds=finished.seconds, error=f"{where} sent back a workspace that cannot be written: {exc}"
        )
    return ProcessResult(exit_code=finished.exit_code, seconds=finished.seconds, error=finished.error)



GPU_KINDS = ("nvidia.com/gpu", "amd.com/gpu")
ACCELERATOR_SHARE = 0.001  # what Ray's own accelerator_type option asks of "accelerator_type:X"


def ray_resources(demand: Demand) -> RayResources:
    """A task's requests in Ray's terms: CPUs (Ray's default of 1 when none is asked), memory in
    bytes, GPUs, and an accelerator kind other than the generic GPU names as ``accelerator_type:KIND``
    (the resource Ray's nodes advertise for their GPU model, e.g. ``accelerator_type:A100``)."""
    extra: dict[str, float] = {}
    if demand.gpus and demand.accelerator and demand.accelerator not in GPU_KINDS:
        extra[f"accelerator_type:{demand.accelerator}"] = ACCELERATOR_SHARE
    return RayResources(
        num_cpus=demand.cpus or 1.0, memory=demand.memory_bytes, num_gpus=float(demand.gpus), resources=extra,
        node_id=demand.prefer_node, soft=demand.prefer_node is not None,  # placement follows the data, softly
    )


class RayRunner:
    """The Runner of cluster mode: each task's process runs as a Ray task on the cluster at ``address``."""

    fetches_inputs = True  # the node downloads a task's remote inputs from the pipeline root itself
    mounts_datasets = True  # the node mounts a task's datasets through its own cache (ProcessSpec.datasets)
    installs_packages = True  # the node builds a task's packages_to_install venv itself (ProcessSpec.packages)

    def __init__(self, address: str, shared_roots: tuple[str, ...] = (), fork_server: bool = True) -> None:
        self.address = address
        self.shared_roots = shared_roots  # folders every node sees at the same path (MILLPOND_SHARED_ROOTS)
        self.fork_server = fork_server  # False (MILLPOND_FORK_SERVER=0): every task starts its own process there too
        connect(address)

    def run(self, spec: ProcessSpec, cancel: threading.Event) -> ProcessResult:
        workspace = spec.workspace
        if workspace is None:
            return ProcessResult(exit_code=-1, seconds=0.0, error="cannot run on a Ray node: the task has no workspace")
        if not self.fork_server:
            spec = dataclasses.replace(spec, python_task=None)
        return run_on_cluster(spec, cancel, ray_resources(spec.demand), workspace, self.shared_roots)

    def close(self) -> None:
        pass  # the driver's connection serves every run of this process

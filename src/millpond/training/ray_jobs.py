"""A training job's instances on a Ray cluster: a placement group, and each instance a Ray task.

Cluster mode for training (``arena submit pytorch --ray HOST:PORT``, or ``MILLPOND_RAY_ADDRESS``)
changes only where instances run. The job, its statuses, retries and events stay the
supervisor's, on the machine that submitted it; this module is the instance starter it uses
in place of ``instances.start``/``stop``:

* the job's instances are one Ray placement group, a bundle per instance holding what the
  instance asks for (``CPU``, ``memory``, ``GPU``). The strategy is Ray's: ``PACK`` (the
  default) puts them on one node when they fit and spreads them over several when they do not,
  ``STRICT_SPREAD`` puts each on a node of its own. The job waits QUEUING until Ray has placed
  every bundle — the cluster is the ledger here, not this machine's;
* ``MASTER_ADDR`` is the address of the node holding the master's bundle and ``MASTER_PORT`` a
  port found free on that node (by a zero-CPU Ray task pinned there), as the PyTorchJob
  operator points every pod at the master's service;
* each instance runs through ``runners.ray_cluster.run_on_cluster`` in its bundle: its working
  folder (a copy of ``--working-dir``) is shipped to the node, its log streams back into the
  instance's log (each line stamped with the time it arrived, as local instances' are);
* stopping an instance ends its processes on its node first — a zero-CPU Ray task there
  SIGTERMs every process carrying the instance's mark (``MILLPOND_INSTANCE_MARK`` in its
  environment), SIGKILLs what is left after a grace period — then force-cancels its Ray task.
  Cancelling alone is not enough: Ray kills the worker and its direct children, but what the
  instance's shell started (``sh -c LINE``'s python) would live on, orphaned. A lost node
  ends the instance with an error naming the node, which fails the attempt (``--retry`` decides);
* the placement group is removed when the job ends (and by Ray when the supervisor dies, as it
  owns it), so nothing of the job outlives it on the cluster.

``--data`` datasets are mounted on each instance's node through that node's own cache
(``datasets.node_mounts``: the ProcessSpec names them, the node mounts them before the process
starts and lets go when it ends). What needs this machine's filesystem is refused at submit (one
line): ``--data-dir`` host folders.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from millpond.datasets.config import load_config
from millpond.datasets.node_mounts import mount_all
from millpond.errors import TaskFailure, UserError
from millpond.runners.base import DatasetBind, ProcessResult, ProcessSpec
from millpond.runners.environment import inherited_environment
from millpond.runners.ray_cluster import RayResources, cluster_nodes, connect, run_on_cluster, unmet
from millpond.scheduling import pod_room
from millpond.training.instances import LOG_DRAIN_S, Running, stamp_now
from millpond.training.planned import Planned
from millpond.training.spec import JobSpec, Trainer

READY_POLL_S = 1.0
PUMP_POLL_S = 0.2
STOP_WAIT_S = 20.0  # how long stopping waits for a cancelled Ray task to say it ended
NODE_WATCH_S = 2.0  # how often the supervisor asks the cluster whether its instances' nodes live
STOP_GRACE_S = 5.0  # SIGTERM, then this long, then SIGKILL (as a local instance's stop)
MARK_VAR = "MILLPOND_INSTANCE_MARK"
MASTER_VARS = ("MASTER_ADDR", "PET_MASTER_ADDR")
PORT_VARS = ("MASTER_PORT", "PET_MASTER_PORT")


def bundle(request_cpu_millis: int, memory_bytes: int, gpus: int) -> dict[str, float]:
    """One instance's bundle in Ray's units: its CPUs (1 when it asks for none, Ray's task default),
    memory in bytes and GPUs, the zero amounts left out (Ray refuses a bundle of zeros)."""
    shape = {"CPU": request_cpu_millis / 1000 if request_cpu_millis else 1.0}
    if memory_bytes:
        shape["memory"] = float(memory_bytes)
    if gpus:
        shape["GPU"] = float(gpus)
    return shape


def bundles(spec: JobSpec) -> list[dict[str, float]]:
    """A bundle per instance, in the instances' order (the master's first)."""
    return [bundle(r.resources.cpu_millis, r.resources.memory_bytes, r.resources.gpus) for r, _ in spec.instances()]


def _as_request(shape: dict[str, float]) -> RayResources:
    return RayResources(num_cpus=shape["CPU"], memory=int(shape.get("memory", 0)), num_gpus=shape.get("GPU", 0.0))


def check(spec: JobSpec) -> None:
    """Refuse at submit what cannot run on the cluster (one line each): Ray missing, the address
    not answering, a trainer or flag that needs this machine, an instance no node could hold."""
    if spec.trainer is not Trainer.PYTORCH:
        raise UserError(f"{spec.trainer.value} jobs run on this machine only; on a Ray cluster, pytorch jobs run")
    if spec.data_dirs:
        raise UserError("--data-dir binds a folder of this machine: a job on a Ray cluster cannot use it")
    if spec.working_dir and not Path(spec.working_dir).is_dir():
        raise UserError(f"--working-dir {spec.working_dir} is not a folder on this machine "
                        "(it is copied to the nodes)")
    connect(spec.ray_address)
    nodes = cluster_nodes()
    too_many = pod_room.too_many(spec.instance_count, spec.instance_count, nodes=len(nodes))
    if too_many:
        raise UserError(f"the job {spec.name} can never run on the Ray cluster at {spec.ray_address}: {too_many}")
    for shape in {tuple(sorted(s.items())): s for s in bundles(spec)}.values():
        why = unmet(_as_request(shape), nodes)
        if why:
            raise UserError(f"the job {spec.name} can never run on the Ray cluster at {spec.ray_address}: {why}")
    if spec.ray_placement == "STRICT_SPREAD" and len(nodes) < spec.instance_count:
        raise UserError(f"the job {spec.name} can never run on the Ray cluster at {spec.ray_address}: "
                        f"STRICT_SPREAD puts its {spec.instance_count} instances on as many nodes and it has "
                        f"{len(nodes)}")


def _free_port_here() -> int:
    """Runs on the master's node: a TCP port free there now (the master binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def _marked(mark: str) -> list[int]:
    """Runs on a node: the processes there whose environment carries ``MARK_VAR=mark`` (or, for a
    ``mark`` ending in ``/``, any mark it begins: every instance of a job)."""
    needle = f"{MARK_VAR}={mark}".encode()
    whole_job = mark.endswith("/")
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                entries = f.read().split(b"\0")
                if any(e.startswith(needle) if whole_job else e == needle for e in entries):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _end_marked(mark: str, grace_s: float) -> int:
    """Runs on a node: SIGTERM the instance's processes, SIGKILL those left after ``grace_s``; how many."""
    pids = _marked(mark)
    for signum, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        for pid in _marked(mark):
            try:
                os.kill(pid, signum)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait_s
        while _marked(mark) and time.monotonic() < deadline:
            time.sleep(0.1)
    return len(pids)


def end_everywhere(address: str, uid: str) -> int:
    """End job ``uid``'s processes on every live node; how many there were.

    For a job whose supervisor died (``kill -9``): Ray then kills the instances' workers, but
    what an instance's shell started lives on, orphaned, on its node.
    """
    import ray  # noqa: PLC0415 - ray is optional (cluster mode)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415 - ray is optional (cluster mode)

    connect(address)
    ender = ray.remote(num_cpus=0, max_retries=0)(_end_marked)
    refs = [ender.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False))
            .remote(f"{uid}/", STOP_GRACE_S) for node in cluster_nodes()]
    return sum(ray.get(refs, timeout=STOP_GRACE_S + 30))


@dataclass
class _RemoteProcess:
    """An instance running as a Ray task, seen as the supervisor sees a local process: ``poll()``
    and ``returncode``; no pid (the process is another machine's)."""

    pid: None = None
    returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode


def _datasets(spec: JobSpec, namespace: str) -> list[DatasetBind]:
    """The job's ``--data`` datasets, for each instance's node to mount (read-write for a ReadWrite one)."""
    return [
        DatasetBind(data.dataset, namespace, data.path, read_only=load_config(data.dataset, namespace).read_only)
        for data in spec.data
    ]


class Placement:
    """One job's placement group on the cluster, and the instance starter that runs in it."""

    def __init__(self, spec: JobSpec, uid: str, folder: Path, namespace: str = "default") -> None:
        self.spec = spec
        self.datasets = _datasets(spec, namespace)
        self.folder = folder / "ray"  # the instances' workspaces (shipped to the nodes) and raw logs
        self.shapes = bundles(spec)
        self.uid = uid
        self.cancels: dict[str, threading.Event] = {}
        self.started: list[Running] = []
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.watcher: threading.Thread | None = None
        self.where: list[tuple[str, str]] = []  # each bundle's node (id, address), once placed
        connect(spec.ray_address)
        from ray.util.placement_group import placement_group  # noqa: PLC0415 - ray is optional (cluster mode)

        self.group: Any = placement_group(self.shapes, strategy=spec.ray_placement, name=f"millpond-job-{uid}")

    def describe(self) -> str:
        return (f"waiting for the Ray cluster at {self.spec.ray_address} to place {len(self.shapes)} bundles "
                f"({self.spec.ray_placement}: {', '.join(_shape(s) for s in self.shapes)})")

    def wait_ready(self, stopping: threading.Event, waiting: Callable[[str], object]) -> bool:
        """Wait until Ray placed every bundle (``waiting`` told why, once); False when stopped meanwhile."""
        told = False
        while not stopping.is_set():
            if self.group.wait(timeout_seconds=READY_POLL_S):
                return True
            if not told:
                waiting(self.describe())
                told = True
        return False

    def nodes(self) -> list[tuple[str, str]]:
        """Each bundle's node: (Ray's node id, its address), in the instances' order."""
        from ray.util.placement_group import placement_group_table  # noqa: PLC0415 - ray is optional (cluster mode)

        by_id = {node.node_id: node.address for node in cluster_nodes()}
        table = placement_group_table(self.group)
        placed = table.get("bundles_to_node_id") or {}
        return [(str(placed.get(i, "")), by_id.get(str(placed.get(i, "")), "")) for i in range(len(self.shapes))]

    def master_endpoint(self) -> tuple[str, int, list[tuple[str, str]]]:
        """The master's node address and a port free on it; and where every bundle is."""
        import ray  # noqa: PLC0415 - ray is optional (cluster mode)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415 - ray is optional (cluster mode)

        where = self.where = self.nodes()
        node_id, address = where[0]
        if not node_id or not address:
            raise TaskFailure("the Ray cluster placed the job's bundles but does not say on which nodes")
        probe = ray.remote(num_cpus=0, max_retries=0)(_free_port_here).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))
        try:
            port = int(ray.get(probe.remote(), timeout=60))
        except Exception as exc:  # noqa: BLE001 - any Ray failure here is one attempt's failure, said once
            raise TaskFailure(f"cannot find a free port on the master's node {address}: {exc}") from None
        return address, port, where

    def with_master(self, planned: list[Planned], address: str, port: int) -> list[Planned]:
        """The planner's instances pointed at the master's node, GPUs left to Ray (it sets
        ``CUDA_VISIBLE_DEVICES`` on the node for the GPUs of the task's bundle)."""
        changed = []
        for item in planned:
            env = dict(item.env)
            for key in MASTER_VARS:
                env[key] = address
            for key in PORT_VARS:
                env[key] = str(port)
            env.pop("CUDA_VISIBLE_DEVICES", None)
            env.update(dict(self.spec.env))  # the job's own variables still win, as locally
            changed.append(Planned(item.name, item.role, item.index, item.rank, item.argv, env, ()))
        return changed

    # -------------------------------------------------------------- the starter

    def start(self, index: int, item: Planned, log: Path) -> Running:
        """Run ``item`` in bundle ``index`` as a Ray task; returns at once (a thread waits for it)."""
        workspace = self.folder / item.name
        shutil.rmtree(workspace, ignore_errors=True)
        work = workspace / "work"
        if self.spec.working_dir:
            shutil.copytree(self.spec.working_dir, work, symlinks=True)
        work.mkdir(parents=True, exist_ok=True)
        raw = self.folder / f"{item.name}.raw.log"
        raw.unlink(missing_ok=True)
        raw.touch()
        cancel = threading.Event()
        self.cancels[item.name] = cancel
        shape = self.shapes[index]
        resources = RayResources(
            num_cpus=shape["CPU"], memory=int(shape.get("memory", 0)), num_gpus=shape.get("GPU", 0.0),
            placement_group=self.group, bundle_index=index,
        )
        env = {**inherited_environment(), **item.env, MARK_VAR: self._mark(item)}
        spec = ProcessSpec(
            argv=list(item.argv), env=env, cwd=work, log_path=raw,
            datasets=list(self.datasets), mounter=mount_all if self.datasets else None,
        )
        process = _RemoteProcess()
        running = Running(item, process, None, threading.Thread())
        finished = threading.Event()

        def wait() -> None:
            try:
                result = run_on_cluster(spec, cancel, resources, workspace)
            except Exception as exc:  # noqa: BLE001 - a driver-side failure ends this instance, said in the job
                result = ProcessResult(exit_code=-1, seconds=0.0, error=f"{type(exc).__name__}: {exc}")
            finally:
                finished.set()
            with self.lock:
                if process.returncode is not None:  # the node watch already ended it (its node was lost)
                    return
                if result.error and not cancel.is_set():
                    running.failure = f"{item.name}: {result.error}"
                code = result.exit_code
                process.returncode = code if code != 0 or not result.error else -1

        self.started.append(running)
        if self.watcher is None:
            self.watcher = threading.Thread(target=self._watch_nodes, daemon=True, name="ray-node-watch")
            self.watcher.start()
        waiter = threading.Thread(target=wait, daemon=True, name=f"ray-{item.name}")
        pump = threading.Thread(target=_stamp, args=(raw, log, finished), daemon=True, name=f"log-{item.name}")
        running.pump = pump
        running.waiter = waiter
        waiter.start()
        pump.start()
        return running

    def _watch_nodes(self) -> None:
        """End a running instance whose node the cluster marked dead, saying so: Ray's own error for
        the task can come late or not at all (the task's owner waits on a stream from a node gone)."""
        while not self.closed.wait(NODE_WATCH_S):
            try:
                live = {node.node_id for node in cluster_nodes()}
            except Exception:  # noqa: BLE001, S112 - the GCS did not answer this time: ask again
                continue
            with self.lock:
                for item in self.started:
                    index = self.shapes_index(item)
                    node_id, address = self.where[index] if index < len(self.where) else ("", "")
                    if not node_id or node_id in live or item.process.poll() is not None:
                        continue
                    item.failure = f"{item.planned.name}: Ray node {node_id[:12]} ({address}) running it was lost"
                    process = item.process
                    assert isinstance(process, _RemoteProcess)  # what this placement started
                    process.returncode = -1
                    self.cancels[item.planned.name].set()

    def _mark(self, item: Planned) -> str:
        return f"{self.uid}/{item.name}"

    def stop(self, running: list[Running]) -> None:
        """End every instance's processes on its node (SIGTERM, then SIGKILL), cancel its Ray task,
        and wait for them."""
        import ray  # noqa: PLC0415 - ray is optional (cluster mode)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415 - ray is optional (cluster mode)

        alive = [item for item in running if item.process.poll() is None]
        ender = ray.remote(num_cpus=0, max_retries=0)(_end_marked)
        live = {node.node_id for node in cluster_nodes()} if alive else set()
        sweeps = []
        for item in alive:
            node_id = self.where[self.shapes_index(item)][0] if self.where else ""
            if node_id in live:  # a lost node took the instance's processes with it
                strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
                mark = self._mark(item.planned)
                sweeps.append(ender.options(scheduling_strategy=strategy).remote(mark, STOP_GRACE_S))
        if sweeps:
            try:
                ray.get(sweeps, timeout=STOP_GRACE_S + 30)
            except Exception:  # noqa: BLE001, S110 - a node lost meanwhile took its processes with it
                pass
        for item in alive:
            self.cancels[item.planned.name].set()
        deadline = time.monotonic() + STOP_WAIT_S
        for item in running:
            if item.waiter is not None:
                item.waiter.join(max(0.0, deadline - time.monotonic()))
            item.pump.join(timeout=LOG_DRAIN_S)

    def shapes_index(self, item: Running) -> int:
        """The bundle of a started instance (they start in the planner's order, one bundle each)."""
        return list(self.cancels).index(item.planned.name)

    def remove(self) -> None:
        """Give the placement group back (Ray kills whatever still runs in it)."""
        from ray.util.placement_group import remove_placement_group  # noqa: PLC0415 - ray is optional (cluster mode)

        self.closed.set()
        try:
            remove_placement_group(self.group)
        except Exception:  # noqa: BLE001, S110 - the cluster is gone: nothing of the job is left on it
            pass


def _shape(shape: dict[str, float]) -> str:
    parts = [f"CPU={shape['CPU']:g}"]
    if "memory" in shape:
        parts.append(f"memory={shape['memory'] / 2**20:.0f}Mi")
    if "GPU" in shape:
        parts.append(f"GPU={shape['GPU']:g}")
    return " ".join(parts)


def _stamp(raw: Path, log: Path, finished: threading.Event) -> None:
    """Copy what the node streamed into ``raw`` to the instance's log, a line at a time, each after the
    time it arrived (the format ``arena logs --timestamps`` reads); the rest once the task ended."""
    log.parent.mkdir(parents=True, exist_ok=True)
    pending = b""
    with open(raw, "rb") as source, open(log, "ab", buffering=0) as out:
        while True:
            done = finished.is_set()
            pending += source.read()
            *lines, pending = pending.split(b"\n")
            if done and pending:
                lines.append(pending)
                pending = b""
            if lines:
                stamp = stamp_now()
                out.write(b"".join(stamp + b" " + line + b"\n" for line in lines))
            if done:
                return
            finished.wait(PUMP_POLL_S)


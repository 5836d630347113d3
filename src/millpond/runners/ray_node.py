"""The node side of cluster mode: what a Ray task runs on whichever node Ray placed it.

The engine ships a task's *workspace* — the folder holding its work dir, staged inputs and
output folders, as a list of entries (``runners.workspace_copy``) — and a process description
whose paths name the engine's own folders. Here, on the node, the workspace is written under the node's own folder
(``MILLPOND_NODE_DIR``, else ``$TMPDIR/millpond-node``), every engine path is rewritten to its
node twin (the workspace, and the engine's interpreter folder to this node's), and the process
runs through the same runner as locally (its sandbox, watchdog and guardian): a lightweight
Python task forks from a warm server that this Ray worker keeps for the tasks after it (Ray
reuses a worker for many tasks, so most pay ~2 ms to start, not an interpreter and kfp's
import), anything else starts its own process. Its log
goes to a node-local file that this generator yields in chunks while the process runs; the
last item is the exit, the log's last chunk and what the process changed in the workspace (the
entries the node did not receive as they are), so the engine reads outputs exactly as it does
for a local task. Nothing here assumes the node shares a filesystem with the engine.

A short task is two items (where it runs, how it ended): each item is a report to the engine
and a ``ray.get`` there, which on a 2-core machine cost as much as the node's own work. The
task's copy and log are removed after the last item, by this worker's clean-up thread
(``_janitor``), off the task's critical path; what held secrets (its carried folders) and its
dataset mounts are let go of before the result is sent, as before.

Datasets the process sees (``NodeTask.datasets``) are mounted here, before it starts, by the
``mounter`` the engine gave (``datasets.node_mounts``, pickled by reference: this layer does not
know datasets) with the node's identity and the task's ``MILLPOND_*`` settings in the
environment, so the mount is this node's, through its own cache; it is released when the task ends.

Cancelling is ``ray.cancel`` without force first: Ray raises KeyboardInterrupt here, and the
task's whole process group is stopped as locally (the watchdog: SIGTERM, then SIGKILL) — the
group matters, as a worker killed outright takes only its direct children with it (Ray kills
those; a shell's child would be left). The engine forces the cancel (the worker dies) only
when this does not end the task within a grace period.
"""

from __future__ import annotations

import atexit
import os
import queue
import shutil
import socket
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from millpond.errors import MillpondError
from millpond.runners.base import Bind, DatasetBind, Mounter, Packages, ProcessResult, ProcessSpec
from millpond.runners.pool import PoolRunner
from millpond.runners.ray_carry import remove_carried, unpack_carried
from millpond.runners.ray_venv import put_venv_on_path
from millpond.runners.workspace_copy import Workspace, copy_of, write
from millpond.store import artifacts

NODE_DIR_VAR = "MILLPOND_NODE_DIR"
NODE_ID_VAR = "MILLPOND_RAY_NODE_ID"  # set in each task's environment: Ray's id of the node it runs on
LOG_POLL_S = 0.2
CHUNK_BYTES = 256 * 1024
STOP_GRACE_S = 8.0  # a cancelled task's process group gets SIGTERM, then SIGKILL (the watchdog's grace)


@dataclass
class NodeTask:
    """A ProcessSpec in a form that crosses machines: plain values, engine paths named as strings."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    binds: list[tuple[str, str, bool]]
    timeout_s: float | None
    workspace: str  # the engine's folder that ``files`` copies
    files: Workspace  # that folder's entries
    python_bin: str  # the engine's interpreter folder, replaced by this node's
    fetch: list[tuple[str, str]] = field(default_factory=list)  # (URI, engine path): downloaded here first
    datasets: list[DatasetBind] = field(default_factory=list)  # mounted here, through this node's cache
    mounter: Mounter | None = None  # how (datasets.node_mounts.mount_all, pickled by reference)
    python_task: tuple[str, list[str]] | None = None  # kfp's executor program: may fork from a warm server
    carried: list[tuple[str, Workspace]] = field(default_factory=list)  # (engine folder, its copy): ray_carry
    packages: Packages | None = None  # packages_to_install: this node's cached venv (ray_venv)


@dataclass
class NodeStarted:
    node_id: str
    host: str
    node_dir: str


@dataclass
class NodeFinished:
    exit_code: int
    seconds: float
    error: str | None
    files: Workspace  # the workspace's entries the process made or changed (the rest is as the engine sent it)
    log: bytes = b""  # the log's last chunk, not yielded on its own


def node_dir() -> Path:
    """This node's millpond folder: where task workspaces and logs live while they run."""
    configured = os.environ.get(NODE_DIR_VAR)
    return Path(configured) if configured else Path(tempfile.gettempdir()) / "millpond-node"


def _rewrite(text: str, mapping: list[tuple[str, str]]) -> str:
    for old, new in mapping:
        text = text.replace(old, new)
    return text


def _current_node_id() -> str:
    try:
        import ray  # noqa: PLC0415 - Ray is optional: cluster mode only

        if not ray.is_initialized():  # get_runtime_context() would start a local Ray instance
            return ""
        return str(ray.get_runtime_context().get_node_id())
    except Exception:  # outside a Ray worker (the unit of this module run directly)
        return ""


_runner: PoolRunner | None = None


def _worker_runner() -> PoolRunner:
    """This Ray worker's runner, kept for its later tasks: its fork server stays warm between them
    (it dies with the worker: it watches its parent, and its tasks have the kernel's death signal)."""
    global _runner
    if _runner is None:
        _runner = PoolRunner()
    return _runner


def run_task(task: NodeTask) -> Iterator[NodeStarted | bytes | NodeFinished]:
    """Run ``task`` here: first where it runs, then log chunks as they come, then how it ended."""
    base = node_dir()
    key = uuid.uuid4().hex[:12]
    workspace = base / "tasks" / key
    log_path = base / "logs" / f"{key}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    releases: list[Callable[[], None]] = []  # the task's dataset mounts, let go of when it ends
    try:
        write(task.files, workspace)
        here_bin = str(Path(sys.executable).parent)
        mapping = [(task.workspace.rstrip("/"), str(workspace)), (task.python_bin.rstrip("/"), here_bin)]
        if task.carried:  # its secret, config-map and empty-dir folders: here only while it runs
            carried, made = unpack_carried(task.carried, base, key)
            releases.append(lambda: remove_carried(made))
            mapping = carried + mapping
        binds = []
        for source, target, read_only in task.binds:
            mapped = _rewrite(source, mapping)
            binds.append(Bind(Path(mapped), target, read_only))
        env = {key_: _rewrite(value, mapping) for key_, value in task.env.items()}
        node_id = _current_node_id()
        env[NODE_DIR_VAR] = str(base)  # the task's own node: its folder and Ray's id for it
        if "CUDA_VISIBLE_DEVICES" in os.environ:  # the GPUs Ray gave this task on this node
            env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
        env[NODE_ID_VAR] = node_id
        spec = ProcessSpec(
            argv=[_rewrite(arg, mapping) for arg in task.argv],
            env=env,
            cwd=Path(_rewrite(task.cwd, mapping)),
            log_path=log_path,
            binds=binds,
            timeout_s=task.timeout_s,
            python_task=_rewrite_program(task.python_task, mapping),
        )
        log_path.touch()
        yield NodeStarted(node_id=node_id, host=socket.gethostname(), node_dir=str(base))
        try:
            _fetch(task, mapping)
            spec.binds.extend(_mount(task, node_id, base, f"Ray task {key}", releases))
        except MillpondError as exc:  # the root unreachable, access denied: the attempt fails with this line
            yield NodeFinished(exit_code=-1, seconds=0.0, error=str(exc), files=[])
            return
        outcome: list[ProcessResult] = []
        cancel = threading.Event()  # set when Ray delivers a cancel (KeyboardInterrupt, below)

        def run() -> None:
            try:
                put_venv_on_path(task.packages, spec, base, cancel)  # packages_to_install: this node's venv
            except MillpondError as exc:  # the install failed or was cancelled: the attempt fails with it
                outcome.append(ProcessResult(exit_code=-1, seconds=0.0, error=str(exc)))
                return
            outcome.append(_worker_runner().run(spec, cancel))

        thread = threading.Thread(target=run, name="millpond-node-task", daemon=True)
        thread.start()
        with open(log_path, "rb") as log:
            while True:
                try:
                    thread.join(LOG_POLL_S)
                except KeyboardInterrupt:  # ray.cancel without force: stop the task's whole group, then end
                    cancel.set()
                    thread.join(STOP_GRACE_S)
                    raise
                ended = not thread.is_alive()
                chunk = log.read(CHUNK_BYTES)
                while chunk and not ended:
                    yield chunk
                    chunk = log.read(CHUNK_BYTES)
                if ended:
                    while len(chunk) == CHUNK_BYTES and (more := log.read(CHUNK_BYTES)):
                        yield chunk
                        chunk = more
                    break
        result = outcome[0] if outcome else ProcessResult(exit_code=-1, seconds=0.0, error="the node's runner failed")
        sent = set(task.files)
        finished = NodeFinished(
            exit_code=result.exit_code, seconds=result.seconds, error=result.error,
            files=[entry for entry in copy_of(workspace) if entry not in sent], log=chunk,
        )
        # What held secrets and the dataset mounts go before the engine holds the result; a
        # consumer need not drain the generator for the ``finally`` to run.
        _release(task, base, releases)
        yield finished
    finally:
        _release(task, base, releases)
        _janitor.remove(workspace, log_path)  # the task's copy and log: after the result is on its way


def _rewrite_program(
    program: tuple[str, list[str]] | None, mapping: list[tuple[str, str]]
) -> tuple[str, list[str]] | None:
    """kfp's executor program with the engine's paths in its arguments (the executor input) made this node's."""
    if program is None:
        return None
    source, args = program
    return source, [_rewrite(arg, mapping) for arg in args]


def _release(task: NodeTask, base: Path, releases: list[Callable[[], None]]) -> None:
    """Let go of the task's dataset mounts and remove its carried folders here; a second call does nothing."""
    while releases:
        release = releases.pop(0)
        with _task_environment(task, node_id=_current_node_id(), base=base):
            release()


class _Janitor:
    """This worker's clean-up thread: removes a finished task's copy and log after its result is sent.

    Removing a task's folder cost 2-3 ms a task on a loaded 2-core node, all of it between the
    process's end and the result reaching the engine. Done here, the Ray task ends as soon as
    the result is reported, and the folder goes while the worker runs the next one. What is
    still queued when the worker exits normally is removed then (``atexit``); a worker killed
    outright leaves its task's folder, as a worker killed mid-task always did.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Path, Path]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def remove(self, workspace: Path, log_path: Path) -> None:
        self._queue.put((workspace, log_path))
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="millpond-node-clean-up", daemon=True)
                self._thread.start()
                atexit.register(self.drain)

    def _run(self) -> None:
        while True:
            _remove(*self._queue.get())

    def drain(self) -> None:
        while True:
            try:
                _remove(*self._queue.get_nowait())
            except queue.Empty:
                return


def _remove(workspace: Path, log_path: Path) -> None:
    shutil.rmtree(workspace, ignore_errors=True)
    log_path.unlink(missing_ok=True)


_janitor = _Janitor()


CREDENTIAL_PREFIXES = ("AWS_", "GOOGLE_APPLICATION_CREDENTIALS")
SETTINGS_PREFIX = "MILLPOND_"


@contextmanager
def _task_environment(task: NodeTask, **node: str | Path) -> Iterator[None]:
    """This worker's environment with the task's object-store credentials (its AWS_* variables) and,
    given ``node_id`` and ``base``, the node's identity and its millpond settings (MILLPOND_*: the
    home and database the dataset's manifest is read from), for what the node does for the task."""
    values = {k: v for k, v in task.env.items() if k.startswith(CREDENTIAL_PREFIXES)}
    if node:
        values.update({k: v for k, v in task.env.items() if k.startswith(SETTINGS_PREFIX)})
        values.update({NODE_DIR_VAR: str(node["base"]), NODE_ID_VAR: str(node["node_id"])})
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)  # a Ray worker runs one task at a time: nothing else reads them meanwhile
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _fetch(task: NodeTask, mapping: list[tuple[str, str]]) -> None:
    """Download the task's remote inputs from the pipeline root into its workspace, here on the node,
    with the object-store credentials the task itself is given."""
    if not task.fetch:
        return

    with _task_environment(task):
        for uri, path in task.fetch:
            artifacts.filesystem(uri).clear_instance_cache()  # one made with other credentials must not serve
            artifacts.download(uri, Path(_rewrite(path, mapping)))


def _mount(task: NodeTask, node_id: str, base: Path, user: str, releases: list[Callable[[], None]]) -> list[Bind]:
    """Mount the task's datasets here, through this node's cache (the mounts, their records and leases
    under ``base``); the binds that show them in the task's sandbox. How to let go goes on ``releases``."""
    if not task.datasets:
        return []
    if task.mounter is None:
        raise MillpondError("the task's datasets came without a mounter")
    with _task_environment(task, node_id=node_id, base=base):
        binds, release = task.mounter(list(task.datasets), user)
    releases.append(release)
    return binds


def node_identity() -> dict[str, Any]:
    """Who runs this (for tests and ``arena top node``): Ray's node id, the host, the node folder."""
    return {"node_id": _current_node_id(), "host": socket.gethostname(), "node_dir": str(node_dir())}

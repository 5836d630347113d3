"""One replica of one revision: a model server (or a custom container) as a process of the supervisor.

A replica is started in a session of its own (it leads its process group, so stopping it ends
whatever it started), with ``PR_SET_PDEATHSIG`` and the supervisor's guardian
(``runners.guardian``): when the supervisor ends, however it ends (``kill -9`` too), the kernel
kills the replica and the guardian SIGKILLs its group and every process stamped with the
supervisor's token, so no replica outlives its supervisor.

Its output goes through a pipe to a thread that writes each line to the replica's log
(``endpoints.replica_log``) after the time it was read, as a training instance's log is written.
That thread also reads two lines: millpond's model server announces itself with its ready line
(``model_server.parse_ready_line``: the URL it answers at) and says why it cannot load with one
``error:`` line. A custom container is ready once its port answers HTTP (KServe's readiness
probe), whatever the status code.

A custom container that runs in its image (``serving.placement``) is the runtime's ``run``
(``runners.in_image``): its client is the process watched here, its output the container's; after
it ends (or is stopped) the container is removed, and an OOM kill is said as ``OOMKilled``.

Restarts follow Kubernetes' CrashLoopBackOff: 1 s after the first exit, doubling up to 30 s, back
to 1 s once a replica has answered for ``BACKOFF_RESET_S``.
"""

from __future__ import annotations

import http.client
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from millpond.runners import isolation
from millpond.runners.background import now_iso
from millpond.runners.base import Bind, InImage, ProcessSpec
from millpond.runners.guardian import die_with_parent, guardian
from millpond.runners.in_image import Started, container_command, finish
from millpond.runners.process_groups import stamp_now, stop_groups
from millpond.runners.processes import start_ticks
from millpond.runners.sandbox import SandboxUnavailable, wrap
from millpond.serving import with_data
from millpond.serving.model_server import parse_ready_line
from millpond.serving.placement import working_folder

BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 30.0
BACKOFF_RESET_S = 60.0  # answering this long wipes the backoff, as the kubelet's resets after a while
STOP_GRACE_S = 5.0  # SIGTERM, then this long, then SIGKILL (a pod's grace period, shortened)
PROBE_TIMEOUT_S = 0.5
ERROR_PREFIX = "error: "


@dataclass
class Launch:
    """How a replica is started: its command, its variables (beyond this process's), its folder, and
    the port a custom container is told (``PORT``) and probed at (0: a model server, which names its own)."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    port: int = 0
    image: InImage | None = None  # run in this image (the runtime's ``run``), not on this host
    binds: list[Bind] = field(default_factory=list)  # what the container sees beyond its own folders
    working_dir: str | None = None  # the container's ``workingDir`` in its image (``cwd`` is then the client's)
    own: tuple[Path, ...] = ()  # multi-user, on this host: its own folders (work, model) shown in its sandbox


@dataclass
class Replica:
    """One replica: its process now (None between restarts), what its output said, and its restarts."""

    revision: str
    index: int
    log: Path
    process: subprocess.Popen[bytes] | None = None
    ticks: str | None = None
    pump: threading.Thread | None = None
    port: int = 0
    url: str | None = None  # set once it answers (the ready line, or the port answering)
    announced: str | None = None  # the URL its ready line named (set by the pump thread)
    error: str | None = None  # the last ``error:`` line it printed (set by the pump thread)
    last_line: str = ""
    restarts: int = 0
    started_at: float = 0.0
    started_iso: str = ""  # when its process last started (UTC, ISO 8601): its pod's startedAt
    ready_since: float = 0.0
    backoff_s: float = BACKOFF_START_S
    next_start: float = 0.0
    failure: str | None = None  # why its last process ended (or why it cannot start), shown while it is not back
    blocked: str | None = None  # Kubernetes' reason when it cannot even start (CreateContainerConfigError)
    ever_ready: bool = False
    grant: str | None = None  # the ledger grant it holds, kept across its restarts
    gpus: tuple[int, ...] = field(default_factory=tuple)
    gpu_env: dict[str, str] = field(default_factory=lambda: {"CUDA_VISIBLE_DEVICES": ""})  # from its grant
    image: InImage | None = None  # the image its process runs in now, if any
    container: Started | None = None  # that container's run (its name), while it runs

    @property
    def ready(self) -> bool:
        return self.url is not None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, launch: Launch) -> None:
        """Start its process now (OSError when the command cannot be run at all)."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        keeper = guardian()
        env = {**launch.env, **keeper.env()}
        self.url = self.announced = self.error = None
        self.port = launch.port
        argv = launch.argv
        self.image, self.container = launch.image, None
        if launch.image is not None:
            # log_path: only its folder is shown in the container; the replica's own work folder, not the logs'
            spec = ProcessSpec(argv=list(launch.argv), env=launch.env, cwd=launch.cwd, log_path=launch.cwd / "log",
                               binds=list(launch.binds), in_image=launch.image)
            self.container = container_command(spec, keeper.env())
            argv, env = self.container.argv, {**self.container.env, **keeper.env()}
            if launch.working_dir:
                argv = working_folder(argv, launch.working_dir)
        elif isolation.required() and with_data.parse_command(argv) is None:  # with_data confines itself
            try:
                argv = wrap(list(argv), list(launch.binds), launch.cwd, launch.env.get("PATH"), own=launch.own)
            except SandboxUnavailable as exc:  # multi-user mode never runs a namespace's replica on the bare host
                raise OSError(str(exc)) from None
        self.process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True, env=env, cwd=launch.cwd,
            preexec_fn=die_with_parent(),  # noqa: PLW1509 - it only calls prctl, resolved before the fork
        )
        keeper.add(self.process.pid)
        self.ticks = start_ticks(self.process.pid)
        self.started_at = time.monotonic()
        self.started_iso = now_iso()
        assert self.process.stdout is not None
        self.pump = threading.Thread(target=self._copy, args=(self.process.stdout,), daemon=True,
                                     name=f"log-{self.revision}-{self.index}")
        self.pump.start()

    def note(self, line: str) -> None:
        """A line written to its log by the supervisor itself (why it restarts, why it cannot start)."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            out.write(stamp_now() + b" [millpond] " + line.encode() + b"\n")

    def _copy(self, source: IO[bytes]) -> None:
        with open(self.log, "ab", buffering=0) as out:
            for raw in iter(source.readline, b""):
                out.write(stamp_now() + b" " + (raw if raw.endswith(b"\n") else raw + b"\n"))
                line = raw.decode(errors="replace").strip()
                if not line:
                    continue
                self.last_line = line
                ready = parse_ready_line(line)
                if ready is not None:
                    self.announced = ready.url
                elif line.startswith(ERROR_PREFIX):
                    self.error = line[len(ERROR_PREFIX):]

    def check(self, now: float) -> bool:
        """Notice it answering or exiting; True when its readiness changed."""
        process = self.process
        if process is None:
            return False
        code = process.poll()
        if code is not None:
            if self.pump is not None:
                self.pump.join(timeout=2)  # its last lines (the error line) are read before it is judged
            guardian().remove(process.pid)
            reason = self.let_go(code, stopped=code < 0)
            self._ended(code, now, reason)
            return True
        if self.url is not None:
            if now - self.ready_since > BACKOFF_RESET_S:
                self.backoff_s = BACKOFF_START_S
            return False
        url = self.announced if not self.port else (f"http://127.0.0.1:{self.port}" if _answers(self.port) else None)
        if url is None:
            return False
        self.url, self.ready_since, self.ever_ready, self.failure, self.blocked = url, now, True, None, None
        return True

    def let_go(self, code: int, stopped: bool) -> str | None:
        """After its process ended: remove its container (if it ran in one); ``OOMKilled`` when the runtime
        killed it for its memory limit."""
        image, container = self.image, self.container
        self.container = None
        if image is None or container is None:
            return None
        return finish(image, container, code, stopped)

    def _ended(self, code: int, now: float, reason: str | None = None) -> None:
        was = "after it answered" if self.url else "before it answered"
        why = self.error or (self.last_line if code and not self.url else "")
        if reason == "OOMKilled" and self.image is not None:
            why = f"OOMKilled: the container went over its memory limit ({self.image.memory_bytes} bytes)"
        self.failure = f"exited with code {code} {was}" + (f": {why}" if why else "")
        self.process, self.url = None, None
        self.restarts += 1
        self.next_start = now + self.backoff_s
        self.note(f"replica {self.index} {self.failure}; restarting in {self.backoff_s:g}s "
                  f"(restart {self.restarts})")
        self.backoff_s = min(BACKOFF_MAX_S, self.backoff_s * 2)


def stop_all(replicas: list[Replica]) -> None:
    """Stop every replica's process together (SIGTERM, ``STOP_GRACE_S``, SIGKILL) and forget it."""
    started = [(r.process, r.ticks) for r in replicas if r.process is not None]
    stop_groups(started, STOP_GRACE_S)
    keeper = guardian()
    for replica in replicas:
        if replica.process is not None:
            keeper.remove(replica.process.pid)
            replica.let_go(replica.process.returncode if replica.process.returncode is not None else -9,
                           stopped=True)  # its container goes with it, however its client ended
        if replica.pump is not None:
            replica.pump.join(timeout=2)
        replica.process, replica.url = None, None


def _answers(port: int) -> bool:
    """Whether something answers HTTP on the port (any status: KServe's probe asks that the server is up)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=PROBE_TIMEOUT_S)
    try:
        connection.request("GET", "/")
        connection.getresponse().read()
        return True
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()

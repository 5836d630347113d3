"""Starting and stopping one instance: its own process group, in the task sandbox, its output timestamped.

Each instance is started in a new session (so it leads its own process group and a signal to
the group reaches everything it started), inside bubblewrap when the job binds datasets or host
folders (``--die-with-parent``: an instance never outlives its supervisor). Its output goes
through a pipe to a thread of the supervisor that writes each line to the instance's log with
the time it was read. Every process an instance starts ends with it, whatever session or group it
moved to (``setsid sleep 4646 &``): each instance carries a mark of its own in its environment
(``mark_of``: the job's uid and the instance's name, so a reader that finds the supervisor dead
can sweep them too, as it kills their groups), swept from /proc when the instance ends, succeeded,
failed or stopped (``end``, ``stop``). Not the supervisor's guardian token: a job an instance
submits (``arena submit`` in its script) is not the instance's, and would carry the token on.
An instance that runs in its image (``in_image``, decided once per job by ``training.images``) is the
container runtime's client (``runners.in_image.container_command``: the same binds, environment, working
folder and host network, the job's folder shown at the same path) started the same way: its output is
the container's, a signal to its group reaches the container (the client forwards it), and the
container itself is removed when the instance ends or is stopped (it does not end with its client).
A launcher's output (mpirun with ``OMPI_MCA_orte_tag_output``) carries
each rank's tag, ``[1,RANK]<stdout>:``: the tag is taken off, and the line also goes to the log
of the worker that rank belongs to, so ``arena logs -i NAME-worker-1`` shows that worker.
"""

from __future__ import annotations

import re
import subprocess
import threading
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from millpond.errors import TaskFailure
from millpond.runners import isolation
from millpond.runners.base import Bind, InImage, ProcessSpec
from millpond.runners.containers import sweep
from millpond.runners.environment import inherited_environment, with_console_scripts
from millpond.runners.in_image import Started, container_command, finish
from millpond.runners.process_groups import MARK_VAR, end_group, end_marked, stamp_now, stop_groups
from millpond.runners.processes import start_ticks
from millpond.runners.sandbox import SandboxUnavailable, sandbox_problem, wrap
from millpond.training.launch import Planned

__all__ = ["Running", "end", "end_group", "mark_of", "stamp_now", "start", "stop"]

RANK_TAG = re.compile(rb"^\[\d+,(\d+)\]<(?:stdout|stderr|stddiag)>:")  # Open MPI 4's --tag-output
STOP_GRACE_S = 5.0  # SIGTERM, then this long, then SIGKILL (a pod's grace period, shortened)
# Once an instance and all it started are gone its log pipe is at EOF: the copy is waited for this long (a loaded
# machine), so the job's end is written after its last lines, which `arena logs` right after `arena wait` shows.
LOG_DRAIN_S = 15.0


class InstanceProcess(Protocol):
    """What the supervisor asks of an instance's process: a local ``Popen``, or a Ray task
    (``ray_jobs``), whose process is another machine's and has no pid here."""

    @property
    def pid(self) -> int | None: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...


@dataclass
class Running:
    """A started instance: its process, its recorded identity, the thread copying its output.

    ``failure`` says why it ended when its exit code does not (a lost Ray node); ``waiter`` is
    the thread waiting for a Ray task."""

    planned: Planned
    process: InstanceProcess
    ticks: str | None
    pump: threading.Thread
    failure: str | None = None
    waiter: threading.Thread | None = None
    mark: str | None = None  # the mark its processes carry (process_groups.marked); None on a Ray node
    in_image: InImage | None = None  # the image it runs in (its process is the runtime's client)
    container: Started | None = None  # the container's run, when it runs in an image


def mark_of(uid: str, name: str) -> str:
    """The mark every process of instance ``name`` of job ``uid`` carries (``MILLPOND_PROCESS_MARK``)."""
    return f"{uid}.{name}"


def start(planned: Planned, binds: list[Bind], cwd: Path, log: Path, rank_logs: list[Path] | None = None,
          mark: str | None = None, in_image: InImage | None = None, workspace: Path | None = None) -> Running:
    """Start ``planned`` in its own session; a sandbox that cannot be made when binds need it is a TaskFailure.

    ``rank_logs``: per MPI rank, the log that also gets the rank's tagged lines (a launcher's);
    ``mark``: what its processes carry (``mark_of``), swept when it ends; ``in_image``: run it in that
    image (``cwd`` is then the container's folder), ``workspace`` (the job's folder) shown at its path.
    """
    marks = {MARK_VAR: mark} if mark else {}
    container = None
    folder: Path | None
    log.parent.mkdir(parents=True, exist_ok=True)
    if in_image is not None:
        spec = ProcessSpec(argv=list(planned.argv), env=dict(planned.env), cwd=cwd, log_path=log, binds=list(binds),
                           workspace=workspace, in_image=in_image)
        container = container_command(spec, marks)
        argv, env, folder = container.argv, container.env, container.folder  # conmon writes its oom file there
    else:
        argv = list(planned.argv)
        if binds or sandbox_problem() is None or isolation.required():  # multi-user: confined to its folders
            try:
                argv = wrap(argv, binds, cwd, own=(workspace,) if workspace is not None else ())
            except SandboxUnavailable as exc:
                raise TaskFailure(str(exc) if isolation.required() else f"cannot mount the job's data: {exc}") from None
        # The node image of a TrainJob (pytorch/pytorch) has torchrun and python on PATH, and the Kubeflow SDK's
        # CustomTrainer runs ``torchrun SCRIPT``: on the host that is the environment millpond is installed in,
        # even when it was never activated (a `millpond server` started as .venv/bin/millpond).
        env = {**with_console_scripts(inherited_environment()), **planned.env, **marks}
        folder = cwd if not binds else None
    try:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True, env=env, cwd=folder,
        )
    except OSError as exc:
        raise TaskFailure(f"cannot start {planned.name}: {exc}") from None
    assert process.stdout is not None
    pump = threading.Thread(target=_copy, args=(process.stdout, log, rank_logs or []), daemon=True,
                            name=f"log-{planned.name}")
    pump.start()
    return Running(planned, process, start_ticks(process.pid), pump, mark=mark, in_image=in_image,
                   container=container)


def _copy(source: IO[bytes], log: Path, rank_logs: list[Path]) -> None:
    """Every line the instance prints, appended to its log after the time it was read (and to its rank's)."""
    with ExitStack() as files:
        out = files.enter_context(open(log, "ab", buffering=0))
        ranks: dict[Path, IO[bytes]] = {}
        for line in iter(source.readline, b""):
            stamp = stamp_now()
            tag = RANK_TAG.match(line) if rank_logs else None
            if tag:  # mpirun tags each chunk it reads, so a line split in two writes carries its tag again inside
                line = line[tag.end():].replace(tag.group(0), b"")
            text = stamp + b" " + (line if line.endswith(b"\n") else line + b"\n")
            out.write(text)
            rank = int(tag.group(1)) if tag else -1
            if 0 <= rank < len(rank_logs):
                target = rank_logs[rank]
                if target not in ranks:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    ranks[target] = files.enter_context(open(target, "ab", buffering=0))
                ranks[target].write(text)


def end(item: Running) -> None:
    """What an instance that exited left running (its group, its session, its marked processes): SIGKILLed,
    as a container's processes end with its first."""
    if item.process.pid is not None:
        end_group(item.process.pid, item.ticks)
    end_marked(item.mark)
    if item.in_image is not None and item.container is not None:
        code = item.process.returncode if item.process.returncode is not None else -1
        if finish(item.in_image, item.container, code, stopped=False) == "OOMKilled":
            item.failure = (f"{item.planned.name} was OOMKilled: its container went over its memory limit "
                            f"({item.in_image.memory_bytes} bytes)")


def stop(running: list[Running]) -> None:
    """SIGTERM each instance's group (and session, and marked processes) still running, SIGKILL what is
    left after ``STOP_GRACE_S``."""
    left = [item for item in running if item.in_image is not None and item.container is not None and (
        item.process.poll() is None or (item.process.returncode or 0) < 0 or item.in_image.memory_bytes)]
    stop_groups([(item.process, item.ticks) for item in running], STOP_GRACE_S,  # type: ignore[misc]  # local: Popens
                [item.mark for item in running])
    for item in left:  # its client ended; its container may not have (nor been removed: no --rm with a limit)
        assert item.in_image is not None and item.container is not None
        sweep.remove(item.in_image.runtime, item.container.name)
    for item in running:
        item.pump.join(timeout=LOG_DRAIN_S)

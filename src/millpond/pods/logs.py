"""A pod's container log as the kubelet serves it (``GET .../pods/NAME/log?container=&tailLines=&follow=&timestamps=``).

What ``kubectl logs POD [-c C] [--tail N] [-f] [--timestamps]`` reads: the container's output, whole or
its last ``tail_lines`` lines, and with ``follow`` every line written after, for as long as that
container's process runs (the iterator ends when it ends, once what it wrote last was read). The
container must be one of the pod's (``container X is not valid for pod Y``, the API server's words);
a pod of several containers needs one named; a container that never started has no log yet
(``... is waiting to start: REASON``). A restarted container's log is the whole log of its
restarts (the training and serving supervisors append to one file), where the kubelet would keep
only the current and the previous one (simplified).

Log files whose lines the supervisors stamped (``TIME LINE``) are served without the stamp unless
``timestamps`` asks for it, as the kubelet does with the times it records; a pipeline task's log has
no stamps, so ``timestamps`` cannot add them (simplified).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from millpond.errors import NotFoundError, UserError
from millpond.kind_handler import KindContext
from millpond.pods import sources
from millpond.pods.records import ContainerView, LogFile, PodView, Running, Waiting

FOLLOW_POLL_S = 0.2
SETTLE_READS = 2  # after the process ended: reads that found nothing new before the log is taken as whole
_BLOCK = 65536


@dataclass(frozen=True)
class LogRequest:
    """The query of a log request (``kubectl logs``' flags)."""

    container: str | None = None
    tail_lines: int | None = None
    follow: bool = False
    timestamps: bool = False


def container_of(pod: PodView, wanted: str | None) -> ContainerView:
    """The container a log request names (the only one when none is named); UserError as the API server says it."""
    names = [container.name for container in pod.containers]
    if wanted:
        found = pod.container(wanted)
        if found is None:
            raise UserError(f"container {wanted} is not valid for pod {pod.name}")
        return found
    if len(pod.containers) != 1:
        raise UserError(f"a container name must be specified for pod {pod.name}, choose one of: [{' '.join(names)}]")
    return pod.containers[0]


def pod_log(pod: PodView, request: LogRequest, refresh: Callable[[], PodView | None]) -> Iterator[bytes]:
    """The container's log as chunks of bytes (whole lines); ``refresh`` reads the pod again (None: it is gone),
    to know while following whether the same process still runs. Errors (UserError) are raised before the
    first chunk."""
    container = container_of(pod, request.container)
    log = container.log
    if log is None or (isinstance(container.state, Waiting) and not container.restart_count
                       and not log.path.exists()):
        reason = container.state.reason if isinstance(container.state, Waiting) else "ContainerCreating"
        raise UserError(f'container "{container.name}" in pod "{pod.name}" is waiting to start: {reason}')
    if request.tail_lines is not None and request.tail_lines < 0:
        raise UserError(f"tailLines: {request.tail_lines} must be 0 or more")
    return _stream(container, log, request, lambda: _same_process_runs(container, refresh()))


def _same_process_runs(container: ContainerView, now: PodView | None) -> bool:
    """Whether the container ``container`` was (its process, when it has one) still runs in ``now``."""
    current = now.container(container.name) if now is not None else None
    if current is None or not isinstance(current.state, Running):
        return False
    return container.process is None or current.process == container.process


def _stream(container: ContainerView, log: LogFile, request: LogRequest, alive: Callable[[], bool]) -> Iterator[bytes]:
    offset = _tail_offset(log, request.tail_lines) if request.tail_lines is not None else 0
    running = isinstance(container.state, Running)
    pending = b""
    quiet = 0
    while True:
        chunk, offset = _read_from(log, offset)
        pending += chunk
        complete, newline, pending = pending.rpartition(b"\n")
        if newline:  # whole lines, an empty one included (a log that starts with a blank line keeps it)
            yield _shown(complete + newline, log.stamped, request.timestamps)
        if not request.follow:
            break
        if chunk:
            quiet = 0
            continue
        if running and alive():
            time.sleep(FOLLOW_POLL_S)
            continue
        running = False
        quiet += 1  # it ended: what it wrote last may still be on its way to the file
        if quiet > SETTLE_READS:
            break
        time.sleep(FOLLOW_POLL_S)
    if pending:
        yield _shown(pending, log.stamped, request.timestamps)


def _read_from(log: LogFile, offset: int) -> tuple[bytes, int]:
    """What the log holds after ``offset``, and the offset after it (nothing when there is no file yet)."""
    try:
        with open(log.path, "rb") as source:
            source.seek(offset)
            data = source.read()
    except FileNotFoundError:
        return b"", offset
    return data, offset + len(data)


def _tail_offset(log: LogFile, lines: int) -> int:
    """Where the last ``lines`` lines of the log start, reading it backwards a block at a time."""
    try:
        size = os.path.getsize(log.path)
    except OSError:
        return 0
    if lines == 0:
        return size
    with open(log.path, "rb") as source:
        source.seek(max(0, size - 1))
        wanted = lines + (1 if source.read(1) == b"\n" else 0)  # newlines to pass, the last line's own included
        position = size
        while position > 0:
            start = max(0, position - _BLOCK)
            source.seek(start)
            block = source.read(position - start)
            count = block.count(b"\n")
            if count >= wanted:
                cut = len(block)
                for _ in range(wanted):
                    cut = block.rindex(b"\n", 0, cut)
                return start + cut + 1
            wanted -= count
            position = start
    return 0


def _shown(data: bytes, stamped: bool, timestamps: bool) -> bytes:
    """Lines as served: a stamped log's lines without their stamp unless ``timestamps``."""
    if not stamped or timestamps:
        return data
    return b"\n".join(line.split(b" ", 1)[1] if b" " in line else line for line in data.split(b"\n"))


def read_log(name: str, namespace: str, request: LogRequest, context: KindContext) -> Iterator[bytes]:
    """``GET /api/v1/namespaces/NAMESPACE/pods/NAME/log``: pod ``name``'s container log as ``request`` asks
    (NotFoundError: ``pods "x" not found``; UserError: a container that is not the pod's, or has no log yet)."""
    pod = sources.find(name, namespace, context)

    def refresh() -> PodView | None:
        try:
            return sources.find(name, namespace, context)
        except NotFoundError:
            return None

    return pod_log(pod, request, refresh)

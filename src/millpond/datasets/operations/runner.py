"""Running a data operation: waiting for the one it runs after, executing it, recording its status.

Status is what Fluid reports: ``phase`` Pending → Executing → Complete | Failed, ``duration``,
``conditions`` (a Complete or Failed condition with the reason), plus ``progress`` (bytes and
files done) while it executes. A step whose ``runAfter`` failed fails without running and says
which step failed and why; so a dataflow stops at its first failure.

Every way an operation can end leaves it Complete or Failed, never Executing: an error of the
storage or of the input, a bug (any exception: its traceback goes to the operation's log), and a
stop signal (SIGTERM, SIGINT, SIGHUP: recorded by a watcher thread, which then ends the process
and its children). A Failed condition's message is one line, ``KIND NAME: CAUSE``.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from millpond.datasets.operations import copied, lineage, liveness
from millpond.datasets.operations.executors import EXECUTORS
from millpond.datasets.operations.lifeline import Lifeline
from millpond.datasets.operations.processor import remove_running
from millpond.datasets.operations.schedule import run_on_schedule
from millpond.errors import MillpondError, UserError
from millpond.runners import stopping
from millpond.store.resources import Resource, ResourceStore

TERMINAL = ("Complete", "Failed")
POLL_S = 0.2
PROGRESS_EVERY_S = 0.5
MESSAGE_CHARS = 1000
# Every status write of this process. Reentrant: a stop holds it while it writes Failed and for
# good after, so no progress update of a copy still under way can write Executing over it.
_STATUS_LOCK = threading.RLock()


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, rest = divmod(seconds, 60)
    return f"{minutes}m{rest}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60}m{rest}s"


def _operation(store: ResourceStore, kind: str, name: str, namespace: str) -> Resource:
    found = store.get(kind, name, namespace)
    if found is None:
        raise UserError(f"{kind} {name!r} not found (millpond apply -f FILE first)")
    return found


def _set(store: ResourceStore, resource: Resource, status: dict[str, Any]) -> dict[str, Any]:
    with _STATUS_LOCK:
        store.set_status(resource.kind, resource.name, status, resource.namespace)
    return status


def start(kind: str, name: str, namespace: str = "default") -> None:
    """Run an applied operation in a background process (it outlives the caller, as a controller would).

    The process is recorded (``liveness``), so that one killed is seen dead; a fresh run
    forgets the files an earlier DataMigrate of the same object copied.
    """
    store = ResourceStore()
    resource = _operation(store, kind, name, namespace)
    copied.forget(resource)
    liveness.launch(store, resource)


def wait(kind: str, name: str, namespace: str = "default", timeout: float | None = None) -> dict[str, Any]:
    """Block until the operation is Complete or Failed (TimeoutError past ``timeout``); its status."""
    store = ResourceStore()
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        found = store.get(kind, name, namespace)
        if found is None:
            return {"phase": "Complete", "deleted": True}  # finished, then deleted by its ttlSecondsAfterFinished
        status = liveness.observed(store, found)  # a dead process is seen: Failed, or resumed
        if status.get("phase") in TERMINAL:
            return status
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"{kind} {name} is still {status.get('phase', 'Pending')} after {timeout:.0f}s")
        time.sleep(POLL_S)


def run(kind: str, name: str, namespace: str = "default", progress: Any = None) -> dict[str, Any]:
    """Execute the operation here: wait for its runAfter, run it, record Complete or Failed (whatever goes wrong)."""
    store = ResourceStore()
    resource = _operation(store, kind, name, namespace)
    started = time.monotonic()
    try:
        after = resource.spec.get("runAfter") or {}
        if after.get("name"):
            after_kind, after_ns = after.get("kind") or kind, after.get("namespace") or namespace
            waiting = {"phase": "Pending", "conditions": [], "waitingFor": f"{after_kind} {after['name']}"}
            _set(store, resource, waiting)
            previous = wait(after_kind, after["name"], after_ns)
            if previous.get("phase") != "Complete":
                why = failure_reason(previous, after_kind, after["name"])
                return _finish(store, resource, started, None, f"runAfter {after_kind} {after['name']} failed: {why}")
        started = time.monotonic()
        status: dict[str, Any] = {"phase": "Executing", "startTime": _now(), "conditions": [], "progress": {}}
        _set(store, resource, status)
        last = [0.0]

        def report(done_bytes: int, done_files: int, total_bytes: int | None = None) -> None:
            if progress:
                progress(done_bytes, done_files, total_bytes)
            if time.monotonic() - last[0] >= PROGRESS_EVERY_S:
                last[0] = time.monotonic()
                status["progress"] = {"bytes": done_bytes, "files": done_files, "totalBytes": total_bytes}
                status["duration"] = _duration(time.monotonic() - started)
                _set(store, resource, status)

        infos = EXECUTORS[kind](resource, report)
    except Exception as exc:  # noqa: BLE001 - whatever it is, the operation has failed and must say so
        return _finish(store, resource, started, None, _message(exc, liveness.log_path(kind, name, namespace)))
    return _finish(store, resource, started, infos, None)


def _message(exc: BaseException, log: Path) -> str:
    """One line: what the error says; for an error nobody foresaw (a bug), its class too, and its trace logged."""
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.strerror or exc}: {exc.filename}"
    lines = str(exc).strip().splitlines()
    text = lines[0][:MESSAGE_CHARS] if lines else type(exc).__name__
    if isinstance(exc, (MillpondError, OSError)):
        return text
    traceback.print_exc(file=sys.stderr)
    sys.stderr.flush()
    return f"unexpected {type(exc).__name__}: {text} (traceback in {log})"


def failure_reason(status: dict[str, Any], kind: str, name: str) -> str:
    """The cause a Failed status gives, without its ``KIND NAME:`` prefix (for a message that names it already)."""
    messages = [c.get("message", "") for c in status.get("conditions") or [] if c.get("message")]
    message = messages[0] if messages else f"{status.get('phase', 'not Complete')}"
    return message.removeprefix(f"{kind} {name}: ")


def _finish(
    store: ResourceStore, resource: Resource, started: float, infos: dict[str, Any] | None, error: str | None
) -> dict[str, Any]:
    ok = error is None
    condition = {
        "type": "Complete" if ok else "Failed", "status": "True",
        "reason": f"{resource.kind}Succeeded" if ok else f"{resource.kind}Failed",
        "message": f"{resource.kind} {resource.name} completed" if ok else f"{resource.kind} {resource.name}: {error}",
        "lastProbeTime": _now(), "lastTransitionTime": _now(),
    }
    previous = store.get(resource.kind, resource.name, resource.namespace)
    status = dict(previous.status) if previous else {}
    status.pop("waitingFor", None)
    status.update(phase="Complete" if ok else "Failed", duration=_duration(time.monotonic() - started),
                  completionTime=_now(), conditions=[condition])
    if infos:
        status["infos"] = infos
    written = _set(store, resource, status)
    lineage.operation_ended(store.get(resource.kind, resource.name, resource.namespace))  # after its end is written
    return written


def main(argv: list[str] | None = None) -> int:
    """The background process of ``start`` (``python -m millpond.datasets.operations``)."""
    args = argv if argv is not None else sys.argv[1:]
    kind, name = args[0], args[1]
    namespace = args[2] if len(args) > 2 else "default"
    if not liveness.claim(ResourceStore(), kind, name, namespace):
        return 0  # seen dead before it started: failed or resumed elsewhere
    with stopping.handled(), stopping.deferred() as stop:  # a signal only records the request: see _end_on_stop
        threading.Thread(
            target=_end_on_stop, args=(stop, kind, name, namespace), name="millpond-stop", daemon=True
        ).start()
        resource, lifeline = None, None
        try:
            resource = _operation(ResourceStore(), kind, name, namespace)
            lifeline = Lifeline(resource)  # ends this process when the operation, its dataset or its home goes
            if resource.spec.get("policy") == "Cron":
                os._exit(run_on_schedule(resource, run, lifeline))
            with lifeline.working():
                status = run(kind, name, namespace)
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except Exception as exc:  # noqa: BLE001 - outside run (the schedule, the store): still recorded
            try:
                status = _fail(kind, name, namespace, _message(exc, liveness.log_path(kind, name, namespace)))
            except Exception:  # noqa: BLE001 - the store itself fails: say so in the log, and end
                traceback.print_exc(file=sys.stderr)
                os._exit(1)
        print(f"{kind} {name}: {status['phase']}", file=sys.stderr)
        if resource is not None and lifeline is not None:
            _delete_after_ttl(resource, lifeline)
        os._exit(0 if status["phase"] == "Complete" else 1)  # background fetch threads must not hold the exit


def _fail(kind: str, name: str, namespace: str, error: str) -> dict[str, Any]:
    """Record Failed with ``error`` unless the operation already ended (or is gone); its status."""
    store = ResourceStore()
    with _STATUS_LOCK:
        found = store.get(kind, name, namespace)
        if found is None:
            return {"phase": "Failed"}
        status = found.status or {}
        if status.get("phase") in TERMINAL:
            return status
        return _finish(store, found, time.monotonic() - _elapsed(status), None, error)


def _elapsed(status: dict[str, Any]) -> float:
    """Seconds since the status's startTime (0 when it has none)."""
    try:
        began = dt.datetime.strptime(str(status["startTime"]), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    except (KeyError, ValueError):
        return 0.0
    return max(0.0, (dt.datetime.now(dt.timezone.utc) - began).total_seconds())


def _end_on_stop(stop: stopping.StopRequest, kind: str, name: str, namespace: str) -> None:
    """Once a stop signal came: record Failed (unless it ended), stop the children, end the process.

    A thread does it, not the signal handler: the handler would run inside whatever the main
    thread was doing (a SQLite transaction, a pool's join that waits for every queued copy).
    The status lock is taken and never given back, so nothing this process still does can write
    Executing over the Failed; the process group (this process leads it: ``start`` made a new
    session) then gets SIGTERM, so a DataProcess script does not outlive the operation.
    """
    while not stop.is_set():
        time.sleep(POLL_S)
    _STATUS_LOCK.acquire()
    try:
        status = _fail(kind, name, namespace, stop.reason or "stopped")
        print(f"{kind} {name}: {status.get('phase')} ({stop.reason})", file=sys.stderr, flush=True)
    except Exception:  # noqa: BLE001 - the store is unreachable: nothing more to do than say so
        traceback.print_exc(file=sys.stderr)
    finally:
        remove_running()  # a DataProcess's containers end now, not only when their runtime's client passes it on
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpid(), signal.SIGTERM)  # this process's own handler ignores it: already stopping
        os._exit(1)


def _delete_after_ttl(resource: Resource, lifeline: Lifeline) -> None:
    """``ttlSecondsAfterFinished``: the finished operation is deleted that many seconds later.

    Unless it, its dataset or its home went meanwhile: then this process just ends (within a second).
    """
    ttl = resource.spec.get("ttlSecondsAfterFinished")
    if ttl is None:
        return
    if lifeline.sleep_until(time.time() + max(0, int(ttl))) is None:
        ResourceStore().delete(resource.kind, resource.name, resource.namespace)


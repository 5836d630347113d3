"""Running a data operation: waiting for the one it runs after, executing it, recording its status.

Status is what Fluid reports: ``phase`` Pending → Executing → Complete | Failed, ``duration``,
``conditions`` (a Complete or Failed condition with the reason), plus ``progress`` (bytes and
files done) while it executes. A step whose ``runAfter`` failed fails without running and says
which step failed; so a dataflow stops at its first failure.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import time
from typing import Any

from millpond.datasets.operations import copied, liveness
from millpond.datasets.operations.lifeline import Lifeline
from millpond.datasets.operations.schedule import run_on_schedule
from millpond.errors import MillpondError, UserError
from millpond.store.resources import Resource, ResourceStore

TERMINAL = ("Complete", "Failed")
POLL_S = 0.2
PROGRESS_EVERY_S = 0.5


class OperationFailed(MillpondError):
    """The operation could not do its work; the message says why, in one line."""


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
    """Execute the operation here: wait for its runAfter, run it, record Complete or Failed."""
    from millpond.datasets.operations.executors import EXECUTORS

    store = ResourceStore()
    resource = _operation(store, kind, name, namespace)
    after = resource.spec.get("runAfter") or {}
    if after.get("name"):
        after_kind, after_ns = after.get("kind") or kind, after.get("namespace") or namespace
        _set(store, resource, {"phase": "Pending", "conditions": [], "waitingFor": f"{after_kind} {after['name']}"})
        previous = wait(after_kind, after["name"], after_ns)
        if previous.get("phase") != "Complete":
            return _finish(
                store, resource, time.monotonic(), None, f"runAfter {after_kind} {after['name']} failed; not run"
            )
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

    try:
        infos = EXECUTORS[kind](resource, report)
    except (MillpondError, OSError, FileNotFoundError, PermissionError) as exc:
        return _finish(store, resource, started, None, _message(exc))
    return _finish(store, resource, started, infos, None)


def _message(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.strerror or exc}: {exc.filename}"
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _finish(
    store: ResourceStore, resource: Resource, started: float, infos: dict[str, Any] | None, error: str | None
) -> dict[str, Any]:
    ok = error is None
    condition = {
        "type": "Complete" if ok else "Failed", "status": "True",
        "reason": f"{resource.kind}Succeeded" if ok else f"{resource.kind}Failed",
        "message": f"{resource.kind} {resource.name} completed" if ok else error,
        "lastProbeTime": _now(), "lastTransitionTime": _now(),
    }
    previous = store.get(resource.kind, resource.name, resource.namespace)
    status = dict(previous.status) if previous else {}
    status.pop("waitingFor", None)
    status.update(phase="Complete" if ok else "Failed", duration=_duration(time.monotonic() - started),
                  completionTime=_now(), conditions=[condition])
    if infos:
        status["infos"] = infos
    return _set(store, resource, status)


def main(argv: list[str] | None = None) -> int:
    """The background process of ``start`` (``python -m millpond.datasets.operations``)."""
    args = argv if argv is not None else sys.argv[1:]
    kind, name = args[0], args[1]
    namespace = args[2] if len(args) > 2 else "default"
    if not liveness.claim(ResourceStore(), kind, name, namespace):
        return 0  # seen dead before it started: failed or resumed elsewhere
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
    print(f"{kind} {name}: {status['phase']}", file=sys.stderr)
    _delete_after_ttl(resource, lifeline)
    os._exit(0 if status["phase"] == "Complete" else 1)  # background fetch threads must not hold the exit


def _delete_after_ttl(resource: Resource, lifeline: Lifeline) -> None:
    """``ttlSecondsAfterFinished``: the finished operation is deleted that many seconds later.

    Unless it, its dataset or its home went meanwhile: then this process just ends (within a second).
    """
    ttl = resource.spec.get("ttlSecondsAfterFinished")
    if ttl is None:
        return
    if lifeline.sleep_until(time.time() + max(0, int(ttl))) is None:
        ResourceStore().delete(resource.kind, resource.name, resource.namespace)


"""``?watch=1``: a stream of ADDED, MODIFIED, DELETED and BOOKMARK events, one JSON object a line.

A watch reads its kind's event log (``history``): from the ``resourceVersion`` it names (410 Expired
as an ERROR event when the log no longer reaches back), or, from "" or "0", after ADDED events for
every object there now (``sendInitialEvents=true`` ends those with the ``k8s.io/initial-events-end``
bookmark, as the watch-list protocol asks). Changes reach the log when the API itself writes, and
from the ``Poller``: one thread for the whole server that lists each kind someone watches, so
changes millpond's own supervisors make (a job going Succeeded) are seen within ``POLL_SECONDS``
— a thousand watches of a kind cost one listing per round, not a thousand. A watch wakes on a
change through its event loop (no polling per watch) and ends when the client goes, at
``timeoutSeconds``, or at the server's ``MAX_WATCH_SECONDS`` (clients resume from the last version).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from millpond.kind_handler import KindName
from millpond.server.kube.history import KindHistory, key_of
from millpond.server.kube.selectors import Match
from millpond.server.kube.status import KubeError

POLL_SECONDS = 0.1
BOOKMARK_SECONDS = 30.0
MAX_WATCH_SECONDS = 1800.0


class _OpenWatches:
    """The watches in flight, so that a stopping server ends them (as kube-apiserver closes its watches on
    shutdown) instead of waiting for clients that never hang up (``kubectl get -w``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self.closing = False

    def add(self, loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
        with self._lock:
            self._waiting.add((loop, event))

    def remove(self, loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
        with self._lock:
            self._waiting.discard((loop, event))

    def close_all(self) -> None:
        """End every watch now, and any begun later at once (thread-safe: called from a signal handler)."""
        self.closing = True
        with self._lock:
            waiting = list(self._waiting)
        for loop, event in waiting:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # its loop is closed: nothing waits there any more
                pass


OPEN_WATCHES = _OpenWatches()
log = logging.getLogger("millpond.kube.watch")


class Poller:
    """Lists every watched kind in turn, so the changes nobody wrote through the API reach its log."""

    def __init__(self, watched: Callable[[], list[KindName]], sync: Callable[[KindName], Any]) -> None:
        self._watched = watched
        self._sync = sync
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    def ensure_running(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True, name="kube-watch-poller")
                self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        while not self._stopped.is_set():
            started = time.monotonic()
            kinds = self._watched()
            if not kinds:
                self._thread = None
                return
            for kind in kinds:
                try:
                    self._sync(kind)
                except Exception:  # a family failing to list must not end every watch: said, retried next round
                    log.exception("listing %s for its watches failed", kind.kind)
            # a slow listing (thousands of objects) is not repeated back to back: at most half the time busy
            self._stopped.wait(max(POLL_SECONDS, time.monotonic() - started))


@dataclass(frozen=True)
class WatchRequest:
    kind: KindName
    namespace: str
    match: Match
    resource_version: str
    timeout: float
    bookmarks: bool
    initial_events: bool
    shape: Callable[[str, dict[str, Any]], dict[str, Any]]  # an event's object as the client asked (Table or not)
    shape_blocks: bool = False  # shaping reads the family's table (its store): done in a worker thread


async def _shaped(request: WatchRequest, change: str, obj: dict[str, Any]) -> dict[str, Any]:
    if request.shape_blocks:
        return await asyncio.to_thread(request.shape, change, obj)
    return request.shape(change, obj)


def _line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n"


async def stream(request: WatchRequest, history: KindHistory, initial: Callable[[], Any]) -> AsyncIterator[bytes]:
    """The watch's lines; ``initial`` lists the kind now (blocking: run in a thread) for a watch from "" or "0"."""
    loop = asyncio.get_running_loop()
    changed = asyncio.Event()

    def wake() -> None:
        loop.call_soon_threadsafe(changed.set)

    stop = history.listen(wake)
    OPEN_WATCHES.add(loop, changed)
    api_version = f"{request.kind.group}/{request.kind.versions[0]}" if request.kind.group else "v1"
    try:
        if request.resource_version in ("", "0") or request.initial_events:
            last, objects = await asyncio.to_thread(initial)
            for obj in objects:
                if _selected(request, obj):
                    yield _line("ADDED", await _shaped(request, "ADDED", obj))
            if request.initial_events:
                yield _line("BOOKMARK", _bookmark(request.kind.kind, api_version, last, initial_end=True))
        else:
            try:
                last = int(request.resource_version)
            except ValueError:
                raise KubeError(400, f"invalid resourceVersion {request.resource_version!r}") from None
        deadline = time.monotonic() + min(request.timeout or MAX_WATCH_SECONDS, MAX_WATCH_SECONDS)
        next_bookmark = time.monotonic() + BOOKMARK_SECONDS
        while True:
            changed.clear()
            events = history.since(last)
            if events is None:
                gone = KubeError(410, f"too old resource version: {last}", "Expired")
                yield _line("ERROR", gone.status())
                return
            for event in events:
                last = event.resource_version
                if _selected(request, event.object):
                    yield _line(event.type, await _shaped(request, event.type, event.object))
            now = time.monotonic()
            if now >= deadline or OPEN_WATCHES.closing:
                return
            if request.bookmarks and now >= next_bookmark:
                yield _line("BOOKMARK", _bookmark(request.kind.kind, api_version, last))
                next_bookmark = now + BOOKMARK_SECONDS
            try:
                await asyncio.wait_for(changed.wait(), timeout=min(deadline, next_bookmark) - now)
            except TimeoutError:
                pass
    finally:
        OPEN_WATCHES.remove(loop, changed)
        stop()


def _selected(request: WatchRequest, obj: dict[str, Any]) -> bool:
    return (not request.namespace or key_of(obj)[0] == request.namespace) and request.match(obj)


def _bookmark(kind: str, api_version: str, version: int, initial_end: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": str(version)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"kind": kind, "apiVersion": api_version, "metadata": meta}

"""Resource versions, generations and the event log of every kind, as the API server's watch cache keeps them.

millpond's families keep no resource version: their objects change when a user applies them and
when millpond's own supervisors move their status on (a job going Running → Succeeded, a dataset
becoming Bound). So the API observes them: each time it reads a kind (a list, a get, a write, or
the watch poller) it compares every object with what it saw last, and a change takes the next
number of one counter shared by every kind — the ``resourceVersion`` — and goes into that kind's
event log as ADDED, MODIFIED or DELETED. ``generation`` moves when ``spec`` changes. A kind whose
status always describes its current spec (``KindName.status_follows_spec``: an InferenceService, whose
status the apply that changes its spec resets) is shown with ``status.observedGeneration`` = ``generation``,
as its controller would write once it saw that spec (KServe's SDK reports nothing until it is there).

A watch from resourceVersion R replays the log after R; a log that no longer reaches back to R
answers 410 Expired, and the client lists again (what client-go's reflector and kubectl do).
The counter starts from the clock at server start, so a version from before a restart is older than
every version after it, and a watch resumed with it gets 410 rather than a wrong replay; an
update carrying it gets 409 Conflict. What the log keeps is in memory: the last ``LOG_SIZE``
events per kind, and server-side apply's field managers (``managed``), which a restart forgets
(simplified: the API server stores them in etcd with the object).
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

LOG_SIZE = 4096
# Parts of an object that do not make it another version: the stamps this module adds itself.
_UNVERSIONED = ("resourceVersion", "generation", "managedFields")


@dataclass
class Seen:
    """What the API last saw of one object."""

    resource_version: int
    generation: int
    content: str  # hash of the object without the stamps
    spec: str  # hash of its spec
    shown: dict[str, Any]  # the object as last served, stamped (a DELETED event carries it)
    managed: list[dict[str, Any]] = field(default_factory=list)  # managedFields entries, kept here


@dataclass(frozen=True)
class Event:
    """One change: ``type`` ADDED, MODIFIED or DELETED, at ``resource_version``, with the object then."""

    resource_version: int
    type: str
    key: tuple[str, str]  # (namespace, name)
    object: dict[str, Any]


def _digest(value: Any) -> str:
    return hashlib.blake2b(json.dumps(value, sort_keys=True, default=str).encode(), digest_size=16).hexdigest()


def key_of(obj: dict[str, Any]) -> tuple[str, str]:
    """(namespace, name) of an object ("" namespace: cluster-scoped)."""
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class Counter:
    """The one resource-version counter every kind shares (monotonic, from the clock at start)."""

    def __init__(self) -> None:
        self._next = int(time.time() * 1000)
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            self._next += 1
            return self._next

    @property
    def now(self) -> int:
        return self._next


class KindHistory:
    """One kind's objects as last seen, and its event log. Thread-safe: routes, watches and the poller share it."""

    def __init__(self, counter: Counter, observed_generation: bool = False) -> None:
        self._counter = counter
        self._observed_generation = observed_generation  # KindName.status_follows_spec: stamp observedGeneration
        self._seen: dict[tuple[str, str], Seen] = {}
        self._log: deque[Event] = deque(maxlen=LOG_SIZE)
        self._synced_at = counter.now  # the version up to which this log is complete
        self._replayable_from = counter.now  # a watch from an older version gets 410
        self._lock = threading.RLock()
        self._listeners: list[Callable[[], None]] = []

    def stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` as served: its resourceVersion and generation (a change seen now takes a new version)."""
        with self._lock:
            shown = self._observe(obj)
        self._notify()
        return shown

    def _observe(self, obj: dict[str, Any]) -> dict[str, Any]:
        key = key_of(obj)
        meta = obj.setdefault("metadata", {})
        for stamp in _UNVERSIONED:
            meta.pop(stamp, None)
        content = _digest(obj)
        seen = self._seen.get(key)
        if seen is not None and seen.content == content:
            return self._shown(seen, obj)
        spec = _digest(obj.get("spec"))  # only for a change: an unchanged object costs one digest
        version = self._counter.take()
        if seen is None:
            seen = Seen(version, 1, content, spec, obj)
            change = "ADDED"
        else:
            seen.generation += seen.spec != spec
            seen.resource_version, seen.content, seen.spec = version, content, spec
            change = "MODIFIED"
        self._seen[key] = seen
        shown = self._shown(seen, obj)
        seen.shown = copy.deepcopy(shown)
        self._append(Event(version, change, key, seen.shown))
        return shown

    def _append(self, event: Event) -> None:
        if len(self._log) == self._log.maxlen:
            self._replayable_from = self._log[0].resource_version  # what falls out is no longer replayable
        self._log.append(event)

    def _shown(self, seen: Seen, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        meta["resourceVersion"] = str(seen.resource_version)
        meta["generation"] = seen.generation
        if self._observed_generation and isinstance(obj.get("status"), dict):
            obj["status"] = {**obj["status"], "observedGeneration": seen.generation}
        if seen.managed:
            meta["managedFields"] = copy.deepcopy(seen.managed)
        return obj

    def sync(self, objects: Iterable[dict[str, Any]]) -> tuple[int, list[dict[str, Any]]]:
        """Every object of the kind, observed at once; those gone since are DELETED. Returns the version the
        listing is complete at and the objects, stamped."""
        with self._lock:
            shown = [self._observe(obj) for obj in objects]
            present = {key_of(obj) for obj in shown}
            for key in [key for key in self._seen if key not in present]:
                self._deleted(key)
            self._synced_at = self._counter.now
            at = self._synced_at
        self._notify()
        return at, shown

    def _deleted(self, key: tuple[str, str]) -> None:
        gone = self._seen.pop(key)
        last = copy.deepcopy(gone.shown)
        version = self._counter.take()
        last.setdefault("metadata", {})["resourceVersion"] = str(version)
        self._append(Event(version, "DELETED", key, last))

    def forget(self, namespace: str, name: str) -> None:
        """An object deleted through the API: DELETED now, not at the next listing."""
        with self._lock:
            if (namespace, name) not in self._seen:
                return
            self._deleted((namespace, name))
        self._notify()

    def seen(self, namespace: str, name: str) -> Seen | None:
        with self._lock:
            return self._seen.get((namespace, name))

    def managed(self, namespace: str, name: str) -> list[dict[str, Any]]:
        with self._lock:
            seen = self._seen.get((namespace, name))
            return copy.deepcopy(seen.managed) if seen else []

    def set_managed(self, namespace: str, name: str, entries: list[dict[str, Any]]) -> None:
        with self._lock:
            seen = self._seen.get((namespace, name))
            if seen is not None:
                seen.managed = copy.deepcopy(entries)
                seen.shown.setdefault("metadata", {})["managedFields"] = copy.deepcopy(entries)

    def since(self, version: int) -> list[Event] | None:
        """The events after ``version``; None when the log no longer reaches back to it (410 Expired)."""
        with self._lock:
            if version < self._replayable_from:
                return None
            return [event for event in self._log if event.resource_version > version]

    def current(self) -> tuple[int, list[dict[str, Any]]]:
        """The version the log is complete at and every object as last seen."""
        with self._lock:
            return self._synced_at, [copy.deepcopy(seen.shown) for seen in self._seen.values()]

    def listen(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (from any thread) after every change; returns what stops it."""
        with self._lock:
            self._listeners.append(callback)

        def stop() -> None:
            with self._lock:
                if callback in self._listeners:
                    self._listeners.remove(callback)
        return stop

    def listeners(self) -> int:
        with self._lock:
            return len(self._listeners)

    def _notify(self) -> None:
        with self._lock:
            callbacks = list(self._listeners)
        for callback in callbacks:
            callback()


class Histories:
    """Every kind's history, made when first asked for."""

    def __init__(self) -> None:
        self.counter = Counter()
        self._kinds: dict[str, KindHistory] = {}
        self._lock = threading.Lock()

    def of(self, kind: str, observed_generation: bool = False) -> KindHistory:
        """``kind``'s history; ``observed_generation``: its objects' status follows their spec (see KindHistory)."""
        with self._lock:
            if kind not in self._kinds:
                self._kinds[kind] = KindHistory(self.counter, observed_generation)
            return self._kinds[kind]

    def watched(self) -> list[str]:
        with self._lock:
            return [kind for kind, history in self._kinds.items() if history.listeners()]

"""Events: what millpond's families record about their objects (``KindHandler.events``) as ``v1`` Events.

Every family whose handler records events (today the training jobs' supervisors and the batch Jobs'
controller; any family that overrides ``HandlerBase.events`` is covered) is asked for the events of each
of its objects in the namespace; a family that records none is not asked at all, so listing events costs
one listing per kind that has any. Events alike (type, reason, message) of one object are one Event with a
``count`` and its first and last timestamps, as the API server's event correlator aggregates them. An
Event's name is ``OBJECT.HASH`` (kube's ``OBJECT.TIMESTAMP-HEX``), stable for the same event. Read-only:
the events are each family's record, so they are neither created nor deleted here (they go with their
object).

Where a family keeps no timestamp (``KindEvent.at`` unset) the time is read back from its age
(``5m``, ``2d3h``): as precise as kubectl shows it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from typing import Any

from millpond.core.kinds import api_version
from millpond.core.view import READ_ONLY, Planned, derived_uid, metadata_of, parse_timestamp, timestamp
from millpond.errors import NotFoundError, UserError
from millpond.kind_handler import HandlerBase, KindContext, KindEvent, KindHandler, KindName
from millpond.kinds import REGISTRY
from millpond.manifest_envelope import not_found
from millpond.tables import age_since

_AGE_PART = re.compile(r"(\d+)([ydhms])")
_SECONDS = {"y": 365 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}


def _moment(event: KindEvent, now: dt.datetime) -> dt.datetime:
    if event.at is not None:
        return event.at if event.at.tzinfo else event.at.replace(tzinfo=dt.timezone.utc)
    seconds = sum(int(amount) * _SECONDS[unit] for amount, unit in _AGE_PART.findall(event.age))
    return now - dt.timedelta(seconds=seconds)


def _records_events(handler: KindHandler) -> bool:
    """Whether the family records events (its handler overrides ``HandlerBase.events``)."""
    return getattr(type(handler), "events", None) is not HandlerBase.events


def _object_events(handler: KindHandler, entry: KindName, shown: dict[str, Any], context: KindContext,
                   now: dt.datetime) -> list[dict[str, Any]]:
    metadata = shown["metadata"]
    name, namespace = str(metadata["name"]), str(metadata.get("namespace") or "default")
    try:
        recorded = handler.events(entry, name, namespace, context)
    except NotFoundError:
        return []  # deleted meanwhile
    grouped: dict[tuple[str, str, str, str], list[dt.datetime]] = {}
    for event in recorded:
        grouped.setdefault((event.type, event.reason, event.message, event.source), []).append(_moment(event, now))
    found = []
    for (kind, reason, message, source), moments in grouped.items():
        first, last = min(moments), max(moments)
        digest = hashlib.sha256("\0".join((str(metadata.get("uid", "")), kind, reason, message)).encode()).hexdigest()
        event_name = f"{name}.{digest[:16]}"
        found.append({
            "apiVersion": "v1", "kind": "Event",
            "metadata": metadata_of(REGISTRY["Event"], event_name, namespace, derived_uid("Event", digest), first),
            "involvedObject": {"apiVersion": shown.get("apiVersion") or api_version(entry), "kind": entry.kind,
                               "name": name, "namespace": namespace, "uid": metadata.get("uid", "")},
            "reason": reason, "message": message, "type": kind, "count": len(moments),
            "firstTimestamp": timestamp(first), "lastTimestamp": timestamp(last),
            "source": {"component": source}, "reportingComponent": source, "reportingInstance": "",
        })
    return found


def all_events(namespace: str | None, context: KindContext) -> list[dict[str, Any]]:
    """Every Event of ``namespace`` (None: of every namespace), oldest last seen first."""
    now = dt.datetime.now(dt.timezone.utc)
    found = []
    for handler in REGISTRY.handlers():
        if not _records_events(handler):
            continue
        for entry in handler.kinds:
            shown_all = handler.list_objects(entry, namespace or "default", namespace is None, context)
            for shown in shown_all:
                found += _object_events(handler, entry, shown, context, now)
    return sorted(found, key=lambda event: (event["lastTimestamp"], event["metadata"]["name"]))


class EventView:
    """kubectl's ``LAST SEEN TYPE REASON OBJECT MESSAGE``, led by NAME (what the Kubernetes API's tables match
    rows by; kubectl shows it with ``-o wide``)."""

    columns: tuple[str, ...] = ("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")

    def objects(self, entry: KindName, namespace: str | None, context: KindContext) -> list[dict[str, Any]]:
        return all_events(namespace, context)

    def cells(self, shown: dict[str, Any], now: dt.datetime) -> list[str]:
        involved = shown["involvedObject"]
        last = parse_timestamp(shown["lastTimestamp"]) or now
        return [age_since(last, now), shown["type"], shown["reason"],
                f"{str(involved['kind']).lower()}/{involved['name']}", shown["message"]]

    def check(self, entry: KindName, doc: dict[str, Any], where: str, context: KindContext) -> Planned:
        raise UserError(f"{where}: {READ_ONLY}: events are what millpond's controllers record; they are not "
                        "created from manifests")

    def delete(self, entry: KindName, name: str, namespace: str, context: KindContext) -> None:
        if not any(one["metadata"]["name"] == name for one in all_events(namespace, context)):
            raise not_found(entry, name, namespace)
        raise UserError(f'events "{name}" is {READ_ONLY}: an event goes with the object it is about')

"""What an InferenceService's supervisor did that ``kubectl describe isvc`` shows as Events.

The kubelet records a pod's image pulls as events (``Pulling``, ``Pulled``, ``Failed`` with
``ErrImagePull``, ``BackOff``); here the supervisor appends each to ``events.jsonl`` in the
InferenceService's folder, with the uid it serves (a re-created object of the same name shows only
its own), and the serving family's handler reads them back. A bounded file: the newest
``KEEP`` lines stay, as the API server keeps events for a while and then forgets them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass

from millpond.serving import endpoints

FILE_NAME = "events.jsonl"
KEEP = 200
SOURCE = "millpond-serving"


@dataclass(frozen=True)
class ServingEvent:
    """One event: kubectl's Type (Normal, Warning), Reason, Message, and when (UTC)."""

    type: str
    reason: str
    message: str
    at: dt.datetime


def record(namespace: str, name: str, uid: str, kind: str, reason: str, message: str,
           owner: str = endpoints.ISVC) -> None:
    """Append one event (the supervisor is the only writer of its object's file; ``owner`` is that object's kind)."""
    path = endpoints.folder(namespace, name, owner) / FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"uid": uid, "type": kind, "reason": reason, "message": message[:1000],
                       "at": dt.datetime.now(dt.timezone.utc).isoformat()})
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    lines = [*lines[-(KEEP - 1):], line]
    partial = path.with_name(f".{FILE_NAME}.{os.getpid()}.partial")
    partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(partial, path)


def read(namespace: str, name: str, uid: str, owner: str = endpoints.ISVC) -> list[ServingEvent]:
    """The events recorded for this uid, oldest first; none when there is no file (or a line is not ours)."""
    try:
        lines = (endpoints.folder(namespace, name, owner) / FILE_NAME).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    found = []
    for text in lines:
        try:
            raw = json.loads(text)
            if raw.get("uid") == uid:
                found.append(ServingEvent(str(raw["type"]), str(raw["reason"]), str(raw["message"]),
                                          dt.datetime.fromisoformat(str(raw["at"]))))
        except (ValueError, KeyError, AttributeError, TypeError):
            continue
    return found

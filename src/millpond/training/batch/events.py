"""The Job controller's events (``describe job``'s Events): one JSON line each in the Job's folder.

Reasons as Kubernetes' job-controller gives them: ``SuccessfulCreate`` ("Created pod: NAME"),
``Completed``, ``BackoffLimitExceeded``, ``DeadlineExceeded``, ``Suspended``, ``Resumed``; and
millpond's own where Kubernetes has none (``Pending``: why a pod waits for the machine or its queue).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from millpond.settings import Settings
from millpond.training.batch.pods import job_folder, now_iso

SOURCE = "job-controller"


@dataclass(frozen=True)
class JobEvent:
    at: str
    type: str  # Normal | Warning
    reason: str
    message: str


def record(uid: str, reason: str, message: str, kind: str = "Normal", settings: Settings | None = None) -> None:
    folder = job_folder(uid, settings)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "events.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps({"at": now_iso(), "type": kind, "reason": reason, "message": message}) + "\n")


def read(uid: str, settings: Settings | None = None) -> list[JobEvent]:
    try:
        lines = (job_folder(uid, settings) / "events.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    events = []
    for line in lines:
        try:
            events.append(JobEvent(**json.loads(line)))
        except (ValueError, TypeError):
            continue  # a line cut short by a kill: the others still show
    return events

"""A Job's status as Kubernetes' Job controller writes it, and the row ``kubectl get jobs`` prints of it.

Status: ``active`` (pods Pending or Running), ``succeeded``, ``failed`` (pods; a container restarted
in its pod under restartPolicy OnFailure counts towards ``backoffLimit``, not here), ``ready`` (pods running: no probes
here), ``startTime`` (reset when a suspended Job resumes), ``completionTime``, ``completedIndexes``
(Indexed: ``"0-2,5"``) and ``conditions``. A Job that ends writes both conditions Kubernetes 1.31+
writes: ``SuccessCriteriaMet`` then ``Complete`` (reason ``CompletionsReached``), or
``FailureTarget`` then ``Failed`` (``BackoffLimitExceeded``, ``DeadlineExceeded``; ``SupervisorDied``
when millpond's controller process itself was killed). ``Suspended`` is True (``JobSuspended``) while
suspended, False (``JobResumed``) once resumed.

Printer columns (kubectl's ``printJob``): NAME, STATUS (Complete, Failed, Suspended, FailureTarget,
SuccessCriteriaMet, else Running), COMPLETIONS (``1/3``; no completions: ``0/1`` or ``0/1 of N``),
DURATION (start to completion, or to now; none before it started), AGE.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from millpond.tables import human_age
from millpond.training.batch.pods import JobPod, Phase, now_iso

COLUMNS = ("NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE")
FINAL = ("Complete", "Failed")
REACHED = ("CompletionsReached", "Reached expected number of succeeded pods")
BACKOFF = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
DEADLINE = ("DeadlineExceeded", "Job was active longer than specified deadline")


def condition(kind: str, reason: str, message: str, status: str = "True") -> dict[str, Any]:
    at = now_iso()
    return {"type": kind, "status": status, "lastProbeTime": at, "lastTransitionTime": at, "reason": reason,
            "message": message}


def with_condition(conditions: list[dict[str, Any]], kind: str, reason: str, message: str,
                   status: str = "True") -> list[dict[str, Any]]:
    """``conditions`` with ``kind`` set; its transition time kept when its status does not change."""
    found = next((c for c in conditions if c.get("type") == kind), None)
    if found is not None and (found.get("status"), found.get("reason")) == (status, reason):
        return conditions
    fresh = condition(kind, reason, message, status)
    if found is not None and found.get("status") == status:
        fresh["lastTransitionTime"] = found.get("lastTransitionTime", fresh["lastTransitionTime"])
    return [fresh if c.get("type") == kind else c for c in conditions] if found else [*conditions, fresh]


def has(status: Mapping[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or ())


def finished(status: Mapping[str, Any]) -> bool:
    return has(status, "Complete") or has(status, "Failed")


def index_ranges(indexes: Iterable[int]) -> str:
    """``completedIndexes`` as Kubernetes writes it: ``0-2,5,7-8``."""
    ordered = sorted(set(indexes))
    parts, start = [], None
    for position, index in enumerate(ordered):
        if start is None:
            start = index
        if position + 1 == len(ordered) or ordered[position + 1] != index + 1:
            parts.append(str(start) if start == index else f"{start}-{index}")
            start = None
    return ",".join(parts)


def counts(pods: Iterable[JobPod], *, indexed: bool) -> dict[str, Any]:
    """``active``, ``succeeded``, ``failed``, ``ready`` and (Indexed) ``completedIndexes`` of ``pods``.

    Zero counts are left out as the API server's ``omitempty`` leaves them; ``ready`` is always written."""
    pods = list(pods)
    active = sum(1 for pod in pods if pod.active)
    succeeded = sum(1 for pod in pods if pod.phase == Phase.SUCCEEDED)
    failed = sum(1 for pod in pods if pod.phase == Phase.FAILED)
    out: dict[str, Any] = {key: value for key, value in (("active", active), ("succeeded", succeeded),
                                                         ("failed", failed)) if value}
    out["ready"] = sum(1 for pod in pods if pod.phase == Phase.RUNNING)
    if indexed:
        done = index_ranges(pod.index for pod in pods if pod.phase == Phase.SUCCEEDED and pod.index is not None)
        if done:
            out["completedIndexes"] = done
    return out


def state(status: Mapping[str, Any]) -> str:
    """kubectl's STATUS column."""
    for kind in ("Complete", "Failed", "Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if has(status, kind):
            return kind
    return "Running"


def completions(spec: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    succeeded = int(status.get("succeeded") or 0)
    if spec.get("completions") is not None:
        return f"{succeeded}/{spec['completions']}"
    parallelism = int(spec.get("parallelism") or 0)
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _moment(text: object) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)


def duration(status: Mapping[str, Any], now: dt.datetime) -> str:
    start = _moment(status.get("startTime"))
    if start is None:
        return ""
    end = _moment(status.get("completionTime")) or now
    return human_age((end - start).total_seconds())


def completion_time(status: Mapping[str, Any]) -> dt.datetime | None:
    """When the Job finished (Complete's completionTime, else the Failed condition's time)."""
    done = _moment(status.get("completionTime"))
    if done is not None:
        return done
    failed = next((c for c in status.get("conditions") or () if c.get("type") == "Failed"), None)
    return _moment(failed.get("lastTransitionTime")) if failed else None


def row(shown: Mapping[str, Any], now: dt.datetime) -> list[str]:
    """One Job's cells under ``COLUMNS``."""
    status = shown.get("status") or {}
    created = _moment(shown["metadata"].get("creationTimestamp")) or now
    return [shown["metadata"]["name"], state(status), completions(shown.get("spec") or {}, status),
            duration(status, now), human_age((now - created).total_seconds())]

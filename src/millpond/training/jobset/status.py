"""A JobSet's status as JobSet's controller writes it, and the row ``kubectl get jobsets`` prints of it.

Status: ``conditions`` (``Completed``/``Failed`` with JobSet's reasons, ``Suspended`` True ``SuspendedJobs``
or False ``ResumeJobs``, ``StartupPolicyInProgress``/``StartupPolicyCompleted`` under InOrder),
``restarts``, ``restartsCountTowardsMax``, ``terminalState`` (Completed or Failed) and
``replicatedJobsStatus``. Printer columns (the CRD's): NAME, TERMINALSTATE, RESTARTS, COMPLETED, SUSPENDED, AGE.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from millpond.tables import human_age
from millpond.training.batch import status as job_status

COLUMNS = ("NAME", "TERMINALSTATE", "RESTARTS", "COMPLETED", "SUSPENDED", "AGE")
SUSPENDED = ("SuspendedJobs", "jobset is suspended")
RESUMED = ("ResumeJobs", "jobset is resumed")
IN_ORDER = ("InOrderStartupPolicyInProgress", "in order startup policy is in progress")
IN_ORDER_DONE = ("InOrderStartupPolicyCompleted", "in order startup policy has completed")


def with_condition(current: Mapping[str, Any], kind: str, reason: str, message: str,
                   value: str = "True") -> dict[str, Any]:
    """``current`` status with condition ``kind`` set (its transition time kept while its status holds)."""
    conditions = job_status.with_condition(list(current.get("conditions") or ()), kind, reason, message, value)
    return {**current, "conditions": [{k: v for k, v in c.items() if k != "lastProbeTime"} for c in conditions]}


def failed(current: Mapping[str, Any], reason: str, message: str) -> dict[str, Any]:
    return {**with_condition(current, "Failed", reason, message), "terminalState": "Failed"}


def completed(current: Mapping[str, Any], reason: str, message: str) -> dict[str, Any]:
    return {**with_condition(current, "Completed", reason, message), "terminalState": "Completed"}


def finished(current: Mapping[str, Any]) -> bool:
    return job_status.has(current, "Completed") or job_status.has(current, "Failed")


def row(shown: Mapping[str, Any], now: dt.datetime) -> list[str]:
    """One JobSet's cells under ``COLUMNS``."""
    current = shown.get("status") or {}
    conditions = current.get("conditions") or ()
    completed_cell = next((c.get("status", "") for c in conditions if c.get("type") == "Completed"), "")
    created = dt.datetime.strptime(shown["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=dt.timezone.utc)
    suspend = (shown.get("spec") or {}).get("suspend")
    return [shown["metadata"]["name"], str(current.get("terminalState") or ""), str(current.get("restarts") or 0),
            completed_cell, "" if suspend is None else str(suspend).lower(),
            human_age((now - created).total_seconds())]

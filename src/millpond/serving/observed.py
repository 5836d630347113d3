"""An InferenceService's status as it is, not as it was last written: the stored status checked against its endpoints.

The supervisor writes the status (``serving.objects.set_status``), and the stored Ready True
outlives a supervisor killed with ``kill -9`` or a machine restarted. Every reader (``get``, the
resource routes, ``millpond ps``, a deploy step waiting) shows :func:`observed_status`, which only
reads the endpoints file the live supervisor keeps. It sits under both ``serving.objects`` (which
shows it) and ``serving.lifecycle`` (which waits on it), so neither imports the other for it.
"""

from __future__ import annotations

import copy
from typing import Any

from millpond.serving import endpoints
from millpond.store.resources import Resource

NOT_SERVED = "SupervisorNotRunning"


def ready_condition(status: dict[str, Any]) -> tuple[str, str, str]:
    """The Ready condition's status, reason and message (``Unknown`` and blanks when there is none)."""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            return (str(condition.get("status", "Unknown")), str(condition.get("reason", "")),
                    str(condition.get("message", "")))
    return "Unknown", "", ""


def observed_status(resource: Resource) -> dict[str, Any]:
    """The stored status, unless it claims Ready while nothing answers: no live supervisor serves it
    (killed with ``kill -9``, stopped, or the machine restarted) → Ready False, ``SupervisorNotRunning``,
    and no URL; a new supervisor still starting its replicas after such a loss (the stored Ready is the
    dead one's) → Ready Unknown, ``Loading``."""
    status = copy.deepcopy(dict(resource.status or {}))
    if ready_condition(status)[0] != "True":
        return status
    found = endpoints.read(resource.namespace, resource.name)
    live = found is not None and found.uid == resource.uid
    if live and found is not None and found.ready:
        return status
    if live:
        return _not_ready(status, "Unknown", "Loading", "its supervisor is starting its replicas")
    return _not_ready(status, "False", NOT_SERVED,
                      "no live supervisor serves it (it was stopped or killed); millpond server starts one again")


def _not_ready(status: dict[str, Any], ready: str, reason: str, message: str) -> dict[str, Any]:
    for condition in status.get("conditions") or []:
        if condition.get("type") in ("Ready", "PredictorReady"):
            condition.update({"status": ready, "reason": reason, "message": message})
    status.pop("url", None)
    status.pop("address", None)
    predictor = (status.get("components") or {}).get("predictor") or {}
    predictor.pop("url", None)
    model = status.setdefault("modelStatus", {})
    active = "Loading" if ready == "Unknown" else "Pending"
    model["states"] = {**(model.get("states") or {}), "activeModelState": active}
    if ready == "False":
        model["lastFailureInfo"] = {"reason": reason, "message": message}
    return status

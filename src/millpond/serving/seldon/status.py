"""A SeldonDeployment's status as Seldon's operator writes it, and as it is (checked against its endpoints).

Seldon's shape (``seldon_deployment_status.go``): ``state`` (Creating, Available, Failed), ``description``
(why it failed), ``replicas``, ``address.url`` (the executor's ``/api/v1.0/predictions``: here the
deployment's own port), ``deploymentStatus`` (one entry per predictor's deployment, Seldon names it
``NAME-PREDICTOR-0-UNIT``, with ``replicas`` and ``availableReplicas``), ``serviceStatus``, and Knative-style
``conditions`` (``DeploymentsReady``, ``ServicesReady``, ``Ready``). Like an InferenceService's, the stored
status never claims Available once no live supervisor serves it (:func:`observed`).
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from millpond.serving import endpoints
from millpond.serving.seldon.graph import SeldonPredictor
from millpond.serving.seldon.kinds import KIND
from millpond.store.resources import Resource

AVAILABLE, CREATING, FAILED = "Available", "Creating", "Failed"
NOT_SERVED = "no live supervisor serves it (it was stopped or killed); millpond server starts one again"
PREDICTIONS = "/api/v1.0/predictions"


def deployment_name(name: str, predictor: SeldonPredictor) -> str:
    """Seldon's name of a predictor's Deployment: ``NAME-PREDICTOR-0-UNIT`` (its first componentSpec)."""
    return f"{name}-{predictor.name}-0-{predictor.unit}"


def status(name: str, state: str, description: str, predictors: list[SeldonPredictor], *, url: str | None = None,
           available: dict[str, int] | None = None) -> dict[str, Any]:
    """The status Seldon's operator writes; ``available`` is the replicas answering per predictor."""
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    ready = "True" if state == AVAILABLE else "False"
    reason = {AVAILABLE: "", CREATING: "Not all deployments ready", FAILED: description}[state]
    conditions = [{"type": kind, "status": ready, "lastTransitionTime": now, **({"reason": reason} if reason else {})}
                  for kind in ("DeploymentsReady", "Ready")]
    conditions.append({"type": "ServicesReady", "status": "True", "lastTransitionTime": now,
                       "reason": "All services created"})
    counts = available or {}
    shown: dict[str, Any] = {
        "state": state,
        "replicas": sum(p.spec.replicas for p in predictors),
        "deploymentStatus": {deployment_name(name, p): {"replicas": p.spec.replicas,
                                                       "availableReplicas": counts.get(p.name, 0)}
                             for p in predictors},
        "serviceStatus": {f"{name}-{p.name}": {"svcName": f"{name}-{p.name}",
                                               **({"httpEndpoint": url.removeprefix("http://")} if url else {})}
                          for p in predictors},
        "conditions": conditions,
    }
    if description and state != AVAILABLE:
        shown["description"] = description
    if url:
        shown["address"] = {"url": f"{url}{PREDICTIONS}"}
    return shown


def initial(name: str, predictors: list[SeldonPredictor]) -> dict[str, Any]:
    """Before a supervisor reports: Failed when a predictor with traffic cannot run here, else Creating."""
    served = [p for p in predictors if p.traffic > 0] or predictors
    failed = next((p for p in served if p.unservable), None)
    if failed is not None:
        return status(name, FAILED, f"predictor {failed.name}: {failed.unservable}", predictors)
    return status(name, CREATING, "no model server answers for it yet: its supervisor starts them", predictors)


def observed(resource: Resource) -> dict[str, Any]:
    """The stored status, unless it claims Available while no live supervisor of this object serves it."""
    shown = copy.deepcopy(dict(resource.status or {}))
    if shown.get("state") != AVAILABLE:
        return shown
    found = endpoints.read(resource.namespace, resource.name, KIND)
    if found is not None and found.uid == resource.uid and found.ready:
        return shown
    shown.update(state=FAILED if found is None else CREATING,
                 description=NOT_SERVED if found is None else "its supervisor is starting its replicas")
    shown.pop("address", None)
    for condition in shown.get("conditions") or []:
        if condition.get("type") in ("Ready", "DeploymentsReady"):
            condition.update(status="False", reason=shown["description"])
    return shown

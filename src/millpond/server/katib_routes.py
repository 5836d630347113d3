"""The Katib pages' reads under ``/ui-api/katib/``: Experiments with their status and best trial, and one
experiment with its trials, as Katib's UI backend (``pkg/new-ui/v1beta1``) gives its frontend.

- ``GET /ui-api/katib/experiments?namespace=NS`` (or ``all_namespaces=true``): each Experiment's line
  (``katib_views.experiment_row``: condition, trial counts, best trial and its objective value).
- ``GET /ui-api/katib/experiments/{namespace}/{name}``: that line, the search space, and every trial of the
  experiment (assignments, objective value, metrics, state), for the trials table and the plot.

The objects are those of the Kubernetes API (``kubectl get experiments,trials``), read through the kinds
registry; nothing else is stored for the pages. A trial's logs are its pods' (``/api/v1/.../pods/NAME/log``,
selected by Katib's ``katib.kubeflow.org/trial`` label): the page reads them from the Kubernetes API itself,
whose own checks apply.

Multi-user mode: a namespace's list needs ``list`` on ``experiments`` there; every namespace's list shows only
those where the caller may ``list`` them (``route_access.kind_scope``); one experiment needs ``get`` on it and
``list`` on ``trials`` in its namespace, asked before anything is read, as kube-apiserver asks.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from millpond.katib.kinds import EXPERIMENT, TRIAL
from millpond.kind_handler import KindContext
from millpond.kinds import REGISTRY
from millpond.server.katib_views import experiment_detail, experiment_row, is_trial_of
from millpond.server.route_access import kind_scope, require_kind, shows
from millpond.server.state import state_of

router = APIRouter(tags=["Katib"])
PREFIX = "/ui-api/katib"


def _context(request: Request) -> KindContext:
    return KindContext(state_of(request).settings)


@router.get(f"{PREFIX}/experiments")
def list_experiments(request: Request, namespace: str = "default", all_namespaces: bool = False) -> dict[str, Any]:
    """The Experiments page: one line per experiment of the namespace (or of every namespace the caller sees)."""
    experiment = EXPERIMENT
    handler = REGISTRY.handler(experiment)
    if all_namespaces:
        found = handler.list_objects(experiment, "", True, _context(request))
        scope = kind_scope(request, experiment,
                           lambda: {str((one.get("metadata") or {}).get("namespace") or "default") for one in found})
        shown = [one for one in found if shows(scope, str((one.get("metadata") or {}).get("namespace") or "default"))]
    else:
        require_kind(request, experiment, "list", namespace)
        shown = handler.list_objects(experiment, namespace, False, _context(request))
    rows = [experiment_row(one) for one in shown]
    return {"experiments": sorted(rows, key=lambda row: (row["namespace"], row["created"], row["name"]))}


@router.get(f"{PREFIX}/experiments/{{namespace}}/{{name}}")
def get_experiment(namespace: str, name: str, request: Request) -> dict[str, Any]:
    """One experiment: its line, its search space and its trials (404 as ``kubectl get`` says it)."""
    experiment, trial = EXPERIMENT, TRIAL
    require_kind(request, experiment, "get", namespace, name)
    require_kind(request, trial, "list", namespace)
    context = _context(request)
    found = REGISTRY.handler(experiment).get(experiment, name, namespace, context)
    trials = [one for one in REGISTRY.handler(trial).list_objects(trial, namespace, False, context)
              if is_trial_of(one, name)]
    return experiment_detail(found, trials)

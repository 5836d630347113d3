"""The Notebooks page's backend: the Jupyter web app's API (``crud-web-apps/jupyter/backend``) under ``/ui-api/``.

Upstream's routes, here under ``/ui-api`` (``/api/...`` is the Kubernetes API on this server):

- ``GET /ui-api/notebooks/config``: the spawner form's defaults (JWA's ``GET /api/config``), with what this
  machine can hold.
- ``GET /ui-api/namespaces/{namespace}/notebooks``: the namespace's notebooks as the list shows them
  (``notebooks.views``: status, image, CPU, memory, GPUs, last activity, age, Connect's URL).
- ``POST /ui-api/namespaces/{namespace}/notebooks``: the form's body made into a Notebook and its new workspace PVC
  (``notebooks.spawner``); each field checked first (a FieldError: 400 naming the field in ``field``), then both
  created dry-run, then for real, as upstream's ``post_pvc`` does: nothing is created when any of it is refused
  (as upstream, a Notebook refused after its PVC was made, which only a race with another writer can cause,
  leaves that PVC: a workspace, kept as a PVC is).
- ``PATCH /ui-api/namespaces/{namespace}/notebooks/{name}``: ``{"stopped": true}`` sets the
  ``kubeflow-resource-stopped`` annotation (its value: now), ``{"stopped": false}`` removes it (JWA's
  ``start_stop_notebook``; stopping a stopped one is 409 as upstream).
- ``DELETE /ui-api/namespaces/{namespace}/notebooks/{name}``: the Notebook (its workspace PVC stays).
- ``GET /ui-api/namespaces/{namespace}/pvcs``: the namespace's PVCs (JWA's ``name, size, mode``), with
  ``dataset`` for the one Fluid makes for a bound Dataset: what the form offers as volumes.

Every write goes through the Kubernetes API this server serves (``server.kube``'s ``Resources``: the checks of
``kubectl apply``, watches see it), as upstream's backend calls kube-apiserver. Multi-user mode: each route asks
the one Authorizer what ``kubectl`` would be asked for the same objects (``list``/``create``/``patch``/
``delete`` on ``notebooks`` of ``kubeflow.org``; ``create`` on ``persistentvolumeclaims`` for a new workspace;
``list`` on them for the PVCs), before anything is read; upstream's backend asks a SubjectAccessReview the
same way.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse

from millpond.core.volumes import volumes
from millpond.errors import UserError
from millpond.kind_handler import KindContext
from millpond.kinds import REGISTRY
from millpond.names import label_problem
from millpond.notebooks import spawner
from millpond.notebooks.kinds import NOTEBOOK, STOP_ANNOTATION
from millpond.notebooks.views import notebook_row
from millpond.server.callers import caller
from millpond.server.errors import ApiError, error_response
from millpond.server.kube import patches
from millpond.server.kube.objects import Resources, WriteOptions
from millpond.server.kube.status import KubeError
from millpond.server.route_access import require_kind
from millpond.server.state import state_of

router = APIRouter(tags=["Notebooks"])
_NAMESPACED = "/ui-api/namespaces/{namespace}"


def _resources(request: Request) -> Resources:
    found: Resources = request.app.state.kube.resources
    return found


def _field_error(exc: spawner.FieldError) -> JSONResponse:
    answer = error_response(exc.status, str(exc))
    body = json.loads(bytes(answer.body))  # KFP's shape ({error, code, message, details}), with the field
    return JSONResponse({**body, "field": exc.field}, status_code=exc.status)


def _checked_name(name: str) -> str:
    problem = label_problem(name)
    if problem:
        raise ApiError(400, f"notebook name {name[:253]!r}: {problem}")
    return name


def _kube_failure(exc: KubeError, field: str) -> JSONResponse:
    return _field_error(spawner.FieldError(field, exc.message, exc.code if 400 <= exc.code < 500 else 400))


@router.get("/ui-api/notebooks/config")
def notebooks_config(request: Request) -> dict[str, Any]:
    """The spawner form's defaults (JWA's ``spawnerFormDefaults``)."""
    return {"config": spawner.spawner_config(state_of(request).settings)}


@router.get(f"{_NAMESPACED}/notebooks")
def list_notebooks(namespace: str, request: Request) -> dict[str, Any]:
    require_kind(request, NOTEBOOK, "list", namespace)
    shown = REGISTRY.handler(NOTEBOOK).list_objects(NOTEBOOK, namespace, False,
                                                    KindContext(state_of(request).settings))
    return {"notebooks": sorted((notebook_row(one) for one in shown), key=lambda row: row["name"])}


def _claims(request: Request, namespace: str) -> dict[str, spawner.Claim]:
    context = KindContext(state_of(request).settings, caller(request))
    return {one.claim["metadata"]["name"]: spawner.Claim(one.claim["metadata"]["name"], one.fluid)
            for one in volumes(context, namespace)}


@router.post(f"{_NAMESPACED}/notebooks", response_model=None)
def create_notebook(namespace: str, request: Request, body: Any = Body(None)) -> dict[str, Any] | JSONResponse:
    """The form's Notebook (and new workspace PVC): all checked, then created; one error naming the field."""
    asked = str(body.get("name") or "").strip() if isinstance(body, dict) and isinstance(body.get("name"), str) else ""
    require_kind(request, NOTEBOOK, "create", namespace, asked)
    user = caller(request)
    resources = _resources(request)
    if asked and not label_problem(asked) and _exists(resources, namespace, asked, user):  # before its workspace's
        return _field_error(spawner.FieldError("name", f"Notebook {asked!r} already exists in {namespace}", 409))
    try:
        spawn = spawner.build(namespace, body, user, _claims(request, namespace), state_of(request).settings)
    except spawner.FieldError as exc:
        return _field_error(exc)
    if spawn.new_claim is not None:
        require_kind(request, REGISTRY["PersistentVolumeClaim"], "create", namespace,
                     spawn.new_claim["metadata"]["name"])
    for dry_run in (True, False):  # upstream's order: every object dry-run first, then the PVC, then the Notebook
        if spawn.new_claim is not None:
            try:
                resources.create(REGISTRY["PersistentVolumeClaim"], namespace, spawn.new_claim,
                                 WriteOptions(dry_run=dry_run), user)
            except KubeError as exc:
                return _kube_failure(exc, "workspace")
        try:
            resources.create(NOTEBOOK, namespace, spawn.notebook, WriteOptions(dry_run=dry_run), user)
        except KubeError as exc:
            return _kube_failure(exc, "name" if exc.code == 409 else "notebook")
    return {"message": "Notebook created successfully.",
            "notebook": {"name": spawn.notebook["metadata"]["name"], "namespace": namespace}}


def _exists(resources: Resources, namespace: str, name: str, user: str) -> bool:
    try:
        resources.get(NOTEBOOK, namespace, name, user)
    except KubeError as exc:
        if exc.code == 404:
            return False
        raise
    return True


@router.patch(f"{_NAMESPACED}/notebooks/{{name}}")
def patch_notebook(namespace: str, name: str, request: Request, body: Any = Body(None)) -> dict[str, Any]:
    """JWA's ``{"stopped": bool}``: the ``kubeflow-resource-stopped`` annotation set (now) or removed."""
    require_kind(request, NOTEBOOK, "patch", namespace, _checked_name(name))
    if not isinstance(body, dict) or not isinstance(body.get("stopped"), bool):
        raise ApiError(400, "stopped: the body must be {\"stopped\": true} or {\"stopped\": false}")
    resources = _resources(request)
    user = caller(request)
    try:
        live = resources.get(NOTEBOOK, namespace, name, user)
        if body["stopped"] and STOP_ANNOTATION in (live["metadata"].get("annotations") or {}):
            raise ApiError(409, f"Notebook {namespace}/{name} is already stopped.")
        when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch = {"metadata": {"annotations": {STOP_ANNOTATION: when if body["stopped"] else None}}}
        resources.patch(NOTEBOOK, namespace, name, patches.MERGE, json.dumps(patch).encode(), WriteOptions(), user)
    except KubeError as exc:
        raise ApiError(exc.code, exc.message) from None
    return {"message": f"Notebook {name} {'stopped' if body['stopped'] else 'started'}."}


@router.delete(f"{_NAMESPACED}/notebooks/{{name}}")
def delete_notebook(namespace: str, name: str, request: Request) -> dict[str, Any]:
    """The Notebook and every process it started; its workspace PVC stays, as upstream's."""
    require_kind(request, NOTEBOOK, "delete", namespace, _checked_name(name))
    try:
        _resources(request).delete(NOTEBOOK, namespace, name, False, caller(request))
    except KubeError as exc:
        raise ApiError(exc.code, exc.message) from None
    return {"message": f"Notebook {name} successfully deleted."}


@router.get(f"{_NAMESPACED}/pvcs")
def list_pvcs(namespace: str, request: Request) -> dict[str, Any]:
    """JWA's PVC list (name, size, mode), and which are Fluid Datasets' (``dataset``)."""
    require_kind(request, REGISTRY["PersistentVolumeClaim"], "list", namespace)
    try:
        claims = list(volumes(KindContext(state_of(request).settings, caller(request)), namespace))
    except UserError as exc:
        raise ApiError(400, str(exc)) from None
    return {"pvcs": [{"name": one.claim["metadata"]["name"],
                      "size": one.claim["spec"]["resources"]["requests"].get("storage", ""),
                      "mode": (one.claim["spec"].get("accessModes") or [""])[0], "dataset": one.fluid}
                     for one in claims]}

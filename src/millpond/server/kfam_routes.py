"""Kubeflow's access management API (KFAM, ``kubeflow/dashboard`` ``components/access-management``), what the
central dashboard's "Manage contributors" page calls, with KFAM's paths and JSON shapes:

- ``GET /kfam/v1/bindings[?user=&namespace=&role=]``: ``{"bindings": [{"user": {"kind", "name"},
  "referredNamespace", "RoleRef": {"apiGroup", "kind", "name"}}]}`` (every profile's namespace without
  ``namespace``; ``bindings`` left out when there is none, as KFAM's ``omitempty`` does);
- ``POST /kfam/v1/bindings`` and ``DELETE /kfam/v1/bindings`` with one such binding as the body (``roleRef``
  as the dashboard spells it, or ``RoleRef``): only the profile's owner or a cluster administrator (KFAM's
  ``isOwnerOrAdmin``), decided by the server's one authorizer for the authenticated caller;
- ``GET /kfam/v1/role/clusteradmin?user=``: ``true`` or ``false``.

Where KFAM answers a refusal with an empty 403 (or 401), millpond says why in KFP's error shape: 401 without
an identity (the request guard, multi-user mode), 403 for a caller who may not, 404 for no such profile or
binding, 409 for a binding that exists, 400 for a malformed one. As in KFAM, any authenticated caller may
read the bindings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Body, Query, Request, Response

from millpond.access.identity import user
from millpond.core import contributors
from millpond.server.callers import authorizer_of, identity_of
from millpond.settings import Settings

router = APIRouter(prefix="/kfam/v1", tags=["KFAM"])


@router.get("/bindings")
def read_bindings(request: Request, user_name: str = Query("", alias="user"), namespace: str = "",
                  role: str = "") -> dict[str, Any]:
    settings = authorizer_of(request).settings
    found = contributors.listed(settings, user_name, [namespace] if namespace else None, role)
    return {"bindings": [binding.as_kfam() for binding in found]} if found else {}


def _manage(request: Request, body: Any, change: Callable[[Settings, contributors.Binding], None]) -> Response:
    """KFAM's create and delete: the binding checked, the caller allowed (owner or administrator), then ``change``."""
    binding = contributors.from_kfam(body)
    authorizer = authorizer_of(request)
    contributors.may_manage(authorizer, identity_of(request), binding.namespace)
    change(authorizer.settings, binding)
    return Response(status_code=200, media_type="application/json")


@router.post("/bindings")
def create_binding(request: Request, body: Any = Body(None)) -> Response:
    return _manage(request, body, contributors.add)


@router.delete("/bindings")
def delete_binding(request: Request, body: Any = Body(None)) -> Response:
    return _manage(request, body, contributors.remove)


@router.get("/role/clusteradmin")
def query_cluster_admin(request: Request, user_name: str = Query("", alias="user")) -> Response:
    """KFAM's answer is the bare JSON boolean; no user is no administrator."""
    admin = bool(user_name) and contributors.is_cluster_admin(authorizer_of(request), user(user_name, "kfam"))
    return Response("true" if admin else "false", media_type="application/json")

"""Every Kubernetes API request decided by the server's one Authorizer, with the attributes kube-apiserver gives it.

``attributes_of`` is k8s.io/apiserver's ``RequestInfoFactory`` for the paths this API serves: the HTTP
method names the verb (GET ``get``, or ``list`` for a collection, ``watch`` with ``?watch=true``; POST
``create``; PUT ``update``; PATCH ``patch``; DELETE ``delete``, or ``deletecollection`` for a collection), the
path the group, namespace, resource, name and subresource (``pods/log``, ``*/status``); a request on
``/api/v1/namespaces/NAME`` carries ``namespace=NAME``, so a RoleBinding in that namespace may grant ``get
namespaces`` on it; a collection asked without a namespace (``kubectl get pods -A``) is asked cluster-wide,
which only a ClusterRoleBinding grants. A list with ``fieldSelector=metadata.name=X`` names X, as upstream.
Discovery, ``/version`` and ``/openapi`` are non-resource requests (a path and the lower-cased method),
granted to every authenticated user by the built-in ``system:discovery`` binding.

A refusal is kube-apiserver's (``responsewriters.Forbidden`` through ``apierrors.NewForbidden``): a ``Status``
403 with reason ``Forbidden``, the message ``RESOURCE[.GROUP] ["NAME" ]is forbidden: User "bob" cannot …``
(``forbidden: User …`` for a path) and details naming the group, resource and name.

Impersonation (``Impersonate-User``/``-Group``/``-Uid``/``-Extra-*``, what ``kubectl --as`` sends) is
upstream's filter in small: the caller must be allowed the ``impersonate`` verb on ``users`` (and
``groups``) of those names, which only ``system:masters`` and ``cluster-admin`` hold by default; the request
then acts as the named user (with ``system:authenticated``). Simplified: ``Impersonate-Uid`` and extras
are checked but carried nowhere (millpond's identities have neither). A single-user server ignores the
headers, as it ignores who asks.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.requests import Request

from millpond.access.attributes import Attributes
from millpond.access.authorizer import Authorizer
from millpond.access.identity import AUTHENTICATED, Identity
from millpond.server.callers import authorizer_of, identity_of
from millpond.server.kube import paths
from millpond.server.kube.status import KubeError

_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
IMPERSONATE_USER, IMPERSONATE_GROUP, IMPERSONATE_UID = "impersonate-user", "impersonate-group", "impersonate-uid"
_IMPERSONATE_EXTRA = "impersonate-extra-"


def resource_attributes(method: str, target: paths.ResourcePath, query: Mapping[str, str]) -> Attributes:
    """The attributes of a request on a resource path (``RequestInfoFactory.NewRequestInfo``)."""
    verb = _VERBS.get(method.upper(), method.lower())
    name = target.name
    namespace = target.namespace
    if target.resource == "namespaces" and not target.group and name:
        namespace = name  # /api/v1/namespaces/NAME[/status|finalize]: the namespace is the one named
    if not name and verb == "get":
        verb = "list"
    if verb in ("get", "list") and (query.get("watch") or "").lower() in ("1", "true"):
        verb = "watch"
    if not name and verb == "delete":
        verb = "deletecollection"
    if not name and verb in ("list", "watch", "deletecollection"):
        for selector in (query.get("fieldSelector") or "").split(","):
            key, _, value = selector.partition("=")
            value = value.removeprefix("=").strip()  # metadata.name=X or metadata.name==X
            if key.strip() == "metadata.name" and value:
                name = value
    return Attributes(verb, namespace, target.group, target.resource, target.subresource, name)


def path_attributes(method: str, path: str) -> Attributes:
    """The attributes of a non-resource request (discovery, ``/version``, ``/openapi``)."""
    return Attributes(method.lower(), path=path)


def forbidden(asked: Attributes, user: str, reason: str = "") -> KubeError:
    """kube-apiserver's 403 for ``user`` asking ``asked``, in its words."""
    said = asked.describe(user) + (f": {reason}" if reason else "")
    if not asked.resource_request:
        return KubeError(403, f"forbidden: {said}", "Forbidden")
    qualified = f"{asked.resource}.{asked.api_group}" if asked.api_group else asked.resource
    subject = f'{qualified} "{asked.name}"' if asked.name else qualified
    return KubeError(403, f"{subject} is forbidden: {said}", "Forbidden",
                     {"name": asked.name, "group": asked.api_group, "kind": asked.resource})


def authorize(request: Request, asked: Attributes) -> None:
    """Nothing when the caller may do what ``asked`` says; the 403 ``Status`` otherwise."""
    identity = identity_of(request)
    decision = authorizer_of(request).decide(identity, asked)
    if not decision.allowed:
        raise forbidden(asked, identity.name)


def impersonated(request: Request) -> Identity | None:
    """The identity ``Impersonate-*`` headers ask for, once the caller may impersonate it; None without them."""
    headers = request.headers
    wanted = headers.get(IMPERSONATE_USER)
    groups = tuple(value.strip() for key, value in headers.items() if key == IMPERSONATE_GROUP and value.strip())
    asks = wanted is not None or groups or IMPERSONATE_UID in headers or any(
        key.startswith(_IMPERSONATE_EXTRA) for key in headers)
    authorizer: Authorizer = authorizer_of(request)
    if not asks or not authorizer.multi_user:
        return None
    if not wanted or not wanted.strip():
        raise KubeError(500, "requested impersonation of groups or extras without a user (Impersonate-User)",
                        "InternalError")
    wanted = wanted.strip()
    for resource, name in [("users", wanted), *(("groups", group) for group in groups)]:
        authorize(request, Attributes("impersonate", resource=resource, name=name))
    if headers.get(IMPERSONATE_UID):
        authorize(request, Attributes("impersonate", api_group="authentication.k8s.io", resource="uids",
                                      name=headers[IMPERSONATE_UID]))
    all_groups = groups if AUTHENTICATED in groups else (*groups, AUTHENTICATED)
    return Identity(wanted, all_groups, "impersonated")


def act_as(request: Request, identity: Identity) -> None:
    """Make ``identity`` the caller for the rest of the request (after impersonation)."""
    request.scope.setdefault("state", {})["identity"] = identity

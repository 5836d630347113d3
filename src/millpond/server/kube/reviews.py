"""The access reviews: ``authorization.k8s.io/v1`` and ``authentication.k8s.io/v1``'s create-only virtual resources.

What ``kubectl auth`` sends, answered from the same Authorizer that decides every request:

- ``SelfSubjectAccessReview`` (``kubectl auth can-i VERB RESOURCE [NAME] [-n NS] [--subresource S]``): may the
  caller do this? ``status.allowed`` (and ``reason``, the binding that allows it).
- ``SelfSubjectRulesReview`` (``kubectl auth can-i --list [-n NS]``): the caller's rules in a namespace
  (``resourceRules``, ``nonResourceRules``; ``incomplete`` is false: every rule is RBAC's).
- ``SubjectAccessReview`` (cluster-wide) and ``LocalSubjectAccessReview`` (in a namespace, for a namespace's
  admin): may *another* identity (``spec.user``, ``spec.groups``) do it?
- ``SelfSubjectReview`` (``kubectl auth whoami``): the caller's user name and groups.

Creating one is authorized like any request (``create`` on the resource: ``system:basic-user`` grants the
self reviews to everyone, ``cluster-admin`` the others, ``admin`` the local one); nothing is stored: the
answer is the object with its ``status``, as the API server's registries answer (status 201).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from millpond.access.attributes import Attributes
from millpond.access.authorizer import Authorizer
from millpond.access.identity import Identity
from millpond.server.kube.status import KubeError

AUTHORIZATION, AUTHENTICATION = "authorization.k8s.io", "authentication.k8s.io"


@dataclass(frozen=True)
class Review:
    """One virtual resource: created only, never stored."""

    group: str
    kind: str
    plural: str
    namespaced: bool = False
    version: str = "v1"


REVIEWS = (
    Review(AUTHORIZATION, "SelfSubjectAccessReview", "selfsubjectaccessreviews"),
    Review(AUTHORIZATION, "SelfSubjectRulesReview", "selfsubjectrulesreviews"),
    Review(AUTHORIZATION, "SubjectAccessReview", "subjectaccessreviews"),
    Review(AUTHORIZATION, "LocalSubjectAccessReview", "localsubjectaccessreviews", namespaced=True),
    Review(AUTHENTICATION, "SelfSubjectReview", "selfsubjectreviews"),
)


def find(group: str, version: str, plural: str) -> Review | None:
    return next((one for one in REVIEWS if (one.group, one.version, one.plural) == (group, version, plural)), None)


def of_group(group: str, version: str) -> list[Review]:
    return [one for one in REVIEWS if one.group == group and one.version == version]


def answer(review: Review, body: Any, namespace: str, caller: Identity, authorizer: Authorizer) -> dict[str, Any]:
    """The review ``body`` answered for ``caller`` (the object with its ``status``); 400 when it is malformed."""
    if not isinstance(body, dict):
        raise KubeError(400, "the body of the request must be a JSON or YAML object")
    api_version = f"{review.group}/{review.version}"
    if body.get("apiVersion", api_version) != api_version or body.get("kind", review.kind) != review.kind:
        raise KubeError(400, f"the API version or kind in the data ({body.get('apiVersion')}, {body.get('kind')}) "
                             f"does not match the URL's ({api_version}, {review.kind})")
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise KubeError(400, "spec: expected an object")
    given = body.get("metadata")
    metadata: dict[str, Any] = given if isinstance(given, dict) else {}
    shown: dict[str, Any] = {"kind": review.kind, "apiVersion": api_version,
                             "metadata": {**metadata, "creationTimestamp": None}, "spec": spec}
    if review.kind == "SelfSubjectReview":
        shown["status"] = {"userInfo": {"username": caller.name, "groups": list(caller.groups)}}
    elif review.kind == "SelfSubjectRulesReview":
        shown["status"] = _rules(authorizer, caller, str(spec.get("namespace") or ""))
    else:
        subject = caller if review.kind == "SelfSubjectAccessReview" else _subject(review, spec)
        asked = _asked(review, spec, namespace)
        decision = authorizer.decide(subject, asked)
        status: dict[str, Any] = {"allowed": decision.allowed}
        if decision.allowed:
            status["reason"] = decision.reason
        shown["status"] = status
    return shown


def _subject(review: Review, spec: Mapping[str, Any]) -> Identity:
    """The identity a SubjectAccessReview asks about (``spec.user`` and ``spec.groups``)."""
    name = spec.get("user")
    groups = spec.get("groups") or []
    if not isinstance(groups, list) or not all(isinstance(group, str) for group in groups):
        raise KubeError(400, "spec.groups: expected a list of strings")
    if not (isinstance(name, str) and name) and not groups:
        raise KubeError(422, f'{review.kind}.{AUTHORIZATION} "" is invalid: spec.user: Invalid value: "": at least '
                             "one of user or group must be specified", "Invalid")
    return Identity(name if isinstance(name, str) else "", tuple(groups), "review")


def _asked(review: Review, spec: Mapping[str, Any], namespace: str) -> Attributes:
    resource, path = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if isinstance(resource, dict) == isinstance(path, dict):
        raise KubeError(422, f'{review.kind}.{AUTHORIZATION} "" is invalid: spec.resourceAttributes: Invalid value: '
                             '"": exactly one of nonResourceAttributes or resourceAttributes must be specified',
                        "Invalid")
    if isinstance(path, dict):
        return Attributes(str(path.get("verb") or ""), path=str(path.get("path") or ""))
    assert isinstance(resource, dict)
    asked_namespace = str(resource.get("namespace") or "")
    if review.namespaced and asked_namespace != namespace:
        raise KubeError(422, f'{review.kind}.{AUTHORIZATION} "" is invalid: spec.resourceAttributes.namespace: '
                             f'Invalid value: "{asked_namespace}": must match metadata.namespace', "Invalid")
    return Attributes(str(resource.get("verb") or ""), asked_namespace, str(resource.get("group") or ""),
                      str(resource.get("resource") or ""), str(resource.get("subresource") or ""),
                      str(resource.get("name") or ""))


def _rules(authorizer: Authorizer, caller: Identity, namespace: str) -> dict[str, Any]:
    resource_rules: list[dict[str, Any]] = []
    url_rules: list[dict[str, Any]] = []
    for rule in dict.fromkeys(authorizer.rules(caller, namespace)):  # a rule two bindings grant, once
        shown = rule.as_manifest()
        (url_rules if rule.non_resource_urls else resource_rules).append(shown)
    return {"resourceRules": resource_rules, "nonResourceRules": url_rules, "incomplete": False}


"""Kubernetes' rules for namespaces and object names, with kube-apiserver's words, in one place.

A namespace is a DNS-1123 label (``[a-z0-9]([-a-z0-9]*[a-z0-9])?``, at most 63 characters) in
every kind, on the command line and in the REST API; most object names are DNS-1123 subdomains
(labels joined by '.', at most 253). Both end up in URL paths (``/jobs/NAMESPACE/NAME``) and some
in file names under the home, so a value that breaks them ('../x', 'KUBE', '<img src=x>') must be
refused where it comes in, not stored and then found unreachable. The messages are
``k8s.io/apimachinery/pkg/util/validation``'s, so a user sees what ``kubectl`` would show.

Part of the floor every layer stands on: it imports no layer.
"""

from __future__ import annotations

import json
import re

from millpond.errors import UserError

LABEL_MAX = 63
SUBDOMAIN_MAX = 253
_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = rf"{_LABEL_FMT}(\.{_LABEL_FMT})*"
LABEL = re.compile(_LABEL_FMT)
SUBDOMAIN = re.compile(_SUBDOMAIN_FMT)

# validation.go's dns1123LabelErrMsg and dns1123SubdomainErrorMsg, with RegexError's examples
LABEL_MESSAGE = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
                 "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                 f"validation is '{_LABEL_FMT}')")
SUBDOMAIN_MESSAGE = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                     "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                     f"validation is '{_SUBDOMAIN_FMT}')")


def label_problem(value: str) -> str | None:
    """Why ``value`` is no DNS-1123 label (kube-apiserver's words), or None when it is one."""
    if len(value) > LABEL_MAX:
        return f"must be no more than {LABEL_MAX} characters"
    return None if LABEL.fullmatch(value) else LABEL_MESSAGE


def subdomain_problem(value: str) -> str | None:
    """Why ``value`` is no DNS-1123 subdomain (kube-apiserver's words), or None when it is one."""
    if len(value) > SUBDOMAIN_MAX:
        return f"must be no more than {SUBDOMAIN_MAX} characters"
    return None if SUBDOMAIN.fullmatch(value) else SUBDOMAIN_MESSAGE


def invalid(where: str, value: str, problem: str) -> UserError:
    """A field error as kube-apiserver words it: ``WHERE: Invalid value: "VALUE": PROBLEM``, on one line (a value
    with a character that is not printable, a line break included, is shown with every non-ASCII one escaped)."""
    shown = json.dumps(value, ensure_ascii=not value.isprintable())
    return UserError(f"{where}: Invalid value: {shown}: {problem}")


def check_label(value: str, where: str) -> str:
    """``value`` when it is a DNS-1123 label; UserError naming ``where`` and the value otherwise."""
    problem = label_problem(value)
    if problem:
        raise invalid(where, value, problem)
    return value


def check_namespace(value: str, where: str = "metadata.namespace") -> str:
    """``value`` when it is a namespace (a DNS-1123 label); UserError naming ``where`` and the value otherwise."""
    return check_label(value, where)


# Kinds whose names are path segments, not DNS subdomains (``ValidateRBACName``): Kubeflow's ``namespaceAdmin``.
PATH_SEGMENT_KINDS = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})


def path_segment_problem(value: str) -> str | None:
    """Why ``value`` is no path-segment name (kube-apiserver's words; also printable, at most 253), or None."""
    if value in (".", ".."):
        return f"may not be '{value}'"
    for forbidden in ("/", "%"):
        if forbidden in value:
            return f"may not contain '{forbidden}'"
    if not value or len(value) > SUBDOMAIN_MAX or not value.isprintable() or any(c.isspace() for c in value):
        return f"must be 1 to {SUBDOMAIN_MAX} printable characters without spaces"
    return None


def check_object_name(value: str, where: str = "metadata.name", kind: str = "") -> str:
    """``value`` when it is an object name (a DNS-1123 subdomain; a path segment for ``PATH_SEGMENT_KINDS``);
    UserError naming ``where`` otherwise."""
    problem = (path_segment_problem if kind in PATH_SEGMENT_KINDS else subdomain_problem)(value)
    if problem:
        raise invalid(where, value, problem)
    return value

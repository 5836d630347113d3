"""Label and field selectors as the API server reads them (``labelSelector=``, ``fieldSelector=``).

Labels: ``millpond.label_selectors`` (equality and set-based requirements, as
``k8s.io/apimachinery/pkg/labels`` reads them).
Fields: ``path=value``, ``path==value``, ``path!=value`` over the object's dotted paths
(``metadata.name``, ``metadata.namespace``, ``status.phase``, an Event's ``involvedObject.uid``).
Simplified: the API server allows only the field paths each kind declares; here any path of the
object may be selected on.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from millpond import label_selectors
from millpond.errors import UserError
from millpond.server.kube.status import KubeError

Match = Callable[[dict[str, Any]], bool]


def labels(text: str) -> Match:
    """Whether an object's labels satisfy ``labelSelector`` (``millpond.label_selectors``' grammar, the one
    ``millpond get -l`` reads); 400 naming the part that is not a requirement."""
    try:
        selector = label_selectors.parse(text)
    except UserError as exc:
        raise KubeError(400, str(exc)) from None
    return lambda obj: selector.matches((obj.get("metadata") or {}).get("labels") or {})


def fields(text: str) -> Match:
    """Whether an object's fields satisfy ``fieldSelector`` (only ``=``, ``==`` and ``!=``, as upstream)."""
    checks: list[tuple[list[str], str, bool]] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        found = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*(==|=|!=)\s*(.*)", part)
        if found is None:
            raise KubeError(400, f"invalid field selector {part!r}: expected FIELD=VALUE or FIELD!=VALUE")
        checks.append((found[1].split("."), found[3], found[2] == "!="))
    return lambda obj: all((_value(obj, path) != value) if negated else (_value(obj, path) == value)
                           for path, value, negated in checks)


def _value(obj: Any, path: list[str]) -> str:
    for part in path:
        obj = obj.get(part) if isinstance(obj, dict) else None
    if obj is None:
        return ""
    return str(obj).lower() if isinstance(obj, bool) else str(obj)

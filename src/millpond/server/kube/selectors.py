"""Label and field selectors as the API server reads them (``labelSelector=``, ``fieldSelector=``).

Labels: equality (``a=b``, ``a==b``, ``a!=b``) and set-based (``a in (x,y)``, ``a notin (x)``, ``a``,
``!a``) requirements, comma-separated, all of which must hold (``k8s.io/apimachinery/pkg/labels``).
Fields: ``path=value``, ``path==value``, ``path!=value`` over the object's dotted paths
(``metadata.name``, ``metadata.namespace``, ``status.phase``, an Event's ``involvedObject.uid``).
Simplified: the API server allows only the field paths each kind declares; here any path of the
object may be selected on.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from millpond.server.kube.status import KubeError

Match = Callable[[dict[str, Any]], bool]
_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_REQUIREMENT = re.compile(
    rf"\s*(?:(?P<not>!)\s*(?P<absent>{_KEY})"
    rf"|(?P<setkey>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)"
    rf"|(?P<key>{_KEY})\s*(?P<eq>==|=|!=)\s*(?P<value>[-A-Za-z0-9_.]*)"
    rf"|(?P<exists>{_KEY}))\s*(?:,|$)")


def _requirements(text: str, what: str) -> list[Match]:
    matches: list[Match] = []
    position = 0
    text = text.strip()
    while position < len(text):
        found = _REQUIREMENT.match(text, position)
        if found is None or found.end() == position:
            raise KubeError(400, f"unable to parse requirement: invalid {what} selector {text!r} at {position}")
        matches.append(_one(found))
        position = found.end()
    return matches


def _one(found: re.Match[str]) -> Match:
    if found["absent"]:
        key = found["absent"]
        return lambda labels: key not in labels
    if found["setkey"]:
        key, values = found["setkey"], {v.strip() for v in found["values"].split(",") if v.strip()}
        if found["op"] == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if found["key"]:
        key, value = found["key"], found["value"]
        if found["eq"] == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    key = found["exists"]
    return lambda labels: key in labels


def labels(text: str) -> Match:
    """Whether an object's labels satisfy ``labelSelector``."""
    requirements = _requirements(text, "label") if text.strip() else []
    return lambda obj: all(match((obj.get("metadata") or {}).get("labels") or {}) for match in requirements)


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

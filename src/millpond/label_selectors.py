"""Kubernetes' label selectors as ``kubectl get -l`` and the API's ``labelSelector=`` write them.

``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x)``, ``a`` (exists), ``!a`` (does not exist),
requirements joined by commas, all of which must hold (``k8s.io/apimachinery/pkg/labels``'s
grammar). On the floor: any command or route filters any kind's objects with it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from millpond.errors import UserError

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"\s*({_KEY})\s+(in|notin)\s+\(\s*([^()]*)\)\s*")
_COMPARE = re.compile(rf"\s*({_KEY})\s*(==|!=|=)\s*({_VALUE})\s*")
_EXISTS = re.compile(rf"\s*(!?)\s*({_KEY})\s*")


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # in, notin, exists, !
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "exists":
            return self.key in labels
        if self.operator == "!":
            return self.key not in labels
        if self.operator == "in":
            return labels.get(self.key) in self.values
        return labels.get(self.key) not in self.values  # notin: a missing key matches, as in Kubernetes


@dataclass(frozen=True)
class Selector:
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        return all(requirement.matches(labels or {}) for requirement in self.requirements)


def _split(text: str) -> list[str]:
    """The requirements of ``text``: commas inside ``( )`` belong to a set."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def parse(text: str) -> Selector:
    """The selector ``text`` says; UserError (one line) naming the part that is not one."""
    requirements = []
    for part in _split(text) if text.strip() else []:
        found = _SET.fullmatch(part)
        if found:
            values = frozenset(value.strip() for value in found.group(3).split(",") if value.strip())
            requirements.append(Requirement(found.group(1), found.group(2), values))
            continue
        found = _COMPARE.fullmatch(part)
        if found:
            operator = "notin" if found.group(2) == "!=" else "in"
            requirements.append(Requirement(found.group(1), operator, frozenset({found.group(3)})))
            continue
        found = _EXISTS.fullmatch(part)
        if found:
            requirements.append(Requirement(found.group(2), "!" if found.group(1) else "exists"))
            continue
        raise UserError(f"unable to parse requirement: {part.strip()!r} in label selector {text!r}")
    return Selector(tuple(requirements))


_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def of_object(selector: Mapping[str, object]) -> Selector:
    """A ``metav1.LabelSelector`` object (``matchLabels`` and ``matchExpressions``) as a :class:`Selector`;
    an expression whose operator is not one of Kubernetes' four matches nothing (as an invalid selector
    selects nothing)."""
    requirements = []
    labels = selector.get("matchLabels")
    for key, value in (labels.items() if isinstance(labels, Mapping) else ()):
        requirements.append(Requirement(str(key), "in", frozenset({str(value)})))
    expressions = selector.get("matchExpressions")
    for expression in expressions if isinstance(expressions, list) else ():
        if not isinstance(expression, Mapping):
            continue
        operator = _OPERATORS.get(str(expression.get("operator", "")))
        values = expression.get("values")
        listed = frozenset(str(one) for one in values) if isinstance(values, list) else frozenset()
        requirements.append(Requirement(str(expression.get("key", "")), operator or "in",
                                        listed if operator else frozenset()))
    return Selector(tuple(requirements))

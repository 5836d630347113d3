"""Typed reading of a parsed YAML document: each accessor returns its type or refuses, naming where.

Shared by the readers of a workflow's parts (``reader``, ``pods``, ``volume_ops``), so every
refusal reads the same: ``SOURCE: WHERE: PROBLEM``, one line, a ``UserError``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from millpond.errors import UserError
from millpond.pipelines.argo import templating


class Fields:
    """Accessors bound to one source (the file or upload a workflow came from)."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, problem: str) -> NoReturn:
        raise UserError(f"{self.source}: {where}: {problem}" if where else f"{self.source}: {problem}")

    def mapping(self, value: object, where: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(where, f"expected a mapping, got {kind_of(value)}")
        return value

    def items(self, value: object, where: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(where, f"expected a list, got {kind_of(value)}")
        return value

    def text(self, value: object, where: str, required: bool = False) -> str:
        """A string field; Argo's IntOrString and AnyString take numbers and booleans as their text."""
        if value is None:
            if required:
                self.fail(where, "missing")
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return templating.value_text(value)
        if not isinstance(value, str):
            self.fail(where, f"expected a string, got {kind_of(value)}")
        if required and not value:
            self.fail(where, "empty")
        return value

    def optional_text(self, value: object, where: str) -> str | None:
        return None if value is None else self.text(value, where)

    def strings(self, value: object, where: str) -> tuple[str, ...]:
        return tuple(self.text(item, f"{where}[{i}]") for i, item in enumerate(self.items(value, where)))

    def integer(self, value: object, where: str, minimum: int = 0) -> int | None:
        """An int (or the digits of an IntOrString); a tag here is refused, kfp 1.x writes numbers."""
        if value is None:
            return None
        if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,18}", value.strip()):
            value = int(value.strip())
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(where, f"expected an integer, got {kind_of(value)}")
        if value < minimum:
            self.fail(where, f"must be at least {minimum}, got {value}")
        return value

    def flag(self, value: object, where: str) -> bool:
        if value is None:
            return False
        if not isinstance(value, bool):
            self.fail(where, f"expected true or false, got {kind_of(value)}")
        return value

    def fields(
        self, value: Mapping[str, object], where: str, known: Iterable[str], ignored: Iterable[str] = ()
    ) -> None:
        """Refuse a field that is neither read nor knowingly ignored: it may mean something millpond cannot do."""
        allowed = set(known) | set(ignored)
        for key in value:
            if key not in allowed:
                self.fail(where, f"Argo field {key[:60]!r} is not supported")

    def labels(self, value: object, where: str) -> dict[str, str]:
        return {str(k): self.text(v, f"{where}[{k}]") for k, v in self.mapping(value, where).items()}


def kind_of(value: object) -> str:
    """A value's JSON kind, for messages: 'a mapping', 'a list', 'null'…"""
    if value is None:
        return "null"
    kinds = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}
    return kinds.get(type(value), type(value).__name__)

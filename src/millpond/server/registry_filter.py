"""The model registry's ``filterQuery``: a small SQL-like language over an entity's properties, as its OpenAPI
describes it (``api/openapi/model-registry.yaml``, parameter ``filterQuery``).

    expression := term (OR term)*          term := factor (AND factor)*
    factor     := "(" expression ")" | PROPERTY OPERATOR VALUE | PROPERTY IN "(" VALUE ("," VALUE)* ")"
    OPERATOR   := = | != | <> | > | < | >= | <= | LIKE | ILIKE
    VALUE      := 'text' | "text" | a number | true | false

A PROPERTY is one of the entity's own fields as the API names them (``name``, ``id``, ``state``,
``externalId``, ``createTimeSinceEpoch``, ``owner``, ``uri``…), else a custom property's value; a backticked
name may hold any character, and ``NAME.string_value`` (``int_value``, ``double_value``, ``bool_value``) names
a custom property's value of that type. ``LIKE`` takes ``%`` and ``_``; ``ILIKE`` ignores case. A comparison
with a property an entity lacks is false. The query is evaluated over the rendered entities (the store has
them as JSON), not in SQL: a simplification that reads every entity of a list once per filtered page.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Any

from millpond.errors import UserError

MAX_QUERY = 4096
_TOKEN = re.compile(r"""\s*(?:(?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|(?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
    |(?P<op><>|!=|>=|<=|=|>|<|\(|\)|,)|(?P<tick>`[^`]+`(?:\.\w+)?)|(?P<word>[A-Za-z_][\w.]*))""", re.VERBOSE)
_TYPED = ("string_value", "int_value", "double_value", "bool_value")
Predicate = Callable[[dict[str, Any]], bool]
_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq, "!=": operator.ne, "<>": operator.ne, ">": operator.gt, "<": operator.lt, ">=": operator.ge,
    "<=": operator.le}


def _tokens(query: str) -> list[tuple[str, str]]:
    if len(query) > MAX_QUERY:
        raise UserError(f"filterQuery: longer than {MAX_QUERY} characters")
    found, at = [], 0
    while at < len(query.rstrip()):
        match = _TOKEN.match(query, at)
        if match is None or match.end() == at:
            raise UserError(f"filterQuery: cannot read {query[at:at + 20]!r}")
        kind = match.lastgroup or ""
        found.append((kind, match.group(kind)))
        at = match.end()
    return found


def _value(token: tuple[str, str]) -> Any:
    kind, text = token
    if kind == "str":
        return re.sub(r"\\(.)", r"\1", text[1:-1])
    if kind == "num":
        return float(text) if any(c in text for c in ".eE") else int(text)
    if kind == "word" and text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise UserError(f"filterQuery: expected a value, found {text!r}")


def _lookup(entity: dict[str, Any], name: str) -> Any:
    """The property's value in the rendered entity (None when it has none)."""
    if name in entity and name != "customProperties":
        return entity[name]
    base, _, typed = name.rpartition(".") if name.endswith(_TYPED) else (name, "", "")
    found = (entity.get("customProperties") or {}).get(base.strip("`"))
    if not isinstance(found, dict):
        return None
    for field in ((typed,) if typed else _TYPED):
        if field in found:
            value = found[field]
            return int(value) if field == "int_value" else value
    return None


def _like(pattern: str, value: str, ignore_case: bool) -> bool:
    """SQL's LIKE without a backtracking regex: the pieces between ``%`` have a fixed length (``_`` is one
    character), so the first is matched at the start, the last at the end and the others leftmost between."""
    flags = re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL

    def piece(text: str) -> re.Pattern[str]:
        return re.compile("".join("." if c == "_" else re.escape(c) for c in text), flags)

    parts = pattern.split("%")
    if len(parts) == 1:
        return piece(pattern).fullmatch(value) is not None
    first, *middle, last = parts
    found = piece(first).match(value)
    if found is None:
        return False
    at = found.end()
    for part in middle:
        found = piece(part).search(value, at)
        if found is None:
            return False
        at = found.end()
    return len(value) - at >= len(last) and piece(last).fullmatch(value, len(value) - len(last)) is not None


def _compare(left: Any, op: str, right: Any) -> bool:
    if left is None:
        return False
    if isinstance(right, int | float) and not isinstance(right, bool) and isinstance(left, str):
        try:
            left = float(left)  # ids and times are strings of digits in the API
        except ValueError:
            return False
    if op in ("LIKE", "ILIKE"):
        return isinstance(left, str) and isinstance(right, str) and _like(right, left, op == "ILIKE")
    try:
        return bool(_OPERATORS[op](left, right))
    except TypeError:  # a string against a number: no match
        return False


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens, self.at = tokens, 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise UserError("filterQuery: ends too early")
        self.at += 1
        return token

    def keyword(self, word: str) -> bool:
        token = self.peek()
        if token is not None and token[0] == "word" and token[1].upper() == word:
            self.at += 1
            return True
        return False

    def expression(self, depth: int = 0) -> Predicate:
        if depth > 32:
            raise UserError("filterQuery: nested too deep")
        parts = [self.term(depth)]
        while self.keyword("OR"):
            parts.append(self.term(depth))
        return parts[0] if len(parts) == 1 else (lambda e: any(p(e) for p in parts))

    def term(self, depth: int) -> Predicate:
        parts = [self.factor(depth)]
        while self.keyword("AND"):
            parts.append(self.factor(depth))
        return parts[0] if len(parts) == 1 else (lambda e: all(p(e) for p in parts))

    def factor(self, depth: int) -> Predicate:
        kind, text = self.take()
        if (kind, text) == ("op", "("):
            inner = self.expression(depth + 1)
            if self.take() != ("op", ")"):
                raise UserError("filterQuery: a '(' is not closed")
            return inner
        if kind not in ("word", "tick"):
            raise UserError(f"filterQuery: expected a property, found {text!r}")
        name = text.replace("`", "")
        if self.keyword("IN"):
            if self.take() != ("op", "("):
                raise UserError("filterQuery: IN takes a list in parentheses")
            values = [_value(self.take())]
            while self.peek() == ("op", ","):
                self.take()
                values.append(_value(self.take()))
            if self.take() != ("op", ")"):
                raise UserError("filterQuery: an IN list is not closed")
            return lambda e: any(_compare(_lookup(e, name), "=", v) for v in values)
        op_kind, op = self.take()
        op = op.upper()
        if not ((op_kind == "op" and op not in ("(", ")", ",")) or (op_kind == "word" and op in ("LIKE", "ILIKE"))):
            raise UserError(f"filterQuery: expected an operator after {name!r}, found {op!r}")
        value = _value(self.take())
        return lambda e: _compare(_lookup(e, name), op, value)


def parse_filter(query: str) -> Predicate:
    """The predicate ``query`` means over a rendered entity; UserError (400) naming what cannot be read."""
    parser = _Parser(_tokens(query))
    predicate = parser.expression()
    if parser.peek() is not None:
        raise UserError(f"filterQuery: unexpected {parser.peek()[1]!r}")  # type: ignore[index]
    return predicate

"""The part of GJSON (github.com/tidwall/gjson) that Katib's success and failure conditions use.

Katib decides a trial's state by evaluating ``trialTemplate.successCondition`` and
``failureCondition`` with ``gjson.Get`` over the trial object's JSON. Its defaults and examples use
few of GJSON's features, and millpond reads exactly those, refusing anything else at validation:

- keys separated by ``.`` (``status.conditions``), ``\\`` escaping a ``.`` in a key, the ``*`` and
  ``?`` wildcards, and array indexes (``conditions.0``);
- ``#``: an array's length, or, followed by ``.path``, ``path`` of each element;
- queries: ``#(path op value)`` (the first element that matches) and ``#(path op value)#`` (all of
  them), with ``==``/``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``%`` and ``!%`` (``*``/``?``
  patterns), a JSON string, number, ``true``, ``false`` or ``null`` as the value, or no operator
  (the path exists); an empty path compares the element itself;
- ``|`` (the rest applies to the result as a whole, where ``.`` maps over a query's matches);
- ``@this`` and multipaths ``[path,path]`` (the Argo example: ``status.[@this].#(phase=="Succeeded")#``).

A query compares as GJSON does: a string element as text, a number as a number, true and false by
GJSON's rules; null, objects and arrays match only an operator-less query.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from millpond.datasets.fields import show
from millpond.errors import UserError

MAX_LENGTH = 2000
MAX_DEPTH = 16
_OPERATORS = ("==", "!=", "<=", ">=", "!%", "=", "<", ">", "%")
_MISSING = object()


@dataclass(frozen=True)
class Step:
    """One component of a path; ``pipe`` when ``|`` (not ``.``) came before it."""

    kind: str  # "key" | "count" | "query" | "this" | "multi"
    pipe: bool = False
    key: str = ""
    pattern: re.Pattern[str] | None = None  # a key with wildcards
    lhs: tuple[Step, ...] = ()
    op: str | None = None
    rhs: Any = None
    all: bool = False
    paths: tuple[tuple[Step, ...], ...] = ()


class _Refused(UserError):
    """Raised inside the parser; :func:`parse` turns it into one UserError line."""


def _past_literal(text: str, index: int) -> int | None:
    """The index after the JSON string or escaped character at ``index``; None when neither starts there."""
    if text[index] == '"':
        return _string_end(text, index)
    return index + 2 if text[index] == "\\" else None


def _closing(text: str, start: int, opening: str, closing: str) -> int:
    """The index of the bracket closing the one at ``start``, skipping JSON strings."""
    depth, index = 0, start
    while index < len(text):
        char = text[index]
        after = _past_literal(text, index)
        if after is not None:
            index = after
            continue
        if char == opening:
            depth += 1
        elif char == closing:
            depth -= 1
            if depth == 0:
                return index
        index += 1
    raise _Refused(f"unclosed {opening!r}")


def _string_end(text: str, start: int) -> int:
    index = start + 1
    while index < len(text):
        if text[index] == "\\":
            index += 2
        elif text[index] == '"':
            return index + 1
        else:
            index += 1
    raise _Refused("unclosed string")


def _wildcard(pieces: list[tuple[str, bool]]) -> re.Pattern[str]:
    regex = "".join(("." if char == "?" else ".*") if wild else re.escape(char) for char, wild in pieces)
    return re.compile(regex, re.DOTALL)


def _parse_path(text: str, index: int, stops: str, depth: int) -> tuple[tuple[Step, ...], int]:
    """The steps of the path starting at ``index``, up to the end or one of ``stops``."""
    if depth > MAX_DEPTH:
        raise _Refused(f"nested deeper than {MAX_DEPTH}")
    steps: list[Step] = []
    pipe = False
    while True:
        if index >= len(text) or text[index] in stops:
            if steps:
                raise _Refused("a path ends with '.' or '|'")
            return (), index
        char = text[index]
        if char == "#" and text.startswith("#(", index):
            end = _closing(text, index + 1, "(", ")")
            lhs, op, rhs = _parse_query(text[index + 2:end], depth)
            index = end + 1
            every = index < len(text) and text[index] == "#"
            index += 1 if every else 0
            steps.append(Step("query", pipe, lhs=lhs, op=op, rhs=rhs, all=every))
        elif char == "#":
            steps.append(Step("count", pipe))
            index += 1
        elif char == "@":
            end = index + 1
            while end < len(text) and text[end] not in ".|" + stops:
                end += 1
            if text[index:end] != "@this":
                raise _Refused(f"modifier {text[index:end]!r} (only @this)")
            steps.append(Step("this", pipe))
            index = end
        elif char == "[":
            end = _closing(text, index, "[", "]")
            paths, inner = [], index + 1
            while inner < end:
                path, inner = _parse_path(text[:end], inner, ",", depth + 1)
                if not path:
                    raise _Refused("an empty path in [...]")
                paths.append(path)
                inner += 1 if inner < end else 0
            steps.append(Step("multi", pipe, paths=tuple(paths)))
            index = end + 1
        elif char in "{!" or text.startswith("..", index):
            raise _Refused(f"{char!r} at {index}")
        else:
            pieces: list[tuple[str, bool]] = []
            while index < len(text) and text[index] not in ".|" + stops:
                if text[index] == "\\" and index + 1 < len(text):
                    pieces.append((text[index + 1], False))
                    index += 2
                    continue
                if text[index] in "()#@[]{}!=<>%\"":
                    raise _Refused(f"{text[index]!r} in a key at {index}")
                pieces.append((text[index], text[index] in "*?"))
                index += 1
            if not pieces:
                raise _Refused(f"an empty key at {index}")
            wild = any(flag for _, flag in pieces)
            steps.append(Step("key", pipe, key="".join(char for char, _ in pieces),
                              pattern=_wildcard(pieces) if wild else None))
        if index >= len(text) or text[index] in stops:
            return tuple(steps), index
        if text[index] not in ".|":
            raise _Refused(f"{text[index]!r} at {index} where '.' or '|' belongs")
        pipe = text[index] == "|"
        index += 1
        if index >= len(text) or text[index] in stops:
            raise _Refused("a path ends with '.' or '|'")


def _parse_query(inner: str, depth: int) -> tuple[tuple[Step, ...], str | None, Any]:
    index, found = 0, None
    while index < len(inner):
        char = inner[index]
        after = _past_literal(inner, index)
        if after is not None:
            index = after
            continue
        if char in "([":
            index = _closing(inner, index, char, ")" if char == "(" else "]") + 1
            continue
        found = next((op for op in _OPERATORS if inner.startswith(op, index)), None)
        if found:
            break
        index += 1
    left = inner[:index] if found else inner
    lhs, end = _parse_path(left.strip(), 0, "", depth + 1) if left.strip() else ((), 0)
    if not found:
        if not lhs:
            raise _Refused("an empty query #()")
        return lhs, None, None
    right = inner[index + len(found):].strip()
    if right.startswith("~"):
        raise _Refused("truthy query values (~)")
    if right.startswith('"'):
        try:
            text = json.loads(right)
        except (ValueError, RecursionError):
            raise _Refused(f"query value {right[:40]!r} is not one JSON string") from None
        return lhs, "==" if found == "=" else found, text
    if any(char in right for char in '()[]{}"#|'):
        raise _Refused(f"query value {right[:40]!r}")
    return lhs, "==" if found == "=" else found, right


def parse(expression: str) -> tuple[Step, ...]:
    """The steps of ``expression``; UserError when it is outside the subset millpond reads."""
    if not isinstance(expression, str) or not expression.strip():
        raise UserError("must be a non-empty GJSON path")
    if len(expression) > MAX_LENGTH:
        raise UserError(f"longer than {MAX_LENGTH} characters")
    return _parsed(expression)


@lru_cache(maxsize=256)
def _parsed(expression: str) -> tuple[Step, ...]:
    try:
        steps, _ = _parse_path(expression, 0, "", 0)
    except _Refused as exc:
        raise UserError(f"{show(expression)} is outside the GJSON subset millpond reads (docs/guides/katib.md): "
                        f"{exc}") from None
    return steps


def get(expression: str, document: Any) -> Any:
    """GJSON's ``Get``: the value ``expression`` selects in ``document``, or None when nothing matches."""
    value = _evaluate(parse(expression), document)
    return None if value is _MISSING else value


def _evaluate(steps: tuple[Step, ...], value: Any) -> Any:
    for position, step in enumerate(steps):
        rest = steps[position + 1:]
        maps = bool(rest) and not rest[0].pipe
        if step.kind == "key":
            value = _key(step, value)
        elif step.kind == "count":
            if not isinstance(value, list):
                return _MISSING
            if maps:
                return [found for element in value if (found := _evaluate(rest, element)) is not _MISSING]
            value = len(value)
        elif step.kind == "query":
            if not isinstance(value, list):
                return _MISSING
            matched = [element for element in value if _query_matches(step, element)]
            if not step.all:
                value = matched[0] if matched else _MISSING
            elif maps:
                return [found for element in matched if (found := _evaluate(rest, element)) is not _MISSING]
            else:
                value = matched
        elif step.kind == "multi":
            value = [found for path in step.paths if (found := _evaluate(path, value)) is not _MISSING]
        if value is _MISSING:
            return _MISSING
    return value


def _key(step: Step, value: Any) -> Any:
    if isinstance(value, dict):
        if step.pattern is None:
            return value.get(step.key, _MISSING)
        return next((item for key, item in value.items() if step.pattern.fullmatch(str(key))), _MISSING)
    if isinstance(value, list) and step.pattern is None and step.key.isdigit() and step.key.isascii():
        number = int(step.key)
        return value[number] if number < len(value) else _MISSING
    return _MISSING


def _float(text: str) -> float:
    """Go's ``strconv.ParseFloat`` as GJSON uses it: a value that is no number reads as 0."""
    try:
        return float(text) if "_" not in text else 0.0
    except ValueError:
        return 0.0


def _query_matches(step: Step, element: Any) -> bool:
    """GJSON's ``queryMatches``: strings compare as text, numbers as numbers, booleans by their rules."""
    found = _evaluate(step.lhs, element) if step.lhs else element
    if found is _MISSING:
        return False
    if step.op is None:
        return True
    want: str = step.rhs
    op = step.op
    if isinstance(found, str):
        if op in ("%", "!%"):
            like = _wildcard(_like_pieces(want)).fullmatch(found) is not None
            return like if op == "%" else not like
        return _compare(found, want, op)
    if isinstance(found, bool):
        word = "true" if found else "false"
        if op == "==":
            return want == word
        if op == "!=":
            return want != word
        if found:
            return (op == ">" and want == "false") or op == ">="
        return (op == "<" and want == "true") or op == "<="
    if isinstance(found, (int, float)):
        try:
            number = float(found)
        except OverflowError:
            number = float("inf") if found > 0 else float("-inf")
        return _compare(number, _float(want), op)
    return False


def _compare(left: Any, right: Any, op: str) -> bool:
    return bool({"==": left == right, "!=": left != right, "<": left < right, "<=": left <= right,
                 ">": left > right, ">=": left >= right}.get(op, False))


def _like_pieces(pattern: str) -> list[tuple[str, bool]]:
    """GJSON's ``match.Match`` pattern: ``*`` and ``?`` wild, ``\\`` escaping the next character."""
    pieces: list[tuple[str, bool]] = []
    index = 0
    while index < len(pattern):
        if pattern[index] == "\\" and index + 1 < len(pattern):
            pieces.append((pattern[index + 1], False))
            index += 2
            continue
        pieces.append((pattern[index], pattern[index] in "*?"))
        index += 1
    return pieces

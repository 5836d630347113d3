"""Argo's ``when`` conditions: govaluate expressions, parsed by a small recursive-descent parser (no eval).

Argo substitutes a task's tags into its ``when`` text, then hands the text to govaluate; kfp
1.x writes ``"{{tasks.flip.outputs.parameters.out}}" == "heads"`` and
``{{tasks.rand.outputs.parameters.out}} > 5``. The subset here is the one those conditions use:

- literals: numbers (``5``, ``1.5``, ``-3`` with govaluate's prefix minus; all float64, as there),
  strings in double or single quotes (``\\`` escapes the next character), ``true``/``false``;
- ``==`` and ``!=`` (equal only if of the same type and value: ``"5" == 5`` is false, as
  govaluate compares with reflect.DeepEqual), ``<``, ``<=``, ``>``, ``>=`` (two numbers, or two
  strings compared by their bytes; anything else is an error, as in govaluate);
- ``&&``, ``||``, ``!`` on booleans, and parentheses. Precedence as govaluate's: ``!``, then
  comparisons, then ``&&``, then ``||``.

A bare word is, to govaluate, a variable; Argo gives it none, so ``heads == "heads"`` fails with
"no parameter 'heads' found" — here the same, at parse time. Errors are one line
(``WhenError``, a ``TaskFailure``: the task fails, as Argo fails the node). Nesting is bounded so
no input exhausts Python's stack. Not supported (kfp 1.x never writes them): arithmetic,
regex ``=~``, ternaries, ``in``, functions, and govaluate's reading of date-like strings as dates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar, Union

from millpond.errors import TaskFailure, UserError
from millpond.pipelines.argo import templating

MAX_TEXT = 10_000
MAX_NESTING = 50

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
      | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<op>==|!=|<=|>=|&&|\|\||[<>!()-])
      | (?P<word>[A-Za-z_][A-Za-z0-9_.\-]*)
    )""",
    re.VERBOSE | re.DOTALL,
)
_TAGS = re.compile(r"\{\{.*?\}\}", re.DOTALL)
_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")

Value = Union[bool, float, str]
_Ordered = TypeVar("_Ordered", float, bytes)  # what ``<`` and friends compare: two numbers, or two strings' bytes


class WhenError(TaskFailure):
    """A ``when`` expression that does not parse or does not evaluate to a boolean."""


@dataclass(frozen=True)
class _Token:
    kind: str  # number | string | op | word | end
    text: str
    at: int


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            spot = len(text) - len(text[position:].lstrip())
            raise WhenError(f"unexpected {text[spot:spot + 10]!r} at column {spot + 1}")
        kind = match.lastgroup or ""
        tokens.append(_Token(kind, match.group(kind), match.start(kind)))
        position = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


def _unquote(literal: str) -> str:
    return re.sub(r"\\(.)", r"\1", literal[1:-1], flags=re.DOTALL)


class _Parser:
    """Recursive descent over the tokens; evaluates as it parses (the expressions are tiny)."""

    def __init__(self, text: str, checking: bool = False) -> None:
        self.checking = checking  # syntax only: the values are stand-ins, so types are not checked
        self.tokens = _tokens(text)
        self.index = 0
        self.depth = 0

    def peek(self) -> _Token:
        return self.tokens[self.index]

    def take(self) -> _Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def expression(self) -> Value:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise WhenError(f"nested deeper than {MAX_NESTING} levels")
        value = self.conjunction()
        while self.peek().text == "||":
            operator = self.take()
            right = self.conjunction()
            value = False if self.checking else _logical(value, right, operator)
        self.depth -= 1
        return value

    def conjunction(self) -> Value:
        value = self.comparison()
        while self.peek().text == "&&":
            operator = self.take()
            right = self.comparison()
            value = False if self.checking else _logical(value, right, operator)
        return value

    def comparison(self) -> Value:
        value = self.unary()
        while self.peek().kind == "op" and self.peek().text in _COMPARISONS:
            operator = self.take()
            right = self.unary()
            value = False if self.checking else _compare(value, right, operator)
        return value

    def unary(self) -> Value:
        token = self.peek()
        if token.text == "!":
            self.take()
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise WhenError(f"nested deeper than {MAX_NESTING} levels")
            value = self.unary()
            self.depth -= 1
            if self.checking:
                return False
            if not isinstance(value, bool):
                raise WhenError(f"'!' at column {token.at + 1} needs a boolean, got {_show(value)}")
            return not value
        if token.text == "-":  # govaluate's prefix minus, on numbers only
            self.take()
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise WhenError(f"nested deeper than {MAX_NESTING} levels")
            value = self.unary()
            self.depth -= 1
            if self.checking:
                return 0.0
            if not isinstance(value, float):
                raise WhenError(f"'-' at column {token.at + 1} needs a number, got {_show(value)}")
            return -value
        return self.primary()

    def primary(self) -> Value:
        token = self.take()
        if token.kind == "number":
            return float(token.text)
        if token.kind == "string":
            return _unquote(token.text)
        if token.kind == "word":
            if token.text in ("true", "false"):
                return token.text == "true"
            raise WhenError(f"no parameter {token.text[:40]!r} found (a string needs quotes)")
        if token.text == "(":
            value = self.expression()
            closing = self.take()
            if closing.text != ")":
                raise WhenError(f"expected ')' at column {closing.at + 1}")
            return value
        if token.kind == "end":
            raise WhenError("unexpected end of expression")
        raise WhenError(f"unexpected {token.text!r} at column {token.at + 1}")


def _show(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"number {value:g}"
    return f"string {value[:40]!r}"


def _logical(left: Value, right: Value, operator: _Token) -> bool:
    if not isinstance(left, bool) or not isinstance(right, bool):
        culprit = left if not isinstance(left, bool) else right
        raise WhenError(f"{operator.text!r} at column {operator.at + 1} needs booleans, got {_show(culprit)}")
    return (left and right) if operator.text == "&&" else (left or right)


def _compare(left: Value, right: Value, operator: _Token) -> bool:
    if operator.text in ("==", "!="):
        same = type(left) is type(right) and left == right
        return same if operator.text == "==" else not same
    if isinstance(left, float) and isinstance(right, float):
        return _ordered(left, right, operator.text)
    if isinstance(left, str) and isinstance(right, str):
        return _ordered(left.encode(), right.encode(), operator.text)
    raise WhenError(
        f"{operator.text!r} at column {operator.at + 1} compares two numbers or two strings, "
        f"got {_show(left)} and {_show(right)}"
    )


def _ordered(a: _Ordered, b: _Ordered, operator: str) -> bool:
    if operator == "<":
        return a < b
    if operator == "<=":
        return a <= b
    if operator == ">":
        return a > b
    return a >= b


def evaluate(expression: str) -> bool:
    """The truth of a ``when`` expression whose tags are already substituted (``WhenError`` otherwise)."""
    return _run(expression, checking=False)


def holds(expression: str, values: Mapping[str, str]) -> bool:
    """A task's ``when`` as Argo decides it: its tags substituted from ``values``, then evaluated.

    An unresolvable tag or a bad expression is a ``WhenError`` naming the expression as written.
    """
    try:
        return evaluate(templating.substitute(expression, values))
    except TaskFailure as exc:
        raise WhenError(f"when {expression[:80]!r}: {exc}") from None


def check(expression: str, where: str) -> None:
    """Refuse, at load time, a ``when`` that can never parse, whatever its tags become (UserError).

    Each ``{{...}}`` stands in for a value: ``0`` (inside quotes it reads as text), so the
    syntax is checked while the types, known only at run time, are not.
    """
    try:
        _run(_TAGS.sub("0", expression), checking=True)
    except WhenError as exc:
        raise UserError(f"{where}: invalid when expression {expression[:80]!r}: {exc}") from None


def _run(expression: str, checking: bool) -> bool:
    if len(expression) > MAX_TEXT:
        raise WhenError(f"when expression longer than {MAX_TEXT} characters")
    parser = _Parser(expression, checking)
    if parser.peek().kind == "end":
        raise WhenError("empty when expression")
    value = parser.expression()
    rest = parser.peek()
    if rest.kind != "end":
        raise WhenError(f"unexpected {rest.text!r} at column {rest.at + 1}")
    if checking:
        return False
    if not isinstance(value, bool):
        raise WhenError(f"when expression gives {_show(value)}, not a boolean")
    return value


"""MLMD's query options as ``store.lineage_reads``' typed requests: ``ListOperationOptions`` (a page's size, order,
token and filter) and the ``filter_query`` text.

Paging follows MLMD (``ListOperationOptions``): ``max_result_size`` defaults to 20, is capped at 100, and one of
zero or less is INVALID_ARGUMENT; ``order_by_field`` is ``CREATE_TIME``, ``LAST_UPDATE_TIME`` or ``ID`` (the
default), ascending unless ``is_asc`` is false, ties broken by id. The ``next_page_token`` is MLMD's own message
(``ListOperationNextPageToken``), base64: the options of the first call (``set_options``, which a later call's
options cannot change, as in MLMD) and the offset of the next page (``field_offset``; simplified: MLMD keeps the
last row's order value and id, so a row added meanwhile cannot shift a page here either way but may be missed).

``filter_query`` is a subset of MLMD's SQL-like language: conditions on a node's own attributes (``id``,
``type``, ``name``, ``uri`` and ``state`` for artifacts, ``last_known_state`` for executions,
``create_time_since_epoch``, ``last_update_time_since_epoch``) with ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``,
``IN (...)``, ``NOT IN (...)`` and ``LIKE``, joined by ``AND``, in parentheses or not. MLMD's ``OR``, ``NOT(...)``,
``IS NULL`` and its neighbourhood (``contexts_a.name``, ``events_0.type``, ``properties.x.int_value``) are not:
a filter that uses them is INVALID_ARGUMENT naming what is supported, never a wrong answer.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from millpond.errors import UserError
from millpond.mlmd.proto import metadata_store_pb2 as mlmd
from millpond.store.lineage_reads import FIELDS, Condition, Kind, Operator, OrderField, PageRequest

DEFAULT_SIZE, MAX_SIZE = 20, 100  # MLMD's default and upper bound of max_result_size
MAX_FILTER = 10_000  # characters: a filter longer than that is refused before it is parsed
MAX_NESTING = 32  # parentheses in parentheses: deeper is refused (the parser recurses once a level)
_ORDER: dict[int, OrderField] = {mlmd.ListOperationOptions.OrderByField.Field.Value("FIELD_UNSPECIFIED"): "id",
                                 mlmd.ListOperationOptions.OrderByField.Field.Value("CREATE_TIME"): "create_time",
                                 mlmd.ListOperationOptions.OrderByField.Field.Value("LAST_UPDATE_TIME"):
                                     "update_time",
                                 mlmd.ListOperationOptions.OrderByField.Field.Value("ID"): "id"}


@dataclass(frozen=True)
class ListRequest:
    """A list call's page and filter, and the options its next page token carries."""

    page: PageRequest
    conditions: tuple[Condition, ...]
    options: mlmd.ListOperationOptions  # the first call's, without a token


def list_request(kind: Kind, options: mlmd.ListOperationOptions) -> ListRequest:
    """The page ``options`` ask for (UserError, INVALID_ARGUMENT, for options MLMD refuses)."""
    offset = 0
    if options.next_page_token:
        token = _decode(options.next_page_token)
        options, offset = token.set_options, token.field_offset
    if options.max_result_size <= 0:
        raise UserError(f"max_result_size field value is required to be greater than 0 and less than or equal to "
                        f"{MAX_SIZE}. Set value: {options.max_result_size}")
    order = options.order_by_field
    field = _ORDER.get(order.field)
    if field is None:
        raise UserError(f"unsupported order_by_field.field {order.field}")
    page = PageRequest(min(options.max_result_size, MAX_SIZE), offset, field, order.is_asc)
    return ListRequest(page, parse_filter(kind, options.filter_query), options)


def next_page_token(request: ListRequest, next_offset: int | None) -> str:
    """The token of the page after this one ("" when this was the last)."""
    if next_offset is None:
        return ""
    token = mlmd.ListOperationNextPageToken(field_offset=next_offset, set_options=request.options)
    return base64.urlsafe_b64encode(token.SerializeToString()).decode()


def _decode(text: str) -> mlmd.ListOperationNextPageToken:
    token = mlmd.ListOperationNextPageToken()
    try:
        token.ParseFromString(base64.urlsafe_b64decode(text.encode()))
    except (binascii.Error, ValueError, DecodeError):
        raise UserError("invalid next_page_token: not a token this server gave") from None
    if token.field_offset < 0 or not token.HasField("set_options"):
        raise UserError("invalid next_page_token: not a token this server gave")
    return token


# --- filter_query --------------------------------------------------------------------------------------------
_TOKEN = re.compile(r"""\s*(?:(?P<number>-?\d+)|(?P<text>'(?:[^']|'')*'|"(?:[^"]|"")*")|(?P<op><=|>=|!=|<>|=|<|>)
                        |(?P<punct>[(),])|(?P<word>[A-Za-z_][A-Za-z0-9_.]*))""", re.VERBOSE)
_ENUMS = {"state": set(mlmd.Artifact.State.keys()), "last_known_state": set(mlmd.Execution.State.keys())}
_UNSUPPORTED = ("OR", "NOT", "IS", "NULL", "BETWEEN")


def parse_filter(kind: Kind, text: str) -> tuple[Condition, ...]:
    """The conditions of ``text`` (see the module's docstring); UserError names what is not supported."""
    if not text.strip():
        return ()
    if len(text) > MAX_FILTER:
        raise UserError(f"invalid filter_query: longer than {MAX_FILTER} characters")
    return _Parser(kind, _tokens(text)).conditions()


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        found = _TOKEN.match(text, position)
        if found is None or found.end() == position:
            raise UserError(f"invalid filter_query: cannot read {text[position:position + 20]!r}")
        kind = found.lastgroup or ""
        tokens.append((kind, found.group(kind)))
        position = found.end()
    return tokens


class _Parser:
    """``condition (AND condition)*``, a condition maybe in parentheses."""

    def __init__(self, kind: Kind, tokens: list[tuple[str, str]]) -> None:
        self.kind, self.tokens, self.at, self.depth = kind, tokens, 0, 0

    def conditions(self) -> tuple[Condition, ...]:
        found = self._conjunction()
        if self.at < len(self.tokens):
            self._unsupported(self.tokens[self.at][1])
        return tuple(found)

    def _conjunction(self) -> list[Condition]:
        found = self._term()
        while self._peek_word("AND"):
            self.at += 1
            found += self._term()
        return found

    def _term(self) -> list[Condition]:
        if self._peek() == ("punct", "("):
            self.at += 1
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise UserError(f"invalid filter_query: parentheses nested deeper than {MAX_NESTING}")
            found = self._conjunction()
            self._expect("punct", ")")
            self.depth -= 1
            return found
        return [self._condition()]

    def _condition(self) -> Condition:
        kind, field = self._next()
        if kind != "word" or field.upper() in _UNSUPPORTED:
            self._unsupported(field)
        if field not in FIELDS[self.kind]:
            raise UserError(f"invalid filter_query: {field!r} is not supported here; a filter of {self.kind}s takes "
                            f"{', '.join(sorted(FIELDS[self.kind]))} (MLMD's neighbourhood filters are not served)")
        operator: Operator
        if self._peek_word("NOT"):
            self.at += 1
            if not self._peek_word("IN"):
                self._unsupported("NOT")
            operator = "NOT IN"
        elif self._peek_word("IN"):
            operator = "IN"
        elif self._peek_word("LIKE"):
            operator = "LIKE"
        else:
            kind, symbol = self._next()
            if kind != "op":
                self._unsupported(symbol)
            operator = "!=" if symbol == "<>" else symbol  # type: ignore[assignment]  # one of _TOKEN's operators
            return Condition(field, operator, (self._value(field),))
        self.at += 1
        if operator == "LIKE":
            value = self._value(field)
            if not isinstance(value, str):
                raise UserError(f"invalid filter_query: LIKE takes text, as {field} LIKE 'prefix%'")
            return Condition(field, operator, (value,))
        self._expect("punct", "(")
        values = [self._value(field)]
        while self._peek() == ("punct", ","):
            self.at += 1
            values.append(self._value(field))
        self._expect("punct", ")")
        return Condition(field, operator, tuple(values))

    def _value(self, field: str) -> int | str:
        kind, token = self._next()
        numeric = field == "id" or field.endswith("_since_epoch")
        if kind == "number" and numeric:
            number = int(token)
            if not -(2**63) <= number < 2**63:
                raise UserError(f"invalid filter_query: {token} is not an int64")
            return number
        if kind == "text" and not numeric:
            quote = token[0]
            return token[1:-1].replace(quote * 2, quote)
        if kind == "word" and field in _ENUMS:
            if token not in _ENUMS[field]:
                known = ", ".join(sorted(_ENUMS[field]))
                raise UserError(f"invalid filter_query: {token!r} is not a {field} ({known})")
            return token
        expected = "an integer" if numeric else "quoted text"
        raise UserError(f"invalid filter_query: {field} takes {expected}, not {token!r}")

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _peek_word(self, word: str) -> bool:
        ahead = self._peek()
        return ahead is not None and ahead[0] == "word" and ahead[1].upper() == word

    def _next(self) -> tuple[str, str]:
        ahead = self._peek()
        if ahead is None:
            raise UserError("invalid filter_query: it ends too soon")
        self.at += 1
        return ahead

    def _expect(self, kind: str, token: str) -> None:
        if self._next() != (kind, token):
            raise UserError(f"invalid filter_query: expected {token!r}")

    def _unsupported(self, token: str) -> None:
        raise UserError(f"invalid filter_query: {token!r} is not supported here: conditions on a node's own "
                        "attributes (=, !=, <, <=, >, >=, IN, NOT IN, LIKE) joined by AND")

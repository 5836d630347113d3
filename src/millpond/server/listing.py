"""Paging, sorting and filtering of list calls, as the KFP API takes them, turned into a store ``ListQuery``.

``filter`` is a JSON-serialized ``Filter`` proto: ``{"predicates": [{"key", "operation",
"string_value" | "stringValue" | ...}]}``; ``operation`` comes as a name or as its number
(``kfp.Client`` sends numbers). ``page_token`` is an opaque offset; ``sort_by`` is
``"field"`` or ``"field desc"``. Which fields a list has is the store's business.

Every number a caller controls here is bounded, and a request beyond a bound is a 400 naming
it, never a 500 or a 503 from the database: ``page_size`` (``MAX_PAGE_SIZE``), the offset a
``page_token`` carries (an int64, SQLite's and PostgreSQL's ``OFFSET``), the filter's text
(``MAX_FILTER_CHARS``; parsed by ``documents.load_json``, so its nesting and numbers are bounded
too), its predicates (``MAX_PREDICATES``: SQLite refuses an expression tree deeper than 1,000)
and an ``IN``'s values (``MAX_IN_VALUES``, under SQLite's 32,766 bound variables).
"""

from __future__ import annotations

import base64
from typing import Any

from millpond.documents import INT64_MAX, DocumentError, load_json
from millpond.server.errors import ApiError
from millpond.store.listing import OPERATIONS, ListQuery, Page, Predicate

_OPERATIONS = {1: "EQUALS", 2: "NOT_EQUALS", 3: "GREATER_THAN", 5: "GREATER_THAN_EQUALS", 6: "LESS_THAN",
               7: "LESS_THAN_EQUALS", 8: "IN", 9: "IS_SUBSTRING"}
_VALUE_KEYS = ("string_value", "stringValue", "int_value", "intValue", "long_value", "longValue",
               "timestamp_value", "timestampValue")
_LIST_KEYS = ("string_values", "stringValues", "int_values", "intValues", "long_values", "longValues")
MAX_PAGE_SIZE = 1000
MAX_FILTER_CHARS = 64 * 1024
MAX_PREDICATES = 100
MAX_IN_VALUES = 1000


def list_query(filter: str | None, sort_by: str | None, page_token: str | None, page_size: int | None) -> ListQuery:
    """The store query for a list call's parameters; malformed ones answer 400."""
    size = page_size if page_size and page_size > 0 else 20
    if size > MAX_PAGE_SIZE:
        raise ApiError(400, f"page_size {size} is over the maximum of {MAX_PAGE_SIZE}")
    sort_key, descending = None, False
    if sort_by:
        parts = sort_by.split()
        if len(parts) > 2 or (len(parts) == 2 and parts[1].lower() not in ("asc", "desc")):
            raise ApiError(400, f"invalid sort_by {sort_by[:200]!r}: expected FIELD or 'FIELD desc'")
        sort_key, descending = parts[0], len(parts) == 2 and parts[1].lower() == "desc"
    return ListQuery(_predicates(filter), sort_key, descending, _offset(page_token), size)


def next_page_token(page: Page[Any]) -> str:
    """The opaque token of the page after ``page`` ('' at the end)."""
    if page.next_offset is None:
        return ""
    return base64.urlsafe_b64encode(str(page.next_offset).encode()).decode()


def _predicates(text: str | None) -> tuple[Predicate, ...]:
    if not text:
        return ()
    if len(text) > MAX_FILTER_CHARS:
        raise ApiError(400, f"invalid filter: {len(text):,} characters, over the maximum of {MAX_FILTER_CHARS:,}")
    try:
        document = load_json(text, "filter")
    except DocumentError as exc:
        raise ApiError(400, f"invalid {exc}") from None  # "invalid filter: WHERE: PROBLEM"
    if not isinstance(document, dict):
        raise ApiError(400, f"invalid filter: not a JSON Filter object: {text[:200]}")
    predicates = document.get("predicates") or []
    if not isinstance(predicates, list):
        raise ApiError(400, "invalid filter: predicates must be a list")
    if len(predicates) > MAX_PREDICATES:
        raise ApiError(400, f"invalid filter: {len(predicates)} predicates, over the maximum of {MAX_PREDICATES}")
    found = []
    for predicate in predicates:
        if not isinstance(predicate, dict):
            raise ApiError(400, "invalid filter: each predicate must be an object")
        key = predicate.get("key")
        operation = predicate.get("operation")
        name = _OPERATIONS.get(operation, operation) if isinstance(operation, int) else str(operation)
        if name not in OPERATIONS:
            raise ApiError(400, f"invalid filter: unknown operation {operation!r}")
        if name == "IN":
            values = next((predicate[k] for k in _LIST_KEYS if k in predicate), None)
            values = values.get("values", []) if isinstance(values, dict) else values
            if not isinstance(values, list):
                raise ApiError(400, f"invalid filter: IN on {key!r} needs string_values")
            if len(values) > MAX_IN_VALUES:
                raise ApiError(400, f"invalid filter: IN on {key!r} has {len(values)} values, "
                                    f"over the maximum of {MAX_IN_VALUES}")
            found.append(Predicate(str(key), name, values))
            continue
        value = next((predicate[k] for k in _VALUE_KEYS if k in predicate), None)
        if value is None:
            raise ApiError(400, f"invalid filter: predicate on {key!r} has no value")
        found.append(Predicate(str(key), name, value))
    return tuple(found)


def _offset(token: str | None) -> int:
    if not token:
        return 0
    try:
        offset = int(base64.urlsafe_b64decode(token.encode()).decode())
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, f"invalid page_token {token[:200]!r}") from None
    if not 0 <= offset <= INT64_MAX:  # the databases' OFFSET is an int64: beyond it, SQLite's OverflowError
        raise ApiError(400, f"invalid page_token {token[:200]!r}: not a page of this list")
    return offset

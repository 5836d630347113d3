"""Paging, sorting and filtering of list calls, as the KFP API takes them, turned into a store ``ListQuery``.

``filter`` is a JSON-serialized ``Filter`` proto: ``{"predicates": [{"key", "operation",
"string_value" | "stringValue" | ...}]}``; ``operation`` comes as a name or as its number
(``kfp.Client`` sends numbers). ``page_token`` is an opaque offset; ``sort_by`` is
``"field"`` or ``"field desc"``. Which fields a list has is the store's business.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from millpond.server.errors import ApiError
from millpond.store.listing import OPERATIONS, ListQuery, Page, Predicate

_OPERATIONS = {1: "EQUALS", 2: "NOT_EQUALS", 3: "GREATER_THAN", 5: "GREATER_THAN_EQUALS", 6: "LESS_THAN",
               7: "LESS_THAN_EQUALS", 8: "IN", 9: "IS_SUBSTRING"}
_VALUE_KEYS = ("string_value", "stringValue", "int_value", "intValue", "long_value", "longValue",
               "timestamp_value", "timestampValue")
_LIST_KEYS = ("string_values", "stringValues", "int_values", "intValues", "long_values", "longValues")
MAX_PAGE_SIZE = 1000


def list_query(filter: str | None, sort_by: str | None, page_token: str | None, page_size: int | None) -> ListQuery:
    """The store query for a list call's parameters; malformed ones answer 400."""
    size = page_size if page_size and page_size > 0 else 20
    if size > MAX_PAGE_SIZE:
        raise ApiError(400, f"page_size {size} is over the maximum of {MAX_PAGE_SIZE}")
    sort_key, descending = None, False
    if sort_by:
        parts = sort_by.split()
        if len(parts) > 2 or (len(parts) == 2 and parts[1].lower() not in ("asc", "desc")):
            raise ApiError(400, f"invalid sort_by {sort_by!r}: expected FIELD or 'FIELD desc'")
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
    try:
        predicates = json.loads(text).get("predicates") or []
    except (ValueError, AttributeError):
        raise ApiError(400, f"invalid filter: not a JSON Filter object: {text[:200]}") from None
    if not isinstance(predicates, list):
        raise ApiError(400, "invalid filter: predicates must be a list")
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
        raise ApiError(400, f"invalid page_token {token!r}") from None
    if offset < 0:
        raise ApiError(400, f"invalid page_token {token!r}")
    return offset

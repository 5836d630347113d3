"""Paging, sorting and filtering of list calls, as the KFP API takes them.

``filter`` is a JSON-serialized ``Filter`` proto: ``{"predicates": [{"key", "operation",
"string_value" | "stringValue" | ...}]}``; ``operation`` comes as a name or as its number
(``kfp.Client`` sends numbers). ``page_token`` is an opaque offset; ``sort_by`` is
``"field"`` or ``"field desc"``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from millpond.server.errors import ApiError

_OPERATIONS = {1: "EQUALS", 2: "NOT_EQUALS", 3: "GREATER_THAN", 5: "GREATER_THAN_EQUALS", 6: "LESS_THAN",
               7: "LESS_THAN_EQUALS", 8: "IN", 9: "IS_SUBSTRING"}
_VALUE_KEYS = ("string_value", "stringValue", "int_value", "intValue", "long_value", "longValue",
               "timestamp_value", "timestampValue")
_LIST_KEYS = ("string_values", "stringValues", "int_values", "intValues", "long_values", "longValues")
MAX_PAGE_SIZE = 1000


def apply_filter(query: Select[Any], text: str | None, columns: dict[str, Any]) -> Select[Any]:
    """Narrow ``query`` by a Filter's predicates; ``columns`` maps API keys to columns."""
    if not text:
        return query
    try:
        predicates = json.loads(text).get("predicates") or []
    except (ValueError, AttributeError):
        raise ApiError(400, f"invalid filter: not a JSON Filter object: {text[:200]}") from None
    for predicate in predicates:
        key = predicate.get("key")
        if key not in columns:
            raise ApiError(400, f"invalid filter: unknown key {key!r} (known: {', '.join(sorted(columns))})")
        column = columns[key]
        operation = predicate.get("operation")
        operation = _OPERATIONS.get(operation, operation) if isinstance(operation, int) else str(operation)
        if operation == "IN":
            values = next((predicate[k] for k in _LIST_KEYS if k in predicate), None)
            values = values.get("values", []) if isinstance(values, dict) else values
            if not isinstance(values, list):
                raise ApiError(400, f"invalid filter: IN on {key!r} needs string_values")
            query = query.where(column.in_([str(v) for v in values]))
            continue
        value = next((predicate[k] for k in _VALUE_KEYS if k in predicate), None)
        if value is None:
            raise ApiError(400, f"invalid filter: predicate on {key!r} has no value")
        if operation == "EQUALS":
            query = query.where(column == value)
        elif operation == "NOT_EQUALS":
            query = query.where(column != value)
        elif operation == "IS_SUBSTRING":
            query = query.where(column.contains(str(value), autoescape=True))
        elif operation == "GREATER_THAN":
            query = query.where(column > value)
        elif operation == "GREATER_THAN_EQUALS":
            query = query.where(column >= value)
        elif operation == "LESS_THAN":
            query = query.where(column < value)
        elif operation == "LESS_THAN_EQUALS":
            query = query.where(column <= value)
        else:
            raise ApiError(400, f"invalid filter: unknown operation {predicate.get('operation')!r}")
    return query


def apply_sort(query: Select[Any], sort_by: str | None, columns: dict[str, Any], default: Any) -> Select[Any]:
    if not sort_by:
        return query.order_by(default)
    parts = sort_by.split()
    if len(parts) > 2 or parts[0] not in columns or (len(parts) == 2 and parts[1].lower() not in ("asc", "desc")):
        raise ApiError(400, f"invalid sort_by {sort_by!r}: expected FIELD or 'FIELD desc' (fields: {', '.join(sorted(columns))})")
    column = columns[parts[0]]
    return query.order_by(column.desc() if len(parts) == 2 and parts[1].lower() == "desc" else column.asc())


def page(session: Session, query: Select[Any], page_token: str | None, page_size: int | None) -> tuple[list[Any], int, str]:
    """One page of ``query``'s rows, the total count, and the token of the next page ('' at the end)."""
    offset = _offset(page_token)
    size = page_size if page_size and page_size > 0 else 20
    if size > MAX_PAGE_SIZE:
        raise ApiError(400, f"page_size {size} is over the maximum of {MAX_PAGE_SIZE}")
    total = session.scalar(select(func.count()).select_from(query.order_by(None).subquery())) or 0
    rows = list(session.execute(query.offset(offset).limit(size)))
    following = offset + len(rows)
    token = base64.urlsafe_b64encode(str(following).encode()).decode() if following < total else ""
    return rows, total, token


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

"""One page of a list: which rows (predicates), in what order, from where, how many.

The server turns KFP's ``filter``/``sort_by``/``page_token``/``page_size`` into a ``ListQuery``;
the store applies it to the columns each list exposes under KFP's field names, so no caller
above the store builds SQL. A key or sort field a list does not have is a UserError (HTTP 400).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, TypeVar, Unpack

from sqlalchemy import DateTime, Select, func, select
from sqlalchemy.orm import Session

from millpond.errors import UserError

AnySelect: TypeAlias = "Select[Unpack[tuple[Any, ...]]]"  # a SELECT of any columns

T = TypeVar("T")
OPERATIONS = ("EQUALS", "NOT_EQUALS", "GREATER_THAN", "GREATER_THAN_EQUALS", "LESS_THAN", "LESS_THAN_EQUALS",
              "IN", "IS_SUBSTRING")


@dataclass(frozen=True)
class Predicate:
    """``key OPERATION value``; for IN, ``value`` is a list."""

    key: str
    operation: str
    value: Any


@dataclass(frozen=True)
class ListQuery:
    predicates: tuple[Predicate, ...] = ()
    sort_key: str | None = None
    descending: bool = False
    offset: int = 0
    size: int = 20


@dataclass
class Page(Generic[T]):
    """The rows of one page, how many rows match in all, and where the next page starts (None at the end)."""

    items: list[T] = field(default_factory=list)
    total: int = 0
    next_offset: int | None = None


def _moment(key: str, value: Any) -> dt.datetime:
    """A filter's time: RFC 3339 text (KFP's ``timestamp_value``) or seconds since the epoch (as KFP stores times)."""
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return dt.datetime.fromtimestamp(value, dt.timezone.utc)
        if isinstance(value, str):
            moment = dt.datetime.fromisoformat(value)
            return (moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)).astimezone(dt.timezone.utc)
    except (ValueError, OverflowError, OSError):
        pass
    raise UserError(f"invalid filter: {key!r} is a time: give RFC 3339 text or seconds since the epoch, not {value!r}")


def _typed(key: str, column: Any, value: Any) -> Any:
    """``value`` as the column holds it: PostgreSQL compares only like with like (SQLite would compare
    anything, and match nothing), and stores no NUL character, so no text with one can match."""
    if isinstance(column.type, DateTime):
        return _moment(key, value)
    text = str(value)
    if "\x00" in text:
        raise UserError(f"invalid filter: the value for {key!r} holds a NUL character")
    return text


def filtered(query: AnySelect, predicates: tuple[Predicate, ...], columns: dict[str, Any]) -> AnySelect:
    """``query`` narrowed by ``predicates``; ``columns`` maps field names to columns (text or times)."""
    for predicate in predicates:
        if predicate.key not in columns:
            raise UserError(f"invalid filter: unknown key {predicate.key!r} (known: {', '.join(sorted(columns))})")
        column, operation = columns[predicate.key], predicate.operation
        if operation == "IS_SUBSTRING" and isinstance(column.type, DateTime):
            raise UserError(f"invalid filter: IS_SUBSTRING takes a text field, and {predicate.key!r} is a time")
        if operation == "IN":
            query = query.where(column.in_([_typed(predicate.key, column, v) for v in predicate.value]))
            continue
        value = _typed(predicate.key, column, predicate.value)
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
            raise UserError(f"invalid filter: unknown operation {operation!r}")
    return query


def ordered(query: AnySelect, spec: ListQuery, columns: dict[str, Any], default: Any) -> AnySelect:
    """``query`` sorted as asked, else by ``default`` (an ordering, or a tuple of them: a tie-breaker after the
    first keeps pages apart when rows share a time)."""
    if spec.sort_key is None:
        return query.order_by(*default) if isinstance(default, tuple) else query.order_by(default)
    if spec.sort_key not in columns:
        raise UserError(f"invalid sort_by {spec.sort_key!r}: expected FIELD or 'FIELD desc' "
                        f"(fields: {', '.join(sorted(columns))})")
    column = columns[spec.sort_key]
    return query.order_by(column.desc() if spec.descending else column.asc())


def one_page(session: Session, query: AnySelect, spec: ListQuery, columns: dict[str, Any], default: Any,
             single: bool = True) -> Page[Any]:
    """The page ``spec`` asks for of ``query`` (filtered and sorted); ``single``: rows of one entity, unwrapped."""
    query = ordered(filtered(query, spec.predicates, columns), spec, columns, default)
    total = session.scalar(select(func.count()).select_from(query.order_by(None).subquery())) or 0
    rows = list(session.execute(query.offset(spec.offset).limit(spec.size)))
    following = spec.offset + len(rows)
    items = [row[0] for row in rows] if single else [tuple(row) for row in rows]
    return Page(items, total, following if following < total else None)

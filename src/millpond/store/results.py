"""How many rows an INSERT, UPDATE or DELETE changed, typed.

``Session.execute`` and ``Connection.execute`` are typed to return a ``Result``; the result of a
DML statement is a ``CursorResult``, which alone carries ``rowcount``. Said once here, instead of
an ignore at every compare-and-set that reads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from sqlalchemy.engine import CursorResult, Result


def rows_changed(result: Result[Any]) -> int:
    """The rows the statement behind ``result`` matched (the DB-API's rowcount)."""
    return cast("CursorResult[Any]", result).rowcount

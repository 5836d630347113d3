"""Lineage (``store.lineage``'s tables) read as ML Metadata reads its store: nodes by MLMD id, type, name, URI,
context and filter, a page at a time; events of artifacts or executions; contexts of a node, a context's parent
and children; the neighbours of nodes one hop away (for a lineage subgraph).

Nodes are addressed by ``mlmd_id`` (``lineage.mlmd_id``: the int64 id an MLMD client sees) and read as the ORM
rows of ``store.lineage_tables``. ``namespaces`` limits every read to rows of those namespaces (a multi-user
caller's); None reads all. Conditions are typed records (:class:`Condition`) that ``mlmd.queries`` parses from
MLMD's ``filter_query``; no caller above this module builds SQL.
"""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypeVar

from sqlalchemy import ColumnElement, Select, and_, not_, or_, select
from sqlalchemy.orm import Session, sessionmaker

from millpond.errors import UserError
from millpond.store.db import session_factory
from millpond.store.lineage_tables import (
    LineageArtifact,
    LineageAssociation,
    LineageAttribution,
    LineageContext,
    LineageEvent,
    LineageExecution,
)
from millpond.store.listing import AnySelect

Kind = Literal["artifact", "execution", "context"]
Node: TypeAlias = LineageArtifact | LineageExecution | LineageContext
Operator = Literal["=", "!=", "<", "<=", ">", ">=", "IN", "NOT IN", "LIKE"]
OrderField = Literal["id", "create_time", "update_time"]
SelectT = TypeVar("SelectT", bound=AnySelect)  # a SELECT of any columns, kept as it is through a filter

_MODELS: dict[Kind, Any] = {"artifact": LineageArtifact, "execution": LineageExecution, "context": LineageContext}
# MLMD's filter attributes -> columns, per kind ("id" is the MLMD id; times are MLMD's milliseconds since the epoch).
_TEXT_FIELDS = {"type": "type", "name": "name", "uri": "uri", "state": "state", "last_known_state": "state"}
_TIME_FIELDS = {"create_time_since_epoch": "created_at", "last_update_time_since_epoch": "updated_at"}
FIELDS: dict[Kind, frozenset[str]] = {
    "artifact": frozenset({"id", "type", "name", "uri", "state", *_TIME_FIELDS}),
    "execution": frozenset({"id", "type", "name", "last_known_state", *_TIME_FIELDS}),
    "context": frozenset({"id", "type", "name", *_TIME_FIELDS}),
}


@dataclass(frozen=True)
class Condition:
    """``field operator values``: one of MLMD's node attributes (``FIELDS``), each value an int (ids, times in
    milliseconds) or text; IN and NOT IN take several, the others one."""

    field: str
    operator: Operator
    values: tuple[int | str, ...]


@dataclass(frozen=True)
class NodeQuery:
    """Which nodes of one kind: all ``conditions`` hold; ``context`` (an MLMD context id) has them (artifacts and
    executions); ``of_artifact``/``of_execution`` (MLMD ids) are theirs (contexts); ``parent_of``/``child_of``
    (MLMD context ids) are that context's parent or children (contexts); ``namespaces`` limit them."""

    conditions: tuple[Condition, ...] = ()
    context: int | None = None
    of_artifact: int | None = None
    of_execution: int | None = None
    parent_of: int | None = None
    child_of: int | None = None
    namespaces: frozenset[str] | None = None


@dataclass(frozen=True)
class PageRequest:
    """``size`` nodes from ``offset``, ordered by ``order`` (ties broken by id), ascending or not."""

    size: int
    offset: int = 0
    order: OrderField = "id"
    ascending: bool = True


@dataclass(frozen=True)
class NodePage:
    nodes: list[Any]
    next_offset: int | None  # None: this was the last page


@dataclass(frozen=True)
class EventRow:
    """An event with the MLMD ids of its artifact and execution (MLMD's Event names both by id)."""

    event: LineageEvent
    artifact_mlmd_id: int
    execution_mlmd_id: int


@dataclass(frozen=True)
class Link:
    """An attribution (artifact) or association (execution) of a node to a context, by MLMD ids."""

    context_mlmd_id: int
    node_mlmd_id: int


class LineageReads:
    """Read-only queries over one home's (or database URL's) lineage, as an MLMD endpoint asks them."""

    def __init__(self, database_url: str) -> None:
        self._sessions: sessionmaker[Session] = session_factory(database_url)

    def page(self, kind: Kind, query: NodeQuery, request: PageRequest) -> NodePage:
        """One page of the nodes of ``kind`` that ``query`` selects."""
        model = _MODELS[kind]
        statement = _ordered(self._selected(kind, query), model, request)
        with self._sessions() as session:
            rows = list(session.scalars(statement.offset(request.offset).limit(request.size + 1)))
        more = len(rows) > request.size
        return NodePage(rows[:request.size], request.offset + request.size if more else None)

    def by_ids(self, kind: Kind, mlmd_ids: Collection[int], namespaces: frozenset[str] | None) -> list[Any]:
        """The nodes of ``kind`` with these MLMD ids (unknown ids left out), by id."""
        model = _MODELS[kind]
        found: list[Any] = []
        with self._sessions() as session:
            for chunk in _chunks(mlmd_ids):
                found += session.scalars(_scoped(select(model).where(model.mlmd_id.in_(chunk)), model, namespaces))
        return sorted(found, key=lambda row: row.mlmd_id)

    def all(self, kind: Kind, query: NodeQuery, limit: int) -> list[Any]:
        """Up to ``limit`` nodes ``query`` selects, by id (a lineage subgraph's starting nodes)."""
        return self.page(kind, query, PageRequest(limit)).nodes

    def type_names(self, kind: Kind) -> list[str]:
        """The type names the nodes of ``kind`` have (every namespace's: a type is no namespace's)."""
        model = _MODELS[kind]
        with self._sessions() as session:
            return sorted(session.scalars(select(model.type).distinct()))

    def namespaces(self) -> set[str]:
        """Every namespace a node is recorded in."""
        with self._sessions() as session:
            found: set[str] = set()
            for model in _MODELS.values():
                found.update(session.scalars(select(model.namespace).distinct()))
            return found

    def events(self, *, artifacts: Collection[int] = (), executions: Collection[int] = (),
               namespaces: frozenset[str] | None = None) -> list[EventRow]:
        """The events of these artifacts or executions (MLMD ids), oldest first; an event is its execution's
        namespace's."""
        statement = (select(LineageEvent, LineageArtifact.mlmd_id, LineageExecution.mlmd_id)
                     .join(LineageArtifact, LineageArtifact.id == LineageEvent.artifact_id)
                     .join(LineageExecution, LineageExecution.id == LineageEvent.execution_id))
        statement = _scoped(statement, LineageExecution, namespaces)
        found: dict[str, EventRow] = {}
        with self._sessions() as session:
            for column, ids in ((LineageArtifact.mlmd_id, artifacts), (LineageExecution.mlmd_id, executions)):
                for chunk in _chunks(ids):
                    for event, artifact, execution in session.execute(statement.where(column.in_(chunk))):
                        found[event.id] = EventRow(event, artifact, execution)
        return sorted(found.values(), key=lambda row: (_aware(row.event.created_at), row.event.id))

    def links(self, kind: Literal["artifact", "execution"], node_ids: Collection[int],
              namespaces: frozenset[str] | None) -> list[Link]:
        """The attributions (artifacts) or associations (executions) of these nodes (MLMD ids) to contexts."""
        model = _MODELS[kind]
        table: Any = LineageAttribution if kind == "artifact" else LineageAssociation
        own = table.artifact_id if kind == "artifact" else table.execution_id
        statement = (select(LineageContext.mlmd_id, model.mlmd_id).select_from(table)
                     .join(model, model.id == own).join(LineageContext, LineageContext.id == table.context_id))
        statement = _scoped(_scoped(statement, model, namespaces), LineageContext, namespaces)
        with self._sessions() as session:
            return [Link(context, node) for chunk in _chunks(node_ids)
                    for context, node in session.execute(statement.where(model.mlmd_id.in_(chunk)))]

    def _selected(self, kind: Kind, query: NodeQuery) -> Select[tuple[Any]]:
        model = _MODELS[kind]
        statement = select(model)
        for condition in query.conditions:
            statement = statement.where(_clause(model, condition))
        if query.context is not None:
            link: Any = LineageAttribution if kind == "artifact" else LineageAssociation
            own = link.artifact_id if kind == "artifact" else link.execution_id
            statement = statement.where(model.id.in_(
                select(own).join(LineageContext, LineageContext.id == link.context_id)
                .where(LineageContext.mlmd_id == query.context)))
        for node_id, node, link in ((query.of_artifact, LineageArtifact, LineageAttribution),
                                    (query.of_execution, LineageExecution, LineageAssociation)):
            if node_id is not None:
                own = link.artifact_id if link is LineageAttribution else link.execution_id
                statement = statement.where(model.id.in_(
                    select(link.context_id).join(node, node.id == own).where(node.mlmd_id == node_id)))
        if query.parent_of is not None:
            statement = statement.where(model.id.in_(
                select(LineageContext.parent_id).where(LineageContext.mlmd_id == query.parent_of)))
        if query.child_of is not None:
            statement = statement.where(model.parent_id.in_(
                select(LineageContext.id).where(LineageContext.mlmd_id == query.child_of)))
        return _scoped(statement, model, query.namespaces)


CHUNK = 1000  # ids bound in one IN (...): SQLite and PostgreSQL bound the parameters of one statement


def _chunks(ids: Collection[int]) -> list[list[int]]:
    ordered = sorted(set(ids))
    return [ordered[start:start + CHUNK] for start in range(0, len(ordered), CHUNK)]


def _aware(moment: dt.datetime) -> dt.datetime:
    """SQLite gives times back naive (they were written in UTC); PostgreSQL aware: one order for both."""
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def _scoped(statement: SelectT, model: Any, namespaces: frozenset[str] | None) -> SelectT:
    return statement if namespaces is None else statement.where(model.namespace.in_(sorted(namespaces)))


def _ordered(statement: Select[Any], model: Any, request: PageRequest) -> Select[Any]:
    """Ordered as MLMD orders a list: by the field asked, then by id; contexts have no update time of their own,
    so their creation time stands for it."""
    column: Any = {"id": model.mlmd_id, "create_time": model.created_at,
                   "update_time": getattr(model, "updated_at", model.created_at)}[request.order]
    if request.order == "id":
        return statement.order_by(column.asc() if request.ascending else column.desc())
    tie = model.mlmd_id.asc() if request.ascending else model.mlmd_id.desc()
    return statement.order_by(column.asc() if request.ascending else column.desc(), tie)


def _clause(model: Any, condition: Condition) -> ColumnElement[bool]:
    """One condition as SQL, its values typed as the column holds them (PostgreSQL compares like with like)."""
    column: Any
    values: list[Any]
    name = condition.field
    if name == "id":
        column, values = model.mlmd_id, [int(v) for v in condition.values]
    elif name in _TIME_FIELDS:
        return _time_clause(getattr(model, _TIME_FIELDS[name], model.created_at), condition)
    else:
        column, values = getattr(model, _TEXT_FIELDS[name]), [str(v) for v in condition.values]
    return _compare(column, condition.operator, values)


def _time_clause(column: Any, condition: Condition) -> ColumnElement[bool]:
    """A condition on a time given in MLMD's milliseconds, compared at that precision: a row's time (kept to the
    microsecond) is the millisecond it falls in, so ``= T`` holds for the time an answer gave as ``T``."""
    millisecond = dt.timedelta(milliseconds=1)
    starts = [_moment(v) for v in condition.values]
    within = [and_(column >= start, column < start + millisecond) for start in starts]
    op = condition.operator
    if op in ("=", "IN"):
        return or_(*within)
    if op in ("!=", "NOT IN"):
        return not_(or_(*within))
    if op == "LIKE":
        raise UserError("invalid filter_query: LIKE takes text, not a time")
    start = starts[0]
    bounds: dict[str, ColumnElement[bool]] = {"<": column < start, "<=": column < start + millisecond,
                                              ">": column >= start + millisecond, ">=": column >= start}
    return bounds[op]


def _moment(milliseconds: int | str) -> dt.datetime:
    try:
        return dt.datetime.fromtimestamp(int(milliseconds) / 1000, dt.timezone.utc)
    except (ValueError, OverflowError, OSError):
        raise UserError(f"invalid filter_query: {milliseconds} is no time in milliseconds since the epoch") from None


def _compare(column: Any, op: Operator, values: list[Any]) -> ColumnElement[bool]:
    if op == "IN":
        return column.in_(values)  # type: ignore[no-any-return]  # the column is Any here (its model varies)
    if op == "NOT IN":
        return column.not_in(values)  # type: ignore[no-any-return]
    if op == "LIKE":
        return column.like(values[0])  # type: ignore[no-any-return]
    compared: ColumnElement[bool] = _COMPARISONS[op](column, values[0])
    return compared


_COMPARISONS = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
                ">=": operator.ge}

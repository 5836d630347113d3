"""What every route shares (settings, the store, the run workers), and how a route reaches it.

Route modules import ``state_of`` from here, never from ``app``: ``app`` imports the route
modules to mount them, so the dependency points one way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import Request

from millpond.server.executor import RunExecutor
from millpond.settings import Settings
from millpond.store.catalog import PipelineStore
from millpond.store.runs import RunStore

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker


@dataclass
class ServerState:
    """Settings, the stores (runs, tasks and experiments; pipelines), and the workers executing runs.

    ``sessions`` is the raw session factory, kept only for ``recurring.py`` and
    ``RunExecutor.resume_in_flight`` until they move to the store's API (routes never use it).
    """

    settings: Settings
    store: RunStore
    pipelines: PipelineStore
    executor: RunExecutor
    sessions: sessionmaker[Session]


def state_of(request: Request) -> ServerState:
    return request.app.state.millpond  # type: ignore[no-any-return]

"""What every route shares (settings, the store, the run workers), and how a route reaches it.

Route modules import ``state_of`` from here, never from ``app``: ``app`` imports the route
modules to mount them, so the dependency points one way.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from millpond.server.executor import RunExecutor
from millpond.settings import Settings
from millpond.store.catalog import PipelineStore
from millpond.store.lineage_store import LineageStore
from millpond.store.recurring import RecurringRunStore
from millpond.store.runs import RunStore
from millpond.store.training import JobStore


@dataclass
class ServerState:
    """Settings, the stores (runs, tasks and experiments; pipelines; recurring runs; training jobs; lineage), and the
    workers executing runs.

    Routes reach the database only through these stores' methods, never through raw sessions.
    """

    settings: Settings
    store: RunStore
    pipelines: PipelineStore
    executor: RunExecutor
    recurring: RecurringRunStore
    jobs: JobStore
    lineage: LineageStore


def state_of(request: Request) -> ServerState:
    return request.app.state.millpond

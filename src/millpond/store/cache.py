"""The execution cache: a key per task execution, and the outputs it produced."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from millpond.store.db import session_factory
from millpond.store.models import CacheEntry


class CacheStore:
    def __init__(self, database_url: str) -> None:
        self._sessions: sessionmaker[Session] = session_factory(database_url)

    def get(self, key: str) -> CacheEntry | None:
        with self._sessions() as session:
            return session.get(CacheEntry, key)

    def put(self, key: str, run_id: str, task_id: str, outputs: dict[str, Any]) -> None:
        with self._sessions() as session:
            session.merge(CacheEntry(key=key, run_id=run_id, task_id=task_id, outputs=outputs))
            session.commit()

    def forget(self, key: str) -> None:
        with self._sessions() as session:
            entry = session.get(CacheEntry, key)
            if entry is not None:
                session.delete(entry)
                session.commit()

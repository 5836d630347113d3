"""The execution cache: a key per task execution, and the outputs it produced."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from millpond.store.db import session_factory
from millpond.store.models import CacheEntry


class CacheStore:
    def __init__(self, database_url: str) -> None:
        self._sessions: sessionmaker[Session] = session_factory(database_url)

    def get(self, key: str) -> CacheEntry | None:
        with self._sessions() as session:
            return session.get(CacheEntry, key)

    def forget(self, key: str) -> None:
        with self._sessions() as session:
            entry = session.get(CacheEntry, key)
            if entry is not None:
                session.delete(entry)
                session.commit()

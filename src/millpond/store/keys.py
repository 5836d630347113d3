"""Row identities and times, shared by the SQLAlchemy models and the stdlib journal."""

from __future__ import annotations

import datetime as dt
import uuid


def new_id() -> str:
    return str(uuid.uuid4())


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)

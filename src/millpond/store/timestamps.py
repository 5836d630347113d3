"""Timestamps as millpond shows them: ISO 8601 in UTC (SQLite hands them back without a zone)."""

from __future__ import annotations

import datetime as dt


def iso(moment: dt.datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.isoformat()

"""Katib's JSON collector format (File kind, ``format: JSON``): one JSON object per line.

As Katib's ``parseLogsInJsonFormat``: a wanted metric is read from a line's key of that name when
its value is a string (``{"loss": "0.22"}``; Katib ignores numbers, and so does millpond), and the
line's ``timestamp`` key gives the time: an RFC 3339 string, or Unix seconds as a number. A line that
is not a JSON object fails the whole file, as in Katib; blank lines are skipped.

One difference: Katib reads the digits after a numeric timestamp's point as nanoseconds
(``1638422847.28721`` becomes ``…:27.000028721``); millpond reads them as the fraction of a second
they are, so the latest value is the one written last.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from millpond.errors import UserError
from millpond.katib.metrics import timestamps
from millpond.katib.metrics.records import ZERO_TIME, MetricLog
from millpond.katib.metrics.text import unavailable_unless_reported, wanted_names

TIMESTAMP_KEY = "timestamp"


def _time(value: Any) -> str:
    if isinstance(value, str):
        return value if timestamps.parse(value) is not None else ZERO_TIME
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return timestamps.from_unix(value) or ZERO_TIME
    return ZERO_TIME


def parse_json_lines(text: str, names: Sequence[str], where: str) -> list[MetricLog]:
    """The MetricLogs of a JSON-lines log; ``where`` names the file in an error."""
    wanted = wanted_names(names)
    logs: list[MetricLog] = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise UserError(f"{where} line {number}: not a JSON object: {exc}") from None
        if not isinstance(record, dict):
            raise UserError(f"{where} line {number}: not a JSON object but {type(record).__name__}")
        time = _time(record.get(TIMESTAMP_KEY))
        logs.extend(MetricLog(time, name, record[name]) for name in wanted if isinstance(record.get(name), str))
    return unavailable_unless_reported(logs, wanted[0])

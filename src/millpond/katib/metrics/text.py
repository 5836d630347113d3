"""Katib's TEXT collector (the StdOut and File kinds): ``name=value`` pairs in a trial's log lines.

Katib's file-metricscollector reads the log line by line: a line that names none of the wanted
metrics is skipped, a line whose first word is an RFC 3339 time gives its values that time (the
others get Go's zero time), and every filter match whose name is a wanted metric is one MetricLog.
:class:`TextParser` does the same on a log that grows: it is fed what the trial printed since the
last call, keeps a line that is not finished yet, and reads it at :meth:`TextParser.finish`.
"""

from __future__ import annotations

from collections.abc import Sequence

from millpond.errors import UserError
from millpond.katib.metrics import filters, timestamps
from millpond.katib.metrics.records import UNAVAILABLE, ZERO_TIME, MetricLog

FILTER_PATH = "spec.metricsCollectorSpec.source.filter.metricsFormat"


def wanted_names(names: Sequence[str]) -> tuple[str, ...]:
    """The wanted names, the objective first (Katib's order), checked to be non-empty strings."""
    if isinstance(names, str) or not names:
        raise UserError("spec.objective.objectiveMetricName: must be specified")
    for name in names:
        if not isinstance(name, str) or not name:
            raise UserError(f"spec.objective: metric name {name!r} must be a non-empty string")
    return tuple(names)


def line_time(line: str) -> str:
    """The line's own time when its first word (up to the first space) is RFC 3339, else the zero time."""
    first, space, _ = line.partition(" ")
    return first if space and timestamps.parse(first) is not None else ZERO_TIME


def parse_line(line: str, names: Sequence[str], metrics_format: Sequence[str]) -> list[MetricLog]:
    """The MetricLogs of one log line (Katib's ``parseLogsInTextFormat`` for one line)."""
    if not any(name in line for name in names):
        return []
    time = line_time(line)
    return [MetricLog(time, name, value) for name, value in filters.pairs(line, metrics_format) if name in names]


def unavailable_unless_reported(logs: list[MetricLog], objective: str) -> list[MetricLog]:
    """Katib's ``newObservationLog``: without one value of the objective, only "unavailable" is reported."""
    if any(log.name == objective for log in logs):
        return logs
    return [MetricLog(ZERO_TIME, objective, UNAVAILABLE)]


class TextParser:
    """Reads a growing TEXT log (a primary container's stdout, or a File collector's file).

    ``feed`` returns the MetricLogs of the lines it completed; ``finish`` those of the last,
    unterminated line, or the objective's "unavailable" log when the objective never appeared
    (Katib reports it then; the additional metrics already returned by ``feed`` stay reported).
    """

    def __init__(self, metric_names: Sequence[str], metrics_format: Sequence[str]) -> None:
        self._names = wanted_names(metric_names)
        filters.check(tuple(metrics_format), FILTER_PATH)
        self._formats = tuple(metrics_format)
        self._partial = ""
        self._objective_seen = False
        self._finished = False

    def feed(self, text: str) -> list[MetricLog]:
        if self._finished:
            raise UserError("the metrics log was already finished: nothing more can be fed")
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        return self._read(lines)

    def finish(self) -> list[MetricLog]:
        if self._finished:
            return []
        self._finished = True
        logs = self._read([self._partial] if self._partial else [])
        self._partial = ""
        if not self._objective_seen:
            logs.append(MetricLog(ZERO_TIME, self._names[0], UNAVAILABLE))
        return logs

    def _read(self, lines: list[str]) -> list[MetricLog]:
        logs = [log for line in lines for log in parse_line(line, self._names, self._formats)]
        self._objective_seen = self._objective_seen or any(log.name == self._names[0] for log in logs)
        return logs


def parse_text(text: str, names: Sequence[str], metrics_format: Sequence[str]) -> list[MetricLog]:
    """A whole TEXT log at once, as Katib's collector reads it when the trial ends."""
    wanted = wanted_names(names)
    filters.check(tuple(metrics_format), FILTER_PATH)
    logs = [log for line in text.split("\n") for log in parse_line(line, wanted, metrics_format)]
    return unavailable_unless_reported(logs, wanted[0])

"""The records the metrics collectors hand to the controller: Katib's MetricLog, CollectorSpec and Metric.

They mirror Katib's own types (``api.proto``'s ``MetricLog``, ``common_types.go``'s
``MetricsCollectorSpec`` and ``Metric``) so the controller can store and show them as Katib does:
values stay strings, as Katib keeps them, and a metric that never appeared reads ``unavailable``.
"""

from __future__ import annotations

from dataclasses import dataclass

# Katib's consts.UnavailableMetricValue: the value of a metric the trial never reported.
UNAVAILABLE = "unavailable"
# Go's time.Time{}.UTC().Format(time.RFC3339): the time of a log line that carries none.
ZERO_TIME = "0001-01-01T00:00:00Z"


@dataclass(frozen=True)
class MetricLog:
    """One reported value: Katib's ``ObservationLog.MetricLog`` (RFC 3339 ``time``, string ``value``)."""

    time: str
    name: str
    value: str


@dataclass(frozen=True)
class CollectorSpec:
    """An Experiment's ``metricsCollectorSpec`` after Katib's defaulting and validation.

    ``kind`` is Katib's collector kind: ``StdOut``, ``File``, ``TensorFlowEvent`` or ``Push`` (the
    trial reports its own metrics; Katib's name for "no collector"). ``path`` is the file (File) or
    directory (TensorFlowEvent) the trial writes; ``file_format`` ``TEXT`` or ``JSON`` (File only);
    ``metrics_format`` the filter regexes, Katib's default when the spec has none. ``custom_command``
    is always None: millpond refuses Custom collectors (docs/guides/katib.md says why).
    """

    kind: str
    path: str | None
    file_format: str | None
    metrics_format: tuple[str, ...]
    custom_command: tuple[str, ...] | None = None


@dataclass(frozen=True)
class MetricValue:
    """Katib's ``Observation.metrics[]`` entry: the smallest, largest and latest value seen."""

    min: str
    max: str
    latest: str

"""What the Katib controller calls to collect a trial's metrics (the contract in docs/guides/katib.md).

- :func:`collector_spec`: an Experiment's metricsCollectorSpec, defaulted and validated;
- :class:`StdOutParser`: the primary container's log, fed as it grows (the StdOut kind);
- :func:`collect_file`: a File collector's file once the trial is done (TEXT or JSON lines);
- :func:`collect_tfevents`: a TensorFlowEvent collector's directory once the trial is done;
- :func:`observation`: min/max/latest per metric, Katib's Observation.

Custom collectors are refused by :func:`collector_spec` (there is no ``run_custom``): see spec.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from millpond.errors import UserError
from millpond.katib.metrics.jsonlines import parse_json_lines
from millpond.katib.metrics.observation import default_strategies, objective_value, observation
from millpond.katib.metrics.records import UNAVAILABLE, CollectorSpec, MetricLog, MetricValue
from millpond.katib.metrics.spec import collector_spec
from millpond.katib.metrics.text import TextParser as StdOutParser
from millpond.katib.metrics.text import parse_text
from millpond.katib.metrics.tfevents import collect_tfevents

__all__ = [
    "UNAVAILABLE", "CollectorSpec", "MetricLog", "MetricValue", "StdOutParser", "collect_file", "collect_tfevents",
    "collector_spec", "default_strategies", "objective_value", "observation",
]


def collect_file(path: Path, metric_names: Sequence[str], file_format: str,
                 metrics_format: Sequence[str]) -> list[MetricLog]:
    """The MetricLogs of a File collector's file (Katib's ``CollectObservationLog``).

    A file the trial never wrote yields the objective's "unavailable" log, as Katib reports when the
    objective is missing; a file that cannot be read as text is a UserError naming it.
    """
    if file_format not in ("TEXT", "JSON"):
        raise UserError(f"spec.metricsCollectorSpec.source.fileSystemPath.format: must be TEXT or JSON, "
                        f"not {file_format!r}")
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        raise UserError(f"metrics file {path}: cannot be read: {exc.strerror or exc}") from None
    if file_format == "JSON":
        return parse_json_lines(text, metric_names, f"metrics file {path}")
    return parse_text(text, metric_names, metrics_format)

"""kfp 1.x's UI outputs, read as Kubeflow's v1 UI read them, and bounded.

A kfp 1.x step shows things in the UI by writing two optional output artifacts:

- ``mlpipeline-metrics``: ``{"metrics": [{"name", "numberValue", "format": "RAW"|"PERCENTAGE"}]}``,
  the run's metrics (v1's runs list showed them as columns);
- ``mlpipeline-ui-metadata``: ``{"outputs": [{"type", "storage", "source", ...}]}``, one
  visualization each: ``markdown``, ``table`` and ``confusion_matrix``/``roc`` (CSV, with
  ``header`` or ``schema`` and ``labels``), ``web-app`` (an HTML page), ``tensorboard``.

``source`` is the content itself (``storage: inline``) or where it lies. Here it is read only
when it is one of the run's own artifacts (``read_source`` decides and raises ``SourceError``
otherwise): never a host path, a ``file://`` or ``http`` URL or a path climbing with ``..``. Each
output is checked alone, so one bad entry is an error text in its place and the others still
show. Everything is bounded (outputs, metrics, rows, columns, text), and nothing here is HTML:
the UI renders Markdown and tables as text nodes and a web app in a sandboxed frame.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from millpond.documents import load_json
from millpond.errors import UserError

METADATA_ARTIFACT = "mlpipeline-ui-metadata"
METRICS_ARTIFACT = "mlpipeline-metrics"
MAX_DOCUMENT_BYTES = 1024 * 1024
MAX_TEXT_CHARS = 512 * 1024
MAX_OUTPUTS = 50
MAX_METRICS = 50
MAX_ROWS = 1000
MAX_COLUMNS = 50
MAX_NAME = 64
TYPES = ("markdown", "table", "confusion_matrix", "roc", "web-app", "tensorboard")
FORMATS = ("RAW", "PERCENTAGE")


class SourceError(UserError):
    """A ``source`` that may not be read (not an artifact of this run), or could not be."""


@dataclass(frozen=True)
class Metric:
    name: str
    value: float
    format: str  # RAW or PERCENTAGE

    def view(self) -> dict[str, Any]:
        return {"name": self.name, "number_value": self.value, "format": self.format}


def _document(data: bytes, what: str, key: str) -> list[Any]:
    if len(data) > MAX_DOCUMENT_BYTES:
        raise UserError(f"{what} is over {MAX_DOCUMENT_BYTES // 1024} KiB")
    try:
        document = load_json(data.decode("utf-8"), what)
    except (UnicodeDecodeError, UserError) as exc:
        raise UserError(f"{what} is not JSON: {str(exc).splitlines()[0] if str(exc) else 'undecodable'}") from None
    entries = document.get(key) if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise UserError(f"{what}: expected an object with a {key!r} list")
    return entries


def read_metrics(data: bytes) -> list[Metric]:
    """The metrics of an ``mlpipeline-metrics`` file; bad entries are left out (v1's UI skipped them too)."""
    metrics: list[Metric] = []
    for entry in _document(data, METRICS_ARTIFACT, "metrics")[:MAX_METRICS]:
        if not isinstance(entry, dict):
            continue
        name, value, form = entry.get("name"), entry.get("numberValue"), entry.get("format") or "RAW"
        if not isinstance(name, str) or not name or len(name) > MAX_NAME:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        metrics.append(Metric(name, float(value), form if form in FORMATS else "RAW"))
    return metrics


def read_visualizations(data: bytes, read_source: Callable[[str], bytes]) -> list[dict[str, Any]]:
    """Each output of an ``mlpipeline-ui-metadata`` file, its content read and shaped for the UI."""
    shown: list[dict[str, Any]] = []
    for entry in _document(data, METADATA_ARTIFACT, "outputs")[:MAX_OUTPUTS]:
        kind = entry.get("type") if isinstance(entry, dict) else None
        view: dict[str, Any] = {"type": kind if isinstance(kind, str) else "?"}
        try:
            if not isinstance(entry, dict) or kind not in TYPES:
                raise UserError(f"unsupported output type {str(kind)[:40]!r} (one of {', '.join(TYPES)})")
            view.update(_output(kind, entry, read_source))
        except UserError as exc:
            view["error"] = str(exc)
        shown.append(view)
    return shown


def _output(kind: str, entry: dict[str, Any], read_source: Callable[[str], bytes]) -> dict[str, Any]:
    source = entry.get("source")
    if not isinstance(source, str) or not source:
        raise UserError("no source")
    if kind == "tensorboard":  # v1 started a TensorBoard server for it; millpond serves none
        return {"text": f"TensorBoard is not served by millpond; its logs are at {source[:500]}"}
    text = source if entry.get("storage") == "inline" else _decoded(read_source(source), source)
    if len(text) > MAX_TEXT_CHARS:
        raise UserError(f"the content is over {MAX_TEXT_CHARS // 1024} KiB")
    if kind in ("markdown", "web-app"):
        return {"text": text}
    form = entry.get("format") or "csv"
    if form != "csv":
        raise UserError(f"format {str(form)[:20]!r} is not supported (csv)")
    rows = _csv_rows(text)
    view: dict[str, Any] = {"rows": rows}
    header = entry.get("header")
    schema = entry.get("schema")
    if isinstance(header, list):
        view["header"] = [str(h)[:200] for h in header[:MAX_COLUMNS]]
    elif isinstance(schema, list):
        view["header"] = [str(c.get("name", ""))[:200] if isinstance(c, dict) else "" for c in schema[:MAX_COLUMNS]]
    if kind == "confusion_matrix":
        return _confusion_matrix(rows, entry.get("labels"))
    if kind == "roc":
        return {"points": _roc_points(rows)}
    return view


def _decoded(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{source[:200]} is not UTF-8 text") from None


def _csv_rows(text: str) -> list[list[str]]:
    rows: list[list[str]] = []
    try:
        for row in csv.reader(io.StringIO(text)):
            if len(rows) >= MAX_ROWS:
                break
            if row:
                rows.append([cell[:1000] for cell in row[:MAX_COLUMNS]])
    except csv.Error as exc:
        raise UserError(f"not CSV: {exc}") from None
    return rows


def _confusion_matrix(rows: list[list[str]], labels: Any) -> dict[str, Any]:
    """v1's CSV (target, predicted, count) as a grid over ``labels`` (or the labels the rows name)."""
    names = [str(label)[:200] for label in labels[:MAX_COLUMNS]] if isinstance(labels, list) else []
    for row in rows:
        for label in row[:2]:
            if label not in names and len(names) < MAX_COLUMNS:
                names.append(label)
    grid = [[0.0] * len(names) for _ in names]
    for row in rows:
        if len(row) < 3 or row[0] not in names or row[1] not in names:
            raise UserError("a confusion matrix row is not target,predicted,count over its labels")
        grid[names.index(row[0])][names.index(row[1])] += _number(row[2])
    return {"labels": names, "matrix": grid}


def _roc_points(rows: list[list[str]]) -> list[dict[str, float | None]]:
    """v1's CSV (fpr, tpr, threshold) as points."""
    points: list[dict[str, float | None]] = []
    for row in rows:
        if len(row) < 2:
            raise UserError("a ROC row is not fpr,tpr,threshold")
        points.append({"fpr": _number(row[0]), "tpr": _number(row[1]),
                       "threshold": _number(row[2]) if len(row) > 2 else None})
    return points


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{text[:40]!r} is not a number") from None
    if not math.isfinite(value):
        raise UserError(f"{text[:40]!r} is not a finite number")
    return value

"""An Experiment's ``metricsCollectorSpec``: Katib's defaulting and validation, as its webhooks do them.

Defaulting (Katib's ``setDefaultMetricsCollector``): no collector means ``StdOut``; ``File`` gets
kind ``File``, path ``/var/log/katib/metrics.log`` and format ``TEXT``; ``TensorFlowEvent`` gets
kind ``Directory`` and path ``/var/log/katib/tfevent/``. Validation (``validateMetricsCollector``):
File needs an absolute file path and TEXT or JSON (and no filter with JSON), TensorFlowEvent an
absolute directory and no format, every ``metricsFormat`` compiles with two groups. A TEXT
collector's ``metrics_format`` holds Katib's default filter when the spec names none.

Refused here, each in one line: ``PrometheusMetric`` (Katib scrapes the trial pod's HTTP endpoint
from a sidecar; trials here have no pod network to scrape) and ``Custom`` (a sidecar image that
reports to Katib's DB manager over gRPC: millpond runs no sidecars and no DB manager).
"""

from __future__ import annotations

import importlib.util
import posixpath
from collections.abc import Mapping
from typing import Any

from millpond.datasets.fields import show
from millpond.errors import UserError
from millpond.katib.metrics import filters
from millpond.katib.metrics.records import CollectorSpec

DEFAULT_FILE_PATH = "/var/log/katib/metrics.log"
DEFAULT_TFEVENT_DIR = "/var/log/katib/tfevent/"
KINDS = ("StdOut", "File", "TensorFlowEvent", "Push", "PrometheusMetric", "Custom")
REFUSED = {
    "PrometheusMetric": "the PrometheusMetric collector scrapes the trial pod's HTTP port from a sidecar; "
                        "millpond's trials have no pod to scrape: print the metrics (StdOut) or write a File",
    "Custom": "Custom collectors are sidecar images reporting to Katib's DB manager over gRPC, which millpond "
              "does not run: use StdOut, File or TensorFlowEvent",
}


def _mapping(parent: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UserError(f"{where}: must be an object, not {show(value)}")
    return value


def _string(parent: Mapping[str, Any], key: str, where: str) -> str:
    value = parent.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise UserError(f"{where}: must be a string, not {show(value)}")
    return value


def collector_spec(experiment_spec: Mapping[str, Any], *, path: str = "spec.metricsCollectorSpec") -> CollectorSpec:
    """The collector an Experiment's spec asks for, defaulted and validated; UserError names the field."""
    if not isinstance(experiment_spec, Mapping):
        raise UserError(f"{path.rpartition('.')[0] or 'spec'}: must be an object")
    spec = _mapping(experiment_spec, "metricsCollectorSpec", path)
    collector = _mapping(spec, "collector", f"{path}.collector")
    kind = _string(collector, "kind", f"{path}.collector.kind") or "StdOut"
    if kind not in KINDS:
        raise UserError(f"{path}.collector.kind: invalid metrics collector kind: {show(kind)} "
                        f"(one of StdOut, File, TensorFlowEvent, Push)")
    if kind in REFUSED:
        raise UserError(f"{path}.collector.kind: {REFUSED[kind]}")
    source = _mapping(spec, "source", f"{path}.source")
    formats = _metrics_format(source, f"{path}.source.filter")
    system = _mapping(source, "fileSystemPath", f"{path}.source.fileSystemPath")
    where = f"{path}.source.fileSystemPath"
    fs_kind = _string(system, "kind", f"{where}.kind")
    fs_path = _string(system, "path", f"{where}.path")
    fs_format = _string(system, "format", f"{where}.format")
    if kind == "File":
        fs_kind, fs_path, fs_format = fs_kind or "File", fs_path or DEFAULT_FILE_PATH, fs_format or "TEXT"
        if fs_kind != "File":
            raise UserError(f"{where}.kind: must be File for the File collector, not {show(fs_kind)}")
        _absolute(fs_path, f"{where}.path", "file path where metrics file exists")
        if fs_format not in ("TEXT", "JSON"):
            raise UserError(f"{where}.format: must be TEXT or JSON, not {show(fs_format)}")
        if fs_format == "JSON" and "filter" in source and source["filter"] is not None:
            raise UserError(f"{path}.source.filter: filter must be nil when format of metrics file is json")
        text_filters = (formats or (filters.DEFAULT_FILTER,)) if fs_format == "TEXT" else ()
        return CollectorSpec("File", fs_path, fs_format, text_filters)
    if kind == "TensorFlowEvent":
        fs_kind, fs_path = fs_kind or "Directory", fs_path or DEFAULT_TFEVENT_DIR
        if fs_kind != "Directory":
            raise UserError(f"{where}.kind: must be Directory for the TensorFlowEvent collector, not {show(fs_kind)}")
        _absolute(fs_path, f"{where}.path", "directory path where tensorflow event files exist")
        if fs_format:
            raise UserError(f"{where}.format: must be empty for the TensorFlowEvent collector, not {show(fs_format)}")
        if importlib.util.find_spec("tensorboard") is None:
            raise UserError(f"{path}.collector.kind: the TensorFlowEvent collector reads event files with "
                            f"tensorboard, which is not installed: pip install 'millpond[katib]'")
        return CollectorSpec("TensorFlowEvent", fs_path, None, formats)
    return CollectorSpec(kind, None, None, (formats or (filters.DEFAULT_FILTER,)) if kind == "StdOut" else formats)


def _absolute(value: str, where: str, what: str) -> None:
    if not posixpath.isabs(value) or "\x00" in value:
        raise UserError(f"{where}: {what} is required as an absolute path, not {show(value)}")


def _metrics_format(source: Mapping[str, Any], where: str) -> tuple[str, ...]:
    filter_spec = _mapping(source, "filter", where)
    formats = filter_spec.get("metricsFormat")
    if formats is None:
        return ()
    if not isinstance(formats, list):
        raise UserError(f"{where}.metricsFormat: must be a list of regular expressions, not {show(formats)}")
    filters.check(formats, f"{where}.metricsFormat")
    return tuple(formats)

"""Katib's JSON-lines File format, and the metricsCollectorSpec defaulting and validation of Katib's webhooks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from millpond.katib.metrics.api import collect_file, collector_spec
from millpond.katib.metrics.filters import DEFAULT_FILTER
from millpond.katib.metrics.records import UNAVAILABLE, ZERO_TIME, CollectorSpec
from tests.katib_lib.katib_lib_support import at, corpus_experiments


def test_json_lines_read_string_values_and_their_timestamps(tmp_path: Path) -> None:
    # the lines Katib's JSON example trial writes: values as strings, a Unix or RFC 3339 timestamp
    lines = [
        {"checkpoint_path": "", "global_step": "0", "loss": "0.2208", "timestamp": 1638422847.25, "trial": "0"},
        {"loss": "0.15", "accuracy": "0.9", "timestamp": "2021-12-02T05:27:28.5Z"},
        {"loss": 0.1, "timestamp": 1638422849},  # a number: Katib reads only strings
        {"accuracy": "0.95"},  # no timestamp
        {"accuracy": "0.96", "timestamp": "yesterday"},
        {"accuracy": "0.97", "timestamp": True},
    ]
    path = tmp_path / "metrics.json"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    logs = collect_file(path, ["accuracy", "loss"], "JSON", [])
    assert [(log.time, log.name, log.value) for log in logs] == [
        ("2021-12-02T05:27:27.25Z", "loss", "0.2208"),
        ("2021-12-02T05:27:28.5Z", "accuracy", "0.9"),
        ("2021-12-02T05:27:28.5Z", "loss", "0.15"),
        (ZERO_TIME, "accuracy", "0.95"),
        (ZERO_TIME, "accuracy", "0.96"),
        (ZERO_TIME, "accuracy", "0.97"),
    ]


def test_json_lines_without_the_objective_are_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    path.write_text('{"loss": "1"}\n')
    assert [(log.name, log.value) for log in collect_file(path, ["accuracy", "loss"], "JSON", [])] == [
        ("accuracy", UNAVAILABLE)]


@pytest.mark.parametrize("line", ["loss=0.5", "[1, 2]", '{"loss": "1"', "null"])
def test_a_line_that_is_not_a_json_object_fails_the_file_naming_it(tmp_path: Path, line: str) -> None:
    path = tmp_path / "metrics.json"
    path.write_text('{"loss": "1"}\n' + line + "\n")
    with at(f"metrics file {path} line 2"):
        collect_file(path, ["loss"], "JSON", [])


def spec(collector: dict[str, Any] | None) -> dict[str, Any]:
    return {"metricsCollectorSpec": collector} if collector is not None else {}


@pytest.mark.parametrize(("collector", "expected"), [
    (None, CollectorSpec("StdOut", None, None, (DEFAULT_FILTER,))),
    ({"collector": {"kind": "StdOut"}, "source": {"filter": {"metricsFormat": [r"(\w+):(\d+)"]}}},
     CollectorSpec("StdOut", None, None, (r"(\w+):(\d+)",))),
    ({"collector": {"kind": "File"}}, CollectorSpec("File", "/var/log/katib/metrics.log", "TEXT", (DEFAULT_FILTER,))),
    ({"collector": {"kind": "File"}, "source": {"fileSystemPath": {"path": "/tmp/m.json", "format": "JSON"}}},
     CollectorSpec("File", "/tmp/m.json", "JSON", ())),
    ({"collector": {"kind": "TensorFlowEvent"}},
     CollectorSpec("TensorFlowEvent", "/var/log/katib/tfevent/", None, ())),
    ({"collector": {"kind": "Push"}}, CollectorSpec("Push", None, None, ())),
])
def test_katib_defaults(collector: dict[str, Any] | None, expected: CollectorSpec) -> None:
    assert collector_spec(spec(collector)) == expected


BAD = "spec.metricsCollectorSpec"


@pytest.mark.parametrize(("collector", "field"), [
    ({"collector": {"kind": "PrometheusMetric"}}, f"{BAD}.collector.kind"),
    ({"collector": {"kind": "Custom", "customCollector": {"image": "x", "name": "c"}}}, f"{BAD}.collector.kind"),
    ({"collector": {"kind": "Sidecar"}}, f"{BAD}.collector.kind"),
    ({"collector": {"kind": 3}}, f"{BAD}.collector.kind"),
    ({"collector": "StdOut"}, f"{BAD}.collector"),
    ("StdOut", BAD),
    ({"collector": {"kind": "File"}, "source": {"fileSystemPath": {"kind": "Directory", "path": "/x"}}},
     f"{BAD}.source.fileSystemPath.kind"),
    ({"collector": {"kind": "File"}, "source": {"fileSystemPath": {"path": "relative/metrics.log"}}},
     f"{BAD}.source.fileSystemPath.path"),
    ({"collector": {"kind": "File"}, "source": {"fileSystemPath": {"path": "/m", "format": "CSV"}}},
     f"{BAD}.source.fileSystemPath.format"),
    ({"collector": {"kind": "File"}, "source": {"fileSystemPath": {"path": "/m", "format": "JSON"},
                                                "filter": {"metricsFormat": [r"(a)(b)"]}}}, f"{BAD}.source.filter"),
    ({"collector": {"kind": "TensorFlowEvent"}, "source": {"fileSystemPath": {"kind": "File", "path": "/t"}}},
     f"{BAD}.source.fileSystemPath.kind"),
    ({"collector": {"kind": "TensorFlowEvent"}, "source": {"fileSystemPath": {"path": "logs"}}},
     f"{BAD}.source.fileSystemPath.path"),
    ({"collector": {"kind": "TensorFlowEvent"}, "source": {"fileSystemPath": {"path": "/t", "format": "TEXT"}}},
     f"{BAD}.source.fileSystemPath.format"),
    ({"source": {"filter": {"metricsFormat": ["([a-z]+=(.*)"]}}}, f"{BAD}.source.filter.metricsFormat[0]"),
    ({"source": {"filter": {"metricsFormat": [r"(\w+)=(\d+)", r"\w+=\d+"]}}}, f"{BAD}.source.filter.metricsFormat[1]"),
    ({"source": {"filter": {"metricsFormat": [r"(\w+)=(\d+)\1"]}}}, f"{BAD}.source.filter.metricsFormat[0]"),
    ({"source": {"filter": {"metricsFormat": [7]}}}, f"{BAD}.source.filter.metricsFormat[0]"),
    ({"source": {"filter": {"metricsFormat": "(a)(b)"}}}, f"{BAD}.source.filter.metricsFormat"),
])
def test_bad_collector_specs_name_their_field(collector: Any, field: str) -> None:
    with at(field):
        collector_spec({"metricsCollectorSpec": collector})


def test_every_corpus_experiment_has_a_collector_or_a_refusal() -> None:
    experiments = corpus_experiments()
    if not experiments:
        pytest.skip("the shared conformance corpus is not beside this checkout")
    kinds = {name: collector_spec(experiment["spec"]).kind for name, experiment in experiments}
    assert kinds["katib__examples_v1beta1_metrics-collector_file-metrics-collector.yaml"] == "File"
    assert kinds["katib__examples_v1beta1_kubeflow-training-operator_tfjob-mnist-with-summaries.yaml"] == \
        "TensorFlowEvent"
    assert kinds["katib__examples_v1beta1_hp-tuning_random.yaml"] == "StdOut"
    file_experiment = dict(experiments)["katib__examples_v1beta1_metrics-collector_file-metrics-collector.yaml"]
    file_spec = collector_spec(file_experiment["spec"])
    assert file_spec.path and file_spec.path.startswith("/") and file_spec.file_format == "TEXT"
    assert len(file_spec.metrics_format) == 1 and file_spec.metrics_format != (DEFAULT_FILTER,)

"""Katib's TEXT collector (StdOut and File kinds) over real logs: what becomes a MetricLog, and when."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from millpond.errors import UserError
from millpond.katib.metrics.api import StdOutParser, collect_file
from millpond.katib.metrics.records import UNAVAILABLE, ZERO_TIME, MetricLog
from tests.katib_lib.katib_lib_support import at

# What Katib's pytorch-mnist trial prints (examples/v1beta1/trial-images/pytorch-mnist), with the lines
# around it that a training script prints too.
MNIST_LOG = """\
Using CPU
Train Epoch: 1 [0/60000 (0%)]\tloss=2.2989
Train Epoch: 1 [640/60000 (1%)]\tloss=2.2627
2026-11-29T10:00:01.5Z Validation-accuracy=0.1135 Validation-loss=2.28
{metricName: accuracy, metricValue: 0.9}
Train Epoch: 2 [0/60000 (0%)]\tloss=.98
2026-11-29T10:00:03+02:00 Validation-accuracy=9.8e-01
Train-accuracy = 1E0 learning-rate=-7.53e-05
Validation-accuracy: 0.5 is not a metric in the default format
"""


def names(logs: list[MetricLog]) -> list[tuple[str, str, str]]:
    return [(log.time, log.name, log.value) for log in logs]


def test_default_filter_reads_katib_formats_and_keeps_only_wanted_metrics() -> None:
    parser = StdOutParser(["Validation-accuracy", "loss", "Train-accuracy"], [])
    logs = parser.feed(MNIST_LOG) + parser.finish()
    assert names(logs) == [
        (ZERO_TIME, "loss", "2.2989"),
        (ZERO_TIME, "loss", "2.2627"),
        ("2026-11-29T10:00:01.5Z", "Validation-accuracy", "0.1135"),
        (ZERO_TIME, "loss", ".98"),
        ("2026-11-29T10:00:03+02:00", "Validation-accuracy", "9.8e-01"),
        (ZERO_TIME, "Train-accuracy", "1E0"),
    ]
    # Validation-loss, learning-rate and "metricValue: 0.9" are other metrics or another format: not reported


def test_a_custom_regex_reads_its_own_format() -> None:
    # Katib's darts example: "([\\w-]+)=(Genotype.*)"; here a "name: value" format with two groups
    parser = StdOutParser(["accuracy", "loss"], [r"([\w-]+):\s*([+-]?\d*\.?\d+)"])
    logs = parser.feed("epoch 1 accuracy: 0.5 loss: 1.25\naccuracy=0.7\n") + parser.finish()
    assert names(logs) == [(ZERO_TIME, "accuracy", "0.5"), (ZERO_TIME, "loss", "1.25")]


def test_every_filter_applies_in_order() -> None:
    parser = StdOutParser(["acc"], [r"(acc)=(\d+)", r"(acc):(\d+)"])
    assert names(parser.feed("acc:1 acc=2\n")) == [(ZERO_TIME, "acc", "2"), (ZERO_TIME, "acc", "1")]


def test_a_line_that_names_no_metric_is_skipped_even_when_the_filter_matches() -> None:
    parser = StdOutParser(["accuracy"], [r"(\w+)=(\d+)"])
    assert parser.feed("acc=1 precision=3\n") == []
    # the name must equal a wanted metric: "accuracy_top5" is another metric
    assert parser.feed("accuracy_top5=9\n") == []


def test_a_value_the_default_filter_cannot_read_is_reported_empty_as_katib_does() -> None:
    parser = StdOutParser(["loss"], [])
    assert names(parser.feed("loss=nan\n")) == [(ZERO_TIME, "loss", "")]


def test_a_line_split_across_feeds_is_read_once_complete() -> None:
    parser = StdOutParser(["loss"], [])
    assert parser.feed("loss=0.") == []
    assert parser.feed("5 and") == []
    assert names(parser.feed(" more\nloss=0.25")) == [(ZERO_TIME, "loss", "0.5")]
    assert names(parser.finish()) == [(ZERO_TIME, "loss", "0.25")]
    assert parser.finish() == []


def test_finish_reports_the_objective_unavailable_when_it_never_appeared() -> None:
    parser = StdOutParser(["accuracy", "loss"], [])
    logs = parser.feed("loss=1\n") + parser.finish()
    assert names(logs) == [(ZERO_TIME, "loss", "1"), (ZERO_TIME, "accuracy", UNAVAILABLE)]
    with pytest.raises(UserError):
        parser.feed("accuracy=1\n")




def test_streaming_a_growing_file(tmp_path: Path) -> None:
    out = tmp_path / "stdout.log"
    script = ("import sys, time\n"
              "for epoch in range(1, 6):\n"
              "    sys.stdout.write(f'epoch {epoch} loss={1 / epoch:.4f}')\n"
              "    sys.stdout.flush(); time.sleep(0.05)\n"
              "    sys.stdout.write(f' accuracy={epoch / 10}\\n'); sys.stdout.flush()\n")
    parser = StdOutParser(["accuracy", "loss"], [])
    seen: list[MetricLog] = []
    reads = 0
    with out.open("wb") as sink, out.open("r") as source:
        process = subprocess.Popen([sys.executable, "-c", script], stdout=sink)
        while True:
            finished = process.poll() is not None
            chunk = source.read()
            if chunk:
                reads += 1
                seen += parser.feed(chunk)
            if finished and not chunk:
                break
            time.sleep(0.01)
    seen += parser.finish()
    assert process.returncode == 0
    assert reads > 1  # read while it grew, not once at the end
    assert [(log.name, log.value) for log in seen] == [
        pair for epoch in range(1, 6) for pair in (("loss", f"{1 / epoch:.4f}"), ("accuracy", str(epoch / 10)))]


def test_collect_file_text_is_the_same_as_the_stream(tmp_path: Path) -> None:
    path = tmp_path / "metrics.log"
    path.write_text(MNIST_LOG)
    parser = StdOutParser(["Validation-accuracy", "loss"], [])
    assert collect_file(path, ["Validation-accuracy", "loss"], "TEXT", []) == parser.feed(MNIST_LOG) + parser.finish()


def test_collect_file_that_was_never_written_is_unavailable(tmp_path: Path) -> None:
    assert names(collect_file(tmp_path / "none.log", ["accuracy"], "TEXT", [])) == [
        (ZERO_TIME, "accuracy", UNAVAILABLE)]


def test_collect_file_with_text_but_no_objective_reports_only_unavailable_as_katib(tmp_path: Path) -> None:
    path = tmp_path / "metrics.log"
    path.write_text("loss=0.5\n")
    assert names(collect_file(path, ["accuracy", "loss"], "TEXT", [])) == [(ZERO_TIME, "accuracy", UNAVAILABLE)]


@pytest.mark.parametrize(("metric_names", "formats", "field"), [
    ([], [], "spec.objective.objectiveMetricName"),
    (["acc"], ["(a"], "spec.metricsCollectorSpec.source.filter.metricsFormat[0]"),
    (["acc"], [r"(\w+)=(\d+)", "no groups"], "spec.metricsCollectorSpec.source.filter.metricsFormat[1]"),
    (["acc"], [r"(?=x)(a)(b)"], "spec.metricsCollectorSpec.source.filter.metricsFormat[0]"),  # RE2 has no lookahead
])
def test_bad_parser_input_names_its_field(metric_names: list[str], formats: list[str], field: str) -> None:
    with at(field):
        StdOutParser(metric_names, formats)


def test_collect_file_refuses_an_unknown_format(tmp_path: Path) -> None:
    with at("spec.metricsCollectorSpec.source.fileSystemPath.format"):
        collect_file(tmp_path / "x", ["a"], "CSV", [])

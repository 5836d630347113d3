"""TensorBoard event files written by the real SummaryWriter, and Katib's observation from metric logs."""

from __future__ import annotations

from pathlib import Path

import numpy
import pytest

from millpond.errors import UserError
from millpond.katib.metrics.api import (
    StdOutParser,
    collect_tfevents,
    collector_spec,
    default_strategies,
    objective_value,
    observation,
)
from millpond.katib.metrics.records import UNAVAILABLE, ZERO_TIME, MetricLog, MetricValue
from millpond.katib.metrics.timestamps import parse
from tests.katib_lib.katib_lib_support import at, corpus_experiments

tensorboard_writer = pytest.importorskip("torch.utils.tensorboard")
pytest.importorskip("tensorboard")


def write_events(directory: Path, scalars: dict[str, list[float]], *, new_style: bool) -> None:
    writer = tensorboard_writer.SummaryWriter(log_dir=str(directory))
    for tag, values in scalars.items():
        for step, value in enumerate(values):
            writer.add_scalar(tag, value, step, new_style=new_style)
    writer.close()


@pytest.mark.parametrize("new_style", [False, True], ids=["simple_value", "tensor"])
def test_scalars_by_tag(tmp_path: Path, new_style: bool) -> None:
    write_events(tmp_path / "run", {"loss": [0.5, 0.25], "accuracy": [0.75], "loss_ema": [0.4]}, new_style=new_style)
    (tmp_path / "run" / "notes.txt").write_text("not an event file")
    logs = collect_tfevents(tmp_path, ["accuracy", "loss"])
    values = sorted((log.name, log.value) for log in logs)
    # Katib's rule: a tag that starts with the metric's name is taken for it (loss_ema too). Katib writes a
    # simple_value (float32) as Python's str of the double it widens to, a tensor as numpy's str of the float32.
    ema = "0.4" if new_style else str(float(numpy.float32(0.4)))
    assert ema != "0.4" or new_style
    assert values == [("accuracy", "0.75"), ("loss", "0.25"), ("loss", ema), ("loss", "0.5")]
    assert all(parse(log.time) is not None and log.time != ZERO_TIME for log in logs)


def test_a_metric_with_a_directory_reads_only_files_under_it(tmp_path: Path) -> None:
    # Katib's tfjob-mnist-with-summaries: "train/accuracy" and "test/accuracy" are event files in train/ and test/
    write_events(tmp_path / "train", {"accuracy": [0.5, 0.625]}, new_style=True)
    write_events(tmp_path / "test", {"accuracy": [0.875]}, new_style=True)
    logs = collect_tfevents(tmp_path, ["test/accuracy", "train/accuracy"])
    assert sorted((log.name, log.value) for log in logs) == [
        ("test/accuracy", "0.875"), ("train/accuracy", "0.5"), ("train/accuracy", "0.625")]
    latest = observation(logs, {"train/accuracy": "max", "test/accuracy": "max"})
    assert latest["train/accuracy"] == MetricValue("0.5", "0.625", "0.625")


def test_no_event_for_the_objective_is_unavailable(tmp_path: Path) -> None:
    write_events(tmp_path, {"loss": [1.0]}, new_style=False)
    assert [(log.name, log.value) for log in collect_tfevents(tmp_path, ["accuracy", "loss"])] == [
        ("accuracy", UNAVAILABLE)]


def test_a_missing_directory_names_the_path(tmp_path: Path) -> None:
    with at("spec.metricsCollectorSpec.source.fileSystemPath.path"):
        collect_tfevents(tmp_path / "none", ["loss"])


def test_the_corpus_tfjob_collector_reads_the_directory_it_names(tmp_path: Path) -> None:
    experiments = dict(corpus_experiments())
    name = "katib__examples_v1beta1_kubeflow-training-operator_tfjob-mnist-with-summaries.yaml"
    if name not in experiments:
        pytest.skip("the shared conformance corpus is not beside this checkout")
    spec = experiments[name]["spec"]
    collector = collector_spec(spec)
    objective = spec["objective"]
    names = [objective["objectiveMetricName"], *objective.get("additionalMetricNames", [])]
    assert collector.kind == "TensorFlowEvent" and collector.path
    root = tmp_path / collector.path.strip("/")
    for metric in names:
        folder, _, tag = metric.rpartition("/")
        write_events(root / folder, {tag: [0.5, 0.75]}, new_style=True)
    logs = collect_tfevents(root, names)
    assert {log.name for log in logs} == set(names)
    strategies = default_strategies(objective)
    result = observation(logs, strategies)
    assert objective_value(result[names[0]], strategies[names[0]]) == "0.75"


def log(time: str, name: str, value: str) -> MetricLog:
    return MetricLog(time, name, value)


def test_observation_min_max_latest_as_katib() -> None:
    logs = [
        log("2026-01-01T00:00:02Z", "loss", "0.5"),
        log("2026-01-01T00:00:01Z", "loss", "0.25"),  # older: not the latest
        log("2026-01-01T02:00:03+02:00", "loss", "0.75"),  # 00:00:03Z: the latest
        log("2026-01-01T00:00:00.5Z", "loss", "not-a-number"),
        log("2026-01-01T00:00:00Z", "accuracy", "0.9"),
        log("2026-01-01T00:00:00Z", "accuracy", "0.8"),  # same time: the later log wins
        log("2026-01-01T00:00:00Z", "other", "1"),
    ]
    result = observation(logs, {"loss": "min", "accuracy": "max", "never": "latest"})
    assert result == {
        "loss": MetricValue("0.25", "0.75", "0.75"),
        "accuracy": MetricValue("0.8", "0.9", "0.8"),
        "never": MetricValue(UNAVAILABLE, UNAVAILABLE, UNAVAILABLE),
    }
    assert objective_value(result["loss"], "min") == "0.25"
    assert objective_value(result["accuracy"], "latest") == "0.8"
    assert objective_value(result["never"], "max") == UNAVAILABLE


def test_nanoseconds_order_the_latest() -> None:
    logs = [log("2026-01-01T00:00:00.000000002Z", "a", "2"), log("2026-01-01T00:00:00.000000001Z", "a", "1")]
    assert observation(logs, {"a": "latest"})["a"].latest == "2"


def test_only_unavailable_reported_keeps_min_and_max_unavailable() -> None:
    parser = StdOutParser(["accuracy"], [])
    result = observation(parser.feed("nothing here\n") + parser.finish(), {"accuracy": "max"})
    assert result["accuracy"] == MetricValue(UNAVAILABLE, UNAVAILABLE, UNAVAILABLE)
    assert objective_value(result["accuracy"], "max") == UNAVAILABLE


def test_a_custom_format_from_the_corpus_reads_its_lines() -> None:
    parser = StdOutParser(["accuracy", "loss"], [r"{metricName: ([\w|-]+), metricValue: ((-?\d+)(\.\d+)?)}"])
    logs = parser.feed("{metricName: accuracy, metricValue: 0.9}\n{metricName: loss, metricValue: -1}\n")
    assert [(entry.name, entry.value) for entry in logs] == [("accuracy", "0.9"), ("loss", "-1")]


def test_default_strategies_follow_katibs_defaulting() -> None:
    assert default_strategies({"type": "maximize", "objectiveMetricName": "acc", "additionalMetricNames": ["loss"],
                               "metricStrategies": [{"name": "loss", "value": "latest"}]}) == {
        "loss": "latest", "acc": "max"}
    assert default_strategies({"type": "minimize", "objectiveMetricName": "loss",
                               "additionalMetricNames": ["acc"]}) == {"loss": "min", "acc": "min"}
    with at("spec.objective.metricStrategies[0].value"):
        default_strategies({"type": "minimize", "objectiveMetricName": "l", "metricStrategies": [
            {"name": "l", "value": "median"}]})


def test_a_log_with_a_bad_time_is_refused() -> None:
    with pytest.raises(UserError, match="not RFC 3339"):
        observation([log("yesterday", "a", "1")], {"a": "min"})

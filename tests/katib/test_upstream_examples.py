"""Katib's own examples (the platform-manifests corpus' rows) run to the end: Succeeded with a currentOptimalTrial.

Their trials run ``python3 /opt/pytorch-mnist/mnist.py`` from Katib's image, which is not on this host: each is
applied as a copy whose training container's command is a host Python script taking mnist.py's arguments
(``--lr``, ``--momentum``, ``--epochs``, ``--log-path``) and reporting a loss per step as mnist.py does (on stdout,
or in the ``--log-path`` file in the File collector's format). Everything else is upstream's: algorithm and
settings, counts, parameters, trial parameters, early stopping, metrics collector. The File collector's
example also gets its own file path (``/katib/mnist.log`` is one path for every trial on one host) and one
trial at a time (see docs/guides/katib.md). The corpus is read where tests/cli/test_manifest_corpora.py reads it.

The loss rises with each step (``step * c``, ``c`` from the parameters; accuracy ``1 / (step * c)``): the
metric strategy (min, or max for the File example's accuracy) then keeps each trial's first report; under
median-stop a trial's second report (2c) is always above the mean of a succeeded trial's first two (1.5c',
c and c' within 21% of each other): every trial that reaches its second report once a trial has succeeded
is early-stopped.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.katib.test_experiments import condition

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "platform-manifests"
MNIST = '''
import argparse, time
parser = argparse.ArgumentParser()
for flag in ("--epochs", "--batch-size", "--lr", "--momentum", "--log-path"):
    parser.add_argument(flag)
args, _ = parser.parse_known_args()
c = 1 + (abs(float(args.lr or 0.02) - 0.02) + abs(float(args.momentum or 0.5) - 0.5)) * 0.3
log = open(args.log_path, "w") if args.log_path else None
for step in range(1, 9):
    loss, accuracy = step * c, 1 / (step * c)
    if log:
        print(f"{{metricName: loss, metricValue: {loss:.6f}}}", file=log)
        print(f"{{metricName: accuracy, metricValue: {accuracy:.6f}}}", file=log, flush=True)
    else:
        print(f"epoch {step}: loss={loss:.6f} accuracy={accuracy:.6f}", flush=True)
    time.sleep(0.3)
'''
EXAMPLES = ["hp-tuning_random", "hp-tuning_tpe", "hp-tuning_grid", "hp-tuning_cma-es",
            "hp-tuning_bayesian-optimization", "hp-tuning_hyperband", "early-stopping_median-stop",
            "metrics-collector_file-metrics-collector"]


def adapted(example: str, tmp_path: Path) -> dict[str, Any]:
    """The corpus file, its training container's command pointed at the host script (and, for the File
    collector, its path made this test's own)."""
    path = CORPUS / f"katib__examples_v1beta1_{example}.yaml"
    if not path.is_file():
        pytest.skip("the shared conformance corpora are not beside this checkout")
    doc = yaml.safe_load(path.read_text())
    script = tmp_path / "mnist.py"
    script.write_text(MNIST)
    spec = doc["spec"]
    [container] = [one for one in spec["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]["containers"]
                   if one["name"] == spec["trialTemplate"]["primaryContainerName"]]
    assert container["command"][:2] == ["python3", "/opt/pytorch-mnist/mnist.py"]
    log = tmp_path / "mnist.log"
    arguments = list(container["command"][2:])
    if "--log-path=/katib/mnist.log" in arguments:
        arguments[arguments.index("--log-path=/katib/mnist.log")] = f"--log-path={log}"
        spec["metricsCollectorSpec"]["source"]["fileSystemPath"]["path"] = str(log)
        spec["parallelTrialCount"] = 1
    container["command"] = [sys.executable, str(script), *arguments]
    return doc


@pytest.mark.parametrize("example", EXAMPLES)
def test_katib_examples_run_to_succeeded_with_an_optimal_trial(cli: Any, tmp_path: Path, example: str) -> None:
    doc = adapted(example, tmp_path)
    name, namespace = doc["metadata"]["name"], doc["metadata"]["namespace"]
    manifest = tmp_path / "experiment.yaml"
    manifest.write_text(yaml.safe_dump(doc))
    result = cli("apply", "-f", manifest)
    assert result.code == 0, result.err
    deadline = time.monotonic() + 240
    while True:
        found = json.loads(cli("get", "experiment", name, "-n", namespace, "-o", "json").out)
        if condition(found, "Succeeded") or condition(found, "Failed"):
            break
        assert time.monotonic() < deadline, json.dumps(found.get("status"))
        time.sleep(0.5)
    status = found["status"]
    assert condition(found, "Succeeded") is not None, json.dumps(status)
    reason = condition(found, "Succeeded")["reason"]
    if reason == "ExperimentMaxTrialsReached":
        assert status["trials"] == doc["spec"]["maxTrialCount"]
    else:  # the File example's accuracy goal (0.99) is reached by parameters near lr 0.02, momentum 0.5
        assert reason == "ExperimentGoalReached" and status["trials"] < doc["spec"]["maxTrialCount"]
    assert not status.get("trialsFailed")
    best = status["currentOptimalTrial"]
    assert best["bestTrialName"].startswith(f"{name}-")
    assert {one["name"] for one in best["parameterAssignments"]} == {one["name"] for one in doc["spec"]["parameters"]}
    objective = doc["spec"]["objective"]
    metric, strategy = objective["objectiveMetricName"], {"minimize": "min", "maximize": "max"}[objective["type"]]
    [value] = [one[strategy] for one in best["observation"]["metrics"] if one["name"] == metric]
    trials = json.loads(cli("get", "trials", "-n", namespace, "-o", "json").out)["items"]
    observed = [float(next(m[strategy] for m in one["status"]["observation"]["metrics"] if m["name"] == metric))
                for one in trials]
    assert float(value) == (min if strategy == "min" else max)(observed)  # the best of the trials' first reports
    if example == "early-stopping_median-stop":
        stopped = [one for one in trials if condition(one, "EarlyStopped")]
        assert status["trialsEarlyStopped"] == len(stopped) >= 1
        assert all(condition(one, "EarlyStopped")["reason"] == "TrialEarlyStopped" for one in stopped)

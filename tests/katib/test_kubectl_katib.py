"""Katib's kinds through the real ``kubectl`` against a real ``millpond server``: apply an Experiment, the CRDs'
columns of experiments, trials and suggestions, its status in ``-o yaml``, its trials' pods by Katib's label, an
invalid Experiment refused with a 422 Status naming the field, and ``kubectl delete`` cascading to what it owns."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.katib.test_experiments import condition, experiment
from tests.kube_support import Kubectl, kubectl_for
from tests.server_support import Served, module_home


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "kubectl-katib")


@pytest.fixture(scope="module")
def kubectl(home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    server = Served()
    yield kubectl_for(server, tmp_path_factory.mktemp("kubectl"))
    server.stop()


def until(check: object, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.3)


def test_an_experiment_through_kubectl(kubectl: Kubectl, tmp_path: Path) -> None:
    slow = ("import time; time.sleep(2); import os,sys; x=float(sys.argv[1]); "
            "open(os.environ['RUNS'],'a').write(sys.argv[2]+'\\n'); print(f'loss={(x-2)**2:.6f}')")
    manifest = tmp_path / "exp.yaml"
    manifest.write_text(yaml.safe_dump(experiment("kquad", runs=tmp_path / "runs", script=slow, max_trials=3)))
    assert kubectl.ok("apply", "-f", str(manifest)).strip() == "experiment.kubeflow.org/kquad created"

    def pods() -> list[dict[str, object]]:
        return kubectl.json("get", "pods", "-l", "katib.kubeflow.org/experiment=kquad")["items"]  # type: ignore

    until(lambda: len(pods()) >= 1)  # the trials' pods, by Katib's label
    trials = {one["metadata"]["name"] for one in kubectl.json("get", "trials")["items"]}
    assert {one["metadata"]["labels"]["katib.kubeflow.org/trial"] for one in pods()} <= trials

    until(lambda: condition(kubectl.json("get", "experiment", "kquad"), "Succeeded") is not None)
    table = kubectl.ok("get", "experiments,trials,suggestions").splitlines()
    header = [line.split() for line in table if line.startswith("NAME")]
    assert ["NAME", "TYPE", "STATUS", "AGE"] in header
    assert ["NAME", "TYPE", "STATUS", "REQUESTED", "ASSIGNED", "AGE"] in header
    rows = {line.split()[0]: line.split()[1:] for line in table if not line.startswith("NAME") and line.strip()}
    assert rows["experiment.kubeflow.org/kquad"][:2] == ["Succeeded", "True"]
    assert rows["suggestion.kubeflow.org/kquad"][:4] == ["Succeeded", "True", "3", "3"]
    assert sum(1 for key, cells in rows.items() if key.startswith("trial.") and cells[:2] == ["Succeeded", "True"]) == 3
    shown = yaml.safe_load(kubectl.ok("get", "experiment", "kquad", "-o", "yaml"))
    assert shown["status"]["trialsSucceeded"] == 3
    assert shown["status"]["currentOptimalTrial"]["bestTrialName"] in trials
    assert shown["spec"]["resumePolicy"] == "Never"  # Katib's webhook defaults, written in
    assert shown["spec"]["metricsCollectorSpec"]["collector"]["kind"] == "StdOut"

    assert kubectl.ok("delete", "experiment", "kquad").startswith('experiment.kubeflow.org "kquad" deleted')
    for kind in ("experiments", "trials", "suggestions", "jobs"):
        assert kubectl.json("get", kind)["items"] == [], kind  # the owner's garbage, collected


def test_an_invalid_experiment_is_a_422_naming_the_field(kubectl: Kubectl, tmp_path: Path) -> None:
    doc = experiment("kbad", runs=tmp_path / "runs")
    doc["spec"]["parameters"][0]["feasibleSpace"]["min"] = "9"
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(yaml.safe_dump(doc))
    refused = kubectl.run("apply", "-f", str(manifest))
    assert refused.returncode == 1
    assert refused.stderr.startswith('The Experiment "kbad" is invalid: '), refused.stderr
    assert "spec.parameters[0].feasibleSpace" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert kubectl.run("get", "experiment", "kbad").returncode == 1
    assert json.loads(kubectl.ok("get", "--raw", "/apis/kubeflow.org/v1beta1/namespaces/default/experiments")
                      )["items"] == []

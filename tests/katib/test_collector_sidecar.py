"""Katib's metrics collector sidecar (``metrics-logger-and-collector``) on a trial's pod, through the real ``kubectl``:
listed in ``spec.containers`` with Katib's image and arguments, running while the training container runs and
terminated with it, and ``kubectl logs -c metrics-logger-and-collector`` printing what Katib's collector prints
(the training container's output for StdOut, the metrics file's lines for File); no sidecar for Push; a container
the pod does not have is still Kubernetes' 400."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.katib.test_experiments import experiment
from tests.katib.test_kubectl_katib import until
from tests.kube_support import Kubectl, kubectl_for
from tests.server_support import Served, module_home

SIDECAR = "metrics-logger-and-collector"
GATED = ("import os, sys, time; x = float(sys.argv[1]); print(f'step 1 loss={(x - 2) ** 2 + 1:.6f}', flush=True)\n"
         "while not os.path.exists(os.environ['RUNS'] + '.go'): time.sleep(0.1)\n"
         "print(f'loss={(x - 2) ** 2:.6f}')")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "katib-sidecar")


@pytest.fixture(scope="module")
def kubectl(home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    server = Served()
    yield kubectl_for(server, tmp_path_factory.mktemp("kubectl"))
    server.stop()


def _pods(kubectl: Kubectl, experiment_name: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = kubectl.json("get", "pods", "-l", f"katib.kubeflow.org/experiment={experiment_name}")[
        "items"]
    return found


def _status(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next(one for one in pod["status"]["containerStatuses"] if one["name"] == name)


def _apply(kubectl: Kubectl, tmp_path: Path, doc: dict[str, Any]) -> None:
    manifest = tmp_path / f"{doc['metadata']['name']}.yaml"
    manifest.write_text(yaml.safe_dump(doc))
    kubectl.ok("apply", "-f", str(manifest))


def test_a_stdout_trial_pod_has_the_collector_sidecar_running_then_terminated(
        kubectl: Kubectl, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _apply(kubectl, tmp_path, experiment("sidecar", runs=runs, script=GATED, max_trials=1, parallel=1,
                                    trialTemplate={"retain": True}))  # the finished pod stays
    until(lambda: any(_status(pod, "training-container")["state"].get("running") for pod in _pods(kubectl, "sidecar")))
    (pod,) = _pods(kubectl, "sidecar")
    name, trial = pod["metadata"]["name"], pod["metadata"]["labels"]["katib.kubeflow.org/trial"]
    shown = kubectl.json("get", "pod", name)
    containers = {one["name"]: one for one in shown["spec"]["containers"]}
    assert list(containers) == ["training-container", SIDECAR]
    assert containers[SIDECAR]["image"] == "ghcr.io/kubeflow/katib/file-metrics-collector:latest"
    assert containers[SIDECAR]["args"] == ["-t", trial, "-m", "loss", "-o-type", "minimize", "-s-db",
                                           "katib-db-manager.kubeflow:6789", "-path", "/var/log/katib/metrics.log",
                                           "-format", "TEXT"]
    assert "millpond.io/injected-sidecar" not in shown["metadata"].get("annotations", {})
    running = _status(shown, SIDECAR)
    assert "running" in running["state"] and running["ready"] is True, running
    assert kubectl.ok("get", "pod", name).split()[-4:-2] == ["2/2", "Running"]
    until(lambda: "step 1 loss=" in kubectl.ok("logs", name, "-c", SIDECAR))
    assert kubectl.ok("logs", name, "-c", SIDECAR) == kubectl.ok("logs", name, "-c", "training-container")
    missing = kubectl.run("logs", name, "-c", "nope")  # kubectl checks the pod's containers, sidecar included
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"error: container nope is not valid for pod {name} out of: " \
                                     f"training-container, {SIDECAR}", missing.stderr
    raw = kubectl.run("get", "--raw", f"/api/v1/namespaces/default/pods/{name}/log?container=nope")
    assert raw.returncode == 1  # the API server's own answer: 400 BadRequest in Kubernetes' words
    assert raw.stderr.strip() == f"Error from server (BadRequest): container nope is not valid for pod {name}", \
        raw.stderr
    without = kubectl.run("logs", name)  # kubectl defaults to the first container, and says so
    assert without.returncode == 0 and without.stdout == kubectl.ok("logs", name, "-c", "training-container")
    assert without.stderr.strip() == f'Defaulted container "training-container" out of: training-container, {SIDECAR}'
    unnamed = kubectl.run("get", "--raw", f"/api/v1/namespaces/default/pods/{name}/log")  # the API server does not
    assert unnamed.stderr.strip() == f"Error from server (BadRequest): a container name must be specified for pod " \
                                     f"{name}, choose one of: [training-container {SIDECAR}]", unnamed.stderr

    Path(f"{runs}.go").touch()
    until(lambda: _status(kubectl.json("get", "pod", name), SIDECAR)["state"].get("terminated") is not None)
    ended = _status(kubectl.json("get", "pod", name), SIDECAR)["state"]["terminated"]
    assert ended["exitCode"] == 0 and ended["reason"] == "Completed", ended
    lines = kubectl.ok("logs", name, "-c", SIDECAR).splitlines()
    assert lines[0].startswith("step 1 loss=") and lines[-1].startswith("loss="), lines
    assert kubectl.ok("logs", name, "-c", SIDECAR, "--tail", "1").splitlines() == lines[-1:]
    until(lambda: kubectl.json("get", "experiment", "sidecar").get("status", {}).get("trialsSucceeded") == 1)
    kubectl.ok("delete", "experiment", "sidecar")


def test_a_file_trial_mirrors_its_metrics_file_and_a_push_trial_has_no_sidecar(
        kubectl: Kubectl, tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.log"
    writes = (f"import sys; x = float(sys.argv[1]); print('training'); "
              f"open({str(metrics)!r}, 'w').write(f'loss={{(x - 2) ** 2:.6f}}\\n')")
    failing = "print('no metrics'); raise SystemExit(3)"
    _apply(kubectl, tmp_path, experiment("filed", runs=tmp_path / "runs", script=writes, max_trials=1, parallel=1,
                                         trialTemplate={"retain": True},
                                         metricsCollectorSpec={"collector": {"kind": "File"}, "source": {
                                             "fileSystemPath": {"kind": "File", "path": str(metrics),
                                                                "format": "TEXT"}}}))
    _apply(kubectl, tmp_path, experiment("pushed", runs=tmp_path / "runs", script=failing, max_trials=1, parallel=1,
                                         trialTemplate={"retain": True},
                                         metricsCollectorSpec={"collector": {"kind": "Push"}}))
    until(lambda: any(_status(pod, "training-container")["state"].get("terminated")
                      for pod in _pods(kubectl, "filed")))
    (pod,) = _pods(kubectl, "filed")
    name = pod["metadata"]["name"]
    sidecar = next(one for one in pod["spec"]["containers"] if one["name"] == SIDECAR)
    assert sidecar["args"][-4:] == ["-path", str(metrics), "-format", "TEXT"]
    assert _status(pod, SIDECAR)["state"]["terminated"]["reason"] == "Completed"
    assert kubectl.ok("logs", name, "-c", SIDECAR).splitlines() == [metrics.read_text().strip()]
    assert kubectl.ok("logs", name, "-c", "training-container").splitlines() == ["training"]

    until(lambda: any(_status(pod, "training-container")["state"].get("terminated")
                      for pod in _pods(kubectl, "pushed")))
    (pushed,) = _pods(kubectl, "pushed")
    assert [one["name"] for one in pushed["spec"]["containers"]] == ["training-container"]
    assert kubectl.ok("logs", pushed["metadata"]["name"]).splitlines() == ["no metrics"]
    for one in ("filed", "pushed"):
        kubectl.ok("delete", "experiment", one)

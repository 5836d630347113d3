"""Every count a training job's user gives (workers, replicas of each replica type, MPI slots,
torchrun's processes per node, TrainJob's numNodes) is bounded by what this machine can ever hold,
checked before anything starts: ``arena submit`` and ``millpond apply -f`` refuse the impossible with
one ``error:`` line, exit 2, nothing stored and no supervisor started; the property test drives
every number of the submit flags to extremes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millpond.runners.processes import ProcessIdentity
from millpond.scheduling import machine, pod_room
from millpond.store.training import JobStore
from millpond.training.jobs import processes
from millpond.training.spec import spec_from_json
from tests.training_support import arena

HUGE = 100000


def _no_job_recorded() -> None:
    assert JobStore().list(None) == []


@pytest.mark.parametrize("args", [
    ["pytorch", "--workers", HUGE],
    ["mpi", "--workers", HUGE],
    ["tf", "--workers", HUGE],
    ["tf", "--ps", HUGE],
    ["pytorch", "--workers", pod_room.MAX_PODS + 1],
    ["pytorch", "--nproc-per-node", HUGE],
], ids=lambda args: " ".join(map(str, args)))
def test_a_count_no_machine_holds_is_refused_at_submit(capsys, home: Path, args: list[Any]) -> None:
    result = arena(capsys, "submit", *args, "--name", "big", "echo hi")
    assert result.code == 2, result
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the job big can never run here: "), result.err
    _no_job_recorded()


def test_the_bound_is_kubelets_max_pods_and_changes_with_its_variable(capsys, home: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(pod_room.MAX_PODS_VAR, "2")
    refused = arena(capsys, "submit", "pytorch", "--name", "three", "--workers", "3", "echo hi")
    assert refused.code == 2 and "holds at most 2" in refused.err, refused.err
    _no_job_recorded()


def _write(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def _replica(count: int) -> dict[str, Any]:
    return {"replicas": count, "template": {"spec": {"containers": [
        {"name": "c", "image": "python:3.11", "command": [sys.executable, "-c", "print(1)"]}]}}}


MANIFESTS = {
    "pytorchjob-workers": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "big"},
                           "spec": {"pytorchReplicaSpecs": {"Master": _replica(1), "Worker": _replica(HUGE)}}},
    "tfjob-ps": {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "big"},
                 "spec": {"tfReplicaSpecs": {"Worker": _replica(1), "PS": _replica(HUGE)}}},
    "mpijob-workers": {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "big"},
                       "spec": {"mpiReplicaSpecs": {"Launcher": _replica(1), "Worker": _replica(HUGE)}}},
    "mpijob-slots": {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "big"},
                     "spec": {"slotsPerWorker": HUGE * 10,
                              "mpiReplicaSpecs": {"Launcher": _replica(1), "Worker": _replica(1)}}},
    "trainjob-nodes": {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "big"},
                       "spec": {"runtimeRef": {"name": "torch-distributed"},
                                "trainer": {"numNodes": HUGE, "command": [sys.executable, "-c", "print(1)"]}}},
    "trainjob-procs": {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "big"},
                       "spec": {"runtimeRef": {"name": "torch-distributed"},
                                "trainer": {"numNodes": 1, "numProcPerNode": HUGE * 10,
                                            "command": [sys.executable, "-c", "print(1)"]}}},
}


@pytest.mark.parametrize("which", sorted(MANIFESTS))
def test_a_manifest_count_no_machine_holds_is_refused_at_apply(cli, tmp_path: Path, which: str) -> None:
    result = cli("apply", "-f", _write(tmp_path, MANIFESTS[which]))
    assert result.code == 2, result
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "can never run here" in lines[0], result.err
    _no_job_recorded()


# ---------------------------------------------------------------- the property

EXTREME_INTS = st.one_of(
    st.integers(min_value=-3, max_value=3),
    st.sampled_from([pod_room.MAX_PODS, pod_room.MAX_PODS + 1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64, 10**30,
                     -(2**63), -(2**31)]),
)
QUANTITIES = st.sampled_from(["", "0", "1", "100m", "1e3", "1e400", "99999999999999999999", "9Ei", "-1", "1Pi",
                              "0.0000001", "1m", "nan", "inf", "128974848", "1e-400", "8E", "12345678901234567890Ki"])
DURATIONS = st.sampled_from(["", "0", "1s", "2562047h", "2562048h", "9223372036s", "-1s", "1e9h", "1.5h",
                             "99999999999999999999ns", "1h1m1s"])
FLAGS = st.fixed_dictionaries({
    "--workers": EXTREME_INTS, "--gpus": EXTREME_INTS, "--retry": EXTREME_INTS,
    "--nproc-per-node": EXTREME_INTS, "--gpumemory": EXTREME_INTS, "--gpucore": EXTREME_INTS,
    "--cpu": QUANTITIES, "--memory": QUANTITIES, "--share-memory": QUANTITIES,
    "--running-timeout": DURATIONS, "--ttl-after-finished": DURATIONS,
})


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trainer=st.sampled_from(["pytorch", "mpi", "tf"]), flags=FLAGS, ps=EXTREME_INTS)
def test_extreme_numbers_are_refused_in_one_line_or_fit_the_machine(capsys, home: Path, trainer: str,
                                                                    flags: dict[str, Any], ps: int) -> None:
    """Any mix of extreme numbers: exit 2 with one ``error:`` line and nothing stored, or a job whose every
    count and request fits this machine (then deleted at once, its supervisor gone)."""
    args: list[Any] = []
    for flag, value in flags.items():
        if value != "":
            args += [flag, value]
    if trainer == "tf":
        args += ["--ps", ps]
    result = arena(capsys, "submit", trainer, "--name", "p", *args, "sleep 30")
    assert "Traceback" not in result.err, result.err
    if result.code != 0:
        assert result.code == 2, result
        lines = result.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.err
        _no_job_recorded()
        return
    (job,) = JobStore().list(None)
    spec = spec_from_json(job.spec)
    assert spec.instance_count <= pod_room.max_pods()
    assert processes(spec) <= pod_room.max_processes()
    assert spec.total.cpu_millis <= machine.cpu_millis() and spec.total.memory_bytes <= machine.memory_bytes()
    supervisor = ProcessIdentity(job.supervisor_pid or 0, job.supervisor_start)
    deleted = arena(capsys, "delete", "p")
    assert deleted.code == 0, deleted
    assert not supervisor.is_running()
    _no_job_recorded()


MANIFEST_INTS = st.one_of(
    st.integers(min_value=-2, max_value=3),
    st.sampled_from([pod_room.MAX_PODS + 1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 10**30, -(2**31), "3", "x", 1.5, None]),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["PyTorchJob", "MPIJob", "TFJob"]), workers=MANIFEST_INTS, slots=MANIFEST_INTS,
       backoff=MANIFEST_INTS, deadline_s=MANIFEST_INTS, ttl=MANIFEST_INTS, nproc=MANIFEST_INTS)
def test_extreme_manifest_numbers_are_refused_in_one_line_or_fit_the_machine(
        cli, tmp_path: Path, kind: str, workers: Any, slots: Any, backoff: Any, deadline_s: Any, ttl: Any,
        nproc: Any) -> None:
    """A training manifest's counts and durations at extremes: ``apply -f`` answers exit 2 with one
    ``error:`` line and stores nothing, or stores a job whose counts fit this machine."""
    holder, first = {"PyTorchJob": ("pytorchReplicaSpecs", "Master"), "MPIJob": ("mpiReplicaSpecs", "Launcher"),
                     "TFJob": ("tfReplicaSpecs", "Chief")}[kind]
    spec: dict[str, Any] = {holder: {first: _replica(1), "Worker": _replica(workers)},
                            "runPolicy": {"backoffLimit": backoff, "activeDeadlineSeconds": deadline_s,
                                          "ttlSecondsAfterFinished": ttl}}
    if kind == "MPIJob":
        spec["slotsPerWorker"] = slots
    if kind == "PyTorchJob":
        spec["nprocPerNode"] = nproc
    api = "kubeflow.org/v2beta1" if kind == "MPIJob" else "kubeflow.org/v1"
    result = cli("apply", "-f", _write(tmp_path, {"apiVersion": api, "kind": kind, "metadata": {"name": "m"},
                                                  "spec": spec}))
    assert "Traceback" not in result.err, result.err
    if result.code != 0:
        assert result.code == 2, result
        lines = result.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.err
        _no_job_recorded()
        return
    (job,) = JobStore().list(None)
    stored = spec_from_json(job.spec)
    assert stored.instance_count <= pod_room.max_pods()
    assert processes(stored) <= pod_room.max_processes()
    assert cli("delete", kind.lower(), "m").code == 0
    _no_job_recorded()

"""The five reconcilers share one shape (observe into a snapshot, then step with named transitions),
and one function starts every detached supervisor; both checked with real processes.

Each test puts the world in a state one transition answers (a process killed with SIGKILL, an
object deleted under its runner, a mount whose daemon and users are gone), observes it, and checks
that the step applied that transition by name, that it was recorded (a log record carrying it), and
that a second pass finds nothing left to do.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from millpond.datasets.config import mounts_home
from millpond.datasets.mounts import MountRecord, key_of, record_of
from millpond.datasets.operations.liveness import OperationsReconciler, OperationTransition
from millpond.datasets.operations.processes import ProcessesReconciler, ProcessTransition
from millpond.datasets.shared_mounts import MountTransition, SharedMountsReconciler
from millpond.runners.background import running
from millpond.runners.detached import spawn_detached
from millpond.runners.processes import ProcessIdentity, start_ticks
from millpond.runners.reconcile import Applied, Reconciler, reconcile
from millpond.serving import lifecycle
from millpond.serving.lifecycle import ServingReconciler, ServingTransition
from millpond.store.resources import ProcessRecord, ResourceStore
from millpond.store.training import JobStore
from millpond.training.jobs import JobsReconciler, JobTransition
from tests.training_support import arena, gone, group_empty, reaped, wait_status

SLEEPER = "reconcile_sleeper"  # a module the tests write: sleeps, or leaves a child behind and exits


@pytest.fixture
def modules(tmp_path: Path) -> dict[str, str]:
    """An environment whose ``python -m reconcile_sleeper [leave]`` sleeps 60 s, or (``leave``) starts a
    ``sleep 60`` in its own group and exits at once (a leader that died leaving its group behind)."""
    folder = tmp_path / "modules"
    folder.mkdir()
    (folder / f"{SLEEPER}.py").write_text(textwrap.dedent("""\
        import os, subprocess, sys, time
        if sys.argv[1:] == ["leave"]:
            subprocess.Popen(["sleep", "60"])
            os._exit(0)
        time.sleep(60)
    """))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}


def _names(done: list[Applied]) -> list[str]:
    return [applied.name for applied in done]


def _recorded(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, str]]:
    return [(r.reconciler, r.transition, r.subject) for r in caplog.records  # type: ignore[attr-defined]
            if r.name == "millpond.reconcile"]


def _dead_process() -> ProcessRecord:
    """The record of a real process that ran and was killed (and reaped): never running again."""
    child = subprocess.Popen(["sleep", "60"])
    ticks = start_ticks(child.pid)
    assert ticks is not None
    child.kill()
    child.wait()
    return ProcessRecord(child.pid, ticks, 0)


# --------------------------------------------------------------------------- the one spawner


def test_a_detached_supervisor_survives_its_parent_and_is_found_by_its_pid_record(home: Path, modules) -> None:
    parent = textwrap.dedent(f"""\
        import os
        from pathlib import Path
        from millpond.runners.detached import spawn_detached
        identity = spawn_detached({SLEEPER!r}, [], log=Path({str(home / "sleeper.log")!r}), env=dict(os.environ),
                                  kind="test-supervisor", served="default/survivor", uid="uid-1")
        print(identity.pid, identity.start)
    """)
    done = subprocess.run([sys.executable, "-c", parent], env=modules, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    pid_text, ticks = done.stdout.split()
    child = ProcessIdentity(int(pid_text), ticks)
    try:
        assert child.is_running()  # its parent ended; it did not
        assert os.getsid(child.pid) == child.pid  # a session of its own: the parent's signals never reach it
        (record,) = [r for r in running() if r.kind == "test-supervisor"]
        assert (record.object, record.uid, record.identity) == ("default/survivor", "uid-1", child)
        assert (home / "sleeper.log").exists()
    finally:
        child.kill_group()
    assert gone(child.pid, child.start)
    assert [r for r in running() if r.kind == "test-supervisor"] == []  # the record counts only while it runs


def test_the_spawner_names_a_child_that_exits_at_once_and_reaps_it(home: Path, tmp_path: Path, modules) -> None:
    identity = spawn_detached(SLEEPER, ["leave"], log=tmp_path / "leave.log", env=modules)
    assert identity.start is not None  # read before the reaper could take it
    assert reaped(identity.pid), "the exited leader was reaped (the caller keeps no zombie)"
    assert not group_empty(identity.pid, timeout=0.5)  # its `sleep 60` stays in the group...
    os.killpg(identity.pid, signal.SIGKILL)  # ...until it is ended (by group: the test started it)
    assert group_empty(identity.pid)


def test_an_unstartable_supervisor_raises_oserror_for_its_caller_to_report(home: Path, tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(OSError):
        spawn_detached(SLEEPER, [], log=blocked / "under-a-file.log", env=dict(os.environ))


# --------------------------------------------------------------------------- the shape


def _all_five() -> list[Reconciler[Any]]:
    return [ServingReconciler(ResourceStore()), JobsReconciler(JobStore()), SharedMountsReconciler(),
            OperationsReconciler(ResourceStore()), ProcessesReconciler()]


def test_every_reconciler_has_the_one_shape(home: Path) -> None:
    reconcilers = _all_five()
    assert [r.name for r in reconcilers] == ["serving", "training-jobs", "shared-mounts", "operation-liveness",
                                             "processes"]
    assert {t.name for t in ServingTransition} == {"START_SUPERVISOR"}
    assert {t.name for t in JobTransition} == {"NEVER_STARTED", "SUPERVISOR_DIED"}
    assert {t.name for t in MountTransition} == {"END_UNUSED"}
    assert {t.name for t in OperationTransition} == {"RESUME", "FAIL"}
    assert {t.name for t in ProcessTransition} == {"END_ORPHAN", "END_LEFTOVERS", "FORGET_DEAD"}


def test_an_empty_home_observes_nothing_to_do(home: Path) -> None:
    for reconciler in _all_five():
        assert reconcile(reconciler) == []


# --------------------------------------------------------------------------- each reconciler


def test_operation_liveness_fails_an_operation_whose_process_died(home: Path, caplog) -> None:
    store = ResourceStore()
    assert store.create({"apiVersion": "data.fluid.io/v1alpha1", "kind": "DataProcess",
                         "metadata": {"name": "clean", "namespace": "default"},
                         "spec": {"dataset": {"name": "ds", "namespace": "default"}}}) is not None
    dead = _dead_process()
    assert store.record_process("DataProcess", "clean", "default", dead, status={"phase": "Executing"})
    reconciler = OperationsReconciler(store)
    snapshot = reconciler.observe()
    (seen,) = snapshot.operations
    assert seen.dead and seen.subject == "DataProcess default/clean"
    assert store.get("DataProcess", "clean").status["phase"] == "Executing"  # type: ignore[union-attr]  # observing changed nothing
    caplog.set_level(logging.INFO, logger="millpond.reconcile")
    assert _names(reconciler.step(snapshot)) == ["FAIL"]
    assert _recorded(caplog) == [("operation-liveness", "FAIL", "DataProcess default/clean")]
    status = store.get("DataProcess", "clean").status  # type: ignore[union-attr]
    assert status["phase"] == "Failed"
    assert status["conditions"][0]["message"] == f"DataProcess clean: its process (pid {dead.pid}) died"
    assert reconciler.step(snapshot) == []  # the same snapshot again: the compare-and-set lets it apply once
    assert reconcile(reconciler) == []


def test_processes_end_an_orphaned_runner_then_forget_it(home: Path, tmp_path: Path, modules, caplog) -> None:
    runner = spawn_detached(SLEEPER, [], log=tmp_path / "runner.log", env=modules,
                            kind="operation", served="DataLoad default/gone", uid="deleted-uid")
    caplog.set_level(logging.INFO, logger="millpond.reconcile")
    reconciler = ProcessesReconciler()
    snapshot = reconciler.observe()
    assert [(view.process.pid, view.orphaned) for view in snapshot.runners] == [(runner.pid, True)]
    assert _names(reconciler.step(snapshot)) == ["END_ORPHAN"]
    assert gone(runner.pid, runner.start)
    assert reaped(runner.pid)
    assert _names(reconcile(reconciler)) == ["FORGET_DEAD"]  # its record goes once it is seen dead
    assert reconcile(reconciler) == []
    assert [name for _, name, _ in _recorded(caplog)] == ["END_ORPHAN", "FORGET_DEAD"]


def test_processes_end_what_a_dead_runner_left_behind(home: Path, tmp_path: Path, modules) -> None:
    leader = spawn_detached(SLEEPER, ["leave"], log=tmp_path / "leave.log", env=modules,
                            kind="operation", served="DataLoad default/gone", uid="u")
    assert reaped(leader.pid)  # the leader exited (and was reaped)
    assert not group_empty(leader.pid, timeout=0.5)  # its sleep is still in the group
    assert _names(reconcile(ProcessesReconciler())) == ["END_LEFTOVERS"]
    assert group_empty(leader.pid)
    assert reconcile(ProcessesReconciler()) == []


def test_shared_mounts_end_one_whose_daemon_and_users_are_gone(home: Path, tmp_path: Path, caplog) -> None:
    folder = tmp_path / "mnt" / "ds"
    folder.mkdir(parents=True)
    dead = _dead_process()
    record = MountRecord("ds", "default", str(folder), dead.pid, str(tmp_path / "mount.log"), dead.start, "", True)
    records = mounts_home() / "mounts"
    records.mkdir(parents=True, exist_ok=True)
    (records / f"{key_of(str(folder))}.json").write_text(json.dumps(asdict(record)))
    caplog.set_level(logging.INFO, logger="millpond.reconcile")
    reconciler = SharedMountsReconciler()
    snapshot = reconciler.observe()
    assert snapshot.mounts == (record,)
    assert _names(reconciler.step(snapshot)) == ["END_UNUSED"]
    assert record_of(str(folder)) is None
    assert _recorded(caplog) == [("shared-mounts", "END_UNUSED", str(folder))]
    assert reconcile(reconciler) == []


def test_training_jobs_fail_a_job_whose_supervisor_was_killed(capsys, home: Path, caplog) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "lost", "sleep 300; true").code == 0
    wait_status(capsys, "lost", ("RUNNING",))
    store = JobStore()
    job = store.get("lost")
    assert job is not None and job.supervisor_pid
    (record,) = [r for r in running() if r.kind == "training-job"]  # started by the one spawner, recorded
    assert record.pid == job.supervisor_pid and record.uid == job.uid
    reconciler = JobsReconciler(store)
    assert [seen.due for seen in reconciler.observe().jobs] == [None]  # its supervisor runs
    os.kill(job.supervisor_pid, signal.SIGKILL)
    assert gone(job.supervisor_pid, job.supervisor_start)
    snapshot = reconciler.observe()
    assert [seen.due for seen in snapshot.jobs] == [JobTransition.SUPERVISOR_DIED]
    caplog.set_level(logging.INFO, logger="millpond.reconcile")
    (done,) = reconciler.step(snapshot)
    assert (done.name, done.subject, done.uid) == ("SUPERVISOR_DIED", "default/lost", job.uid)
    assert _recorded(caplog) == [("training-jobs", "SUPERVISOR_DIED", "default/lost")]
    after = store.by_uid(job.uid)
    assert after is not None and after.status == "FAILED" and after.reason == "SupervisorDied"
    assert reconcile(reconciler) == []


def test_serving_starts_a_supervisor_for_a_servable_service_that_has_none(home: Path, tmp_path: Path, caplog) -> None:
    store = ResourceStore()
    model = tmp_path / "model"
    model.mkdir()
    assert store.create({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                         "metadata": {"name": "iris", "namespace": "default"},
                         "spec": {"predictor": {"sklearn": {"storageUri": f"file://{model}"}}}}) is not None
    reconciler = ServingReconciler(store)
    snapshot = reconciler.observe()
    assert [(s.name, s.servable, s.supervised) for s in snapshot.services] == [("iris", True, False)]
    caplog.set_level(logging.INFO, logger="millpond.reconcile")
    try:
        assert _names(reconciler.step(snapshot)) == ["START_SUPERVISOR"]
        assert _recorded(caplog) == [("serving", "START_SUPERVISOR", "default/iris")]
        (supervisor,) = lifecycle.supervisors("iris")  # started through the one spawner, recorded by pid
        assert supervisor.running
        assert [s.supervised for s in reconciler.observe().services] == [True]
        assert reconcile(reconciler) == []
    finally:
        lifecycle.stop("iris")

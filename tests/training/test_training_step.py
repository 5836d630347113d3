"""``millpond.training.components.train_job`` in real compiled pipelines: a 2-instance gloo DDP job trained by a
pipeline step (whose task holds every CPU while the job waits for one), a FAILED job failing its task with the
reason, a cancelled run stopping its job, and a rerun replacing its own job but never one someone else named."""

from __future__ import annotations

import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
from kfp import compiler, components

from millpond.errors import ConflictError, UserError
from millpond.store.training import JobStore
from millpond.training import pipeline_step
from millpond.training.components import train_job
from tests.conftest import spawn_cli, task
from tests.pipelines import training_step
from tests.training_support import arena, gone, group_empty

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.timeout(300)

DDP_SCRIPT = textwrap.dedent("""\
    import os
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    assert world == 2 and os.environ["EPOCHS"] == "1", dict(os.environ)
    dist.init_process_group("gloo")
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    assert value.item() == 3.0, value
    dist.destroy_process_group()
    print(f"rank {rank} all-reduced {value.item()}", flush=True)
""")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("training-step")
    found = {}
    for name in ("train_step", "train_step_fails", "train_step_long"):
        found[name] = folder / f"{name}.yaml"
        compiler.Compiler().compile(getattr(training_step, name), str(found[name]))
    return found


def test_a_pipeline_step_trains_a_ddp_job_and_outputs_its_status(cli, compiled, home: Path, tmp_path: Path) -> None:
    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT)
    started = time.monotonic()
    result = cli("run", compiled["train_step"], "-p", f"command={sys.executable} {script}", "-o", "json")
    took = time.monotonic() - started
    run = result.json()
    assert result.code == 0 and run["state"] == "SUCCEEDED", (run, result.err)
    assert task(run, "train-job")["outputs"] == {"status": "SUCCEEDED", "job_name": "ddp"}
    assert run["outputs"] == {"Output": "ddp ended SUCCEEDED"}
    log = Path(task(run, "train-job")["log"]).read_text()
    assert "gave back this task's resources" in log, log  # else the job would wait for the task's CPUs for ever
    job = JobStore().get("ddp")
    assert job is not None and job.status == "SUCCEEDED"
    assert dict(map(tuple, job.spec["labels"]))[pipeline_step.RUN_LABEL] == run["run_id"]
    assert "rank 1 all-reduced 3.0" in arena_logs(cli, "ddp", "ddp-worker-0")
    print(f"\ntrain_job pipeline (2-instance gloo DDP job): {took:.1f}s end to end")


def arena_logs(cli, name: str, instance: str) -> str:
    result = cli("train", "logs", name, "-i", instance)
    assert result.code == 0, result.err
    return result.out


def test_a_failed_job_fails_its_step_with_the_reason(cli, compiled, home: Path) -> None:
    result = cli("run", compiled["train_step_fails"], "-p", "command=echo 'boom: the data is bad' >&2; exit 3",
                 "-o", "json")
    run = result.json()
    assert result.code == 1 and run["state"] == "FAILED", run
    step = task(run, "train-job")
    assert step["state"] == "FAILED"
    assert "FAILED: " in step["error"] and "exited with code 3" in step["error"], step["error"]
    assert "boom: the data is bad" in step["error"], step["error"]  # the failed instance's last line
    assert not [t for t in run["tasks"] if t["name"] == "report" and t["state"] == "SUCCEEDED"]
    [job] = JobStore().list(None)
    assert job.name.startswith("train-") and job.status == "FAILED"  # named after its task when no name is given


def test_cancelling_the_run_stops_its_job(compiled, home: Path) -> None:
    engine = spawn_cli(home, "run", compiled["train_step_long"], "-p", "command=sleep 300; true")
    store = JobStore()
    deadline = time.monotonic() + 120
    while (job := store.get("long")) is None or job.status != "RUNNING" or len(store.instances(job.uid)) < 2:
        assert engine.poll() is None, engine.communicate()
        assert time.monotonic() < deadline, job
        time.sleep(0.2)
    running = store.instances(job.uid)
    engine.send_signal(signal.SIGTERM)
    _, err = engine.communicate(timeout=60)
    assert engine.returncode == 130, err
    stopped = store.get("long")
    assert stopped is not None and stopped.status == "FAILED", stopped
    assert gone(job.supervisor_pid, job.supervisor_start)
    assert all(gone(i.pid, i.pid_start) and group_empty(i.pid) for i in running)
    assert stopped.message == "stopped: its supervisor got SIGTERM", stopped  # the supervisor ended it, not death
    assert "Stopping" in [event.reason for event in store.events(job.uid)]


def test_a_rerun_of_the_same_run_replaces_its_own_job_and_never_takes_over_another(capsys, home: Path,
                                                                                      monkeypatch) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "taken", "true").code == 0
    monkeypatch.setenv("MILLPOND_RUN_ID", "run-1")
    monkeypatch.setenv("MILLPOND_TASK_ID", "task-1")
    with pytest.raises(ConflictError, match="started by arena"):
        pipeline_step.run_step(pipeline_step.StepInputs(command="true", name="taken"))
    first = pipeline_step.run_step(pipeline_step.StepInputs(command="true", name="mine"))
    first_uid = JobStore().get("mine").uid  # type: ignore[union-attr]
    again = pipeline_step.run_step(pipeline_step.StepInputs(command="true", name="mine"))  # the task's retry
    assert first == again == pipeline_step.StepResult("SUCCEEDED", "mine")
    assert JobStore().get("mine").uid != first_uid  # type: ignore[union-attr]  # run again, not just read back
    monkeypatch.setenv("MILLPOND_RUN_ID", "run-2")
    with pytest.raises(ConflictError, match="started by run run-1"):
        pipeline_step.run_step(pipeline_step.StepInputs(command="true", name="mine"))
    with pytest.raises(UserError, match="trainer 'horovod'"):
        pipeline_step.job_spec(pipeline_step.StepInputs(command="true", trainer="horovod"), "r", "t")


def test_the_component_round_trips_through_a_component_file(tmp_path: Path) -> None:
    path = tmp_path / "train_job.yaml"
    compiler.Compiler().compile(train_job, str(path))
    loaded = components.load_component_from_file(str(path))
    inputs = loaded.component_spec.inputs or {}
    outputs = loaded.component_spec.outputs or {}
    assert {"command", "name", "trainer", "workers", "gpus", "data", "env"} <= set(inputs)
    assert set(outputs) == {"status", "job_name"}

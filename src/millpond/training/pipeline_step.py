"""What the ``train_job`` KFP component does inside its task: submit a training job, wait, say how it ended.

The component (``millpond.training.components``) is a thin ``@dsl.component`` whose body calls
``run_step``; everything that needs testing and typing lives here. Its task runs on the host, in
the environment of the engine that started it, so it reaches the home's store and ledger as any
millpond process does (``MILLPOND_HOME``, ``MILLPOND_DATABASE_URL``), and the engine tells it
who it is (``MILLPOND_RUN_ID``, ``MILLPOND_TASK_ID``) and which ledger grant it holds.

Three things a launcher task must get right:

- **No deadlock over resources.** On Kubernetes the launcher pod and the job's pods are separate
  requests. Here the job waits in the same ledger as pipeline tasks, so a launcher task that holds
  a grant (its own CPU/memory/GPU request) while it waits would keep the job QUEUING forever when
  both do not fit at once — its own job, or another launcher's in a ParallelFor. The task gives
  its grant back as soon as its job is submitted: a launcher only waits, and what counts is the job's
  request.
- **Cancelling the run stops the job.** The job's supervisor runs in a session of its own, so the
  engine's SIGTERM to the task's process group does not reach it; the task catches that SIGTERM
  (and SIGINT, SIGHUP), stops the job (a ``Stopping`` event says why; its supervisor ends it
  FAILED) and exits within the engine's grace period.
- **A rerun finds its own job.** A job is named as asked (default ``train-`` + the task's id); if
  that name is taken by a job an earlier attempt of this same run started, a live one is waited
  for again (the engine was restarted) and a finished one is replaced; a job another run or a
  person started is never touched, and the task fails naming it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from millpond.errors import ConflictError, TaskFailure, UserError
from millpond.runners.environment import RUN_ID_ENV, TASK_ID_ENV
from millpond.runners.stopping import StopFlag
from millpond.scheduling import GRANT_ENV, Ledger
from millpond.store.training import JobRecord, JobStore
from millpond.training import jobs
from millpond.training.builder import CommonArgs, TfArgs, mpi_spec, pytorch_spec, tf_spec
from millpond.training.logs import read
from millpond.training.paths import instance_log
from millpond.training.spec import JobSpec

RUN_LABEL = "pipelines.kubeflow.org/run_id"
TASK_LABEL = "pipelines.kubeflow.org/task_id"
POLL_S = 0.5
STOP_WAIT_S = 3.0  # the engine SIGKILLs a cancelled task's group 5 s after its SIGTERM
TRAINERS = {"pytorch": "pytorch", "pytorchjob": "pytorch", "mpi": "mpi", "mpijob": "mpi", "mj": "mpi",
            "tf": "tf", "tfjob": "tf"}


@dataclass(frozen=True)
class StepInputs:
    """The component's inputs, as the pipeline passed them (Arena's flags, by their SDK names)."""

    command: str
    name: str = ""
    trainer: str = "pytorch"
    namespace: str = "default"
    workers: int = 1
    gpus: int = 0
    cpu: str = ""
    memory: str = ""
    image: str = ""
    working_dir: str = ""
    data: tuple[str, ...] = ()  # NAME:/PATH, as --data
    data_dirs: tuple[str, ...] = ()  # /HOST:/PATH, as --data-dir
    env: dict[str, str] = field(default_factory=dict)
    retry: int = 0
    running_timeout: str = ""
    nproc_per_node: int = 0
    ps: int = 0
    chief: bool = False
    delete_after: bool = False


@dataclass(frozen=True)
class StepResult:
    status: str
    job_name: str


def job_spec(inputs: StepInputs, run_id: str, task_id: str) -> JobSpec:
    """The job the inputs describe (the same parser as ``arena submit``), labelled with its run and task."""
    trainer = TRAINERS.get(inputs.trainer.strip().lower())
    if trainer is None:
        raise UserError(f"trainer {inputs.trainer!r} is not one of pytorch, mpi, tf")
    if trainer != "tf" and (inputs.ps or inputs.chief):
        raise UserError(f"ps and chief are tf inputs: a {trainer} job has neither")
    name = inputs.name.strip() or f"train-{task_id[:12]}".rstrip("-").lower()
    labels = tuple(f"{key}={value}" for key, value in ((RUN_LABEL, run_id), (TASK_LABEL, task_id)) if value)
    args = CommonArgs(
        name=name, command=(inputs.command,), namespace=inputs.namespace, image=inputs.image, gpus=inputs.gpus,
        workers=inputs.workers, retry=inputs.retry, working_dir=inputs.working_dir,
        env=tuple(f"{key}={value}" for key, value in inputs.env.items()), data=tuple(inputs.data),
        data_dirs=tuple(inputs.data_dirs), labels=labels, cpu=inputs.cpu, memory=inputs.memory,
        running_timeout=inputs.running_timeout, nproc_per_node=inputs.nproc_per_node,
    )
    if trainer == "pytorch":
        return pytorch_spec(args)
    if trainer == "mpi":
        return mpi_spec(args)
    return tf_spec(args, TfArgs(ps=inputs.ps, chief=inputs.chief))


def run_step(inputs: StepInputs) -> StepResult:
    """Submit the job, give back the task's grant, wait for the job's end; TaskFailure when it FAILED."""
    stop = StopFlag()
    with stop.installed():
        return _run(inputs, stop)


def _run(inputs: StepInputs, stop: StopFlag) -> StepResult:
    run_id, task_id = os.environ.get(RUN_ID_ENV, ""), os.environ.get(TASK_ID_ENV, "")
    spec = job_spec(inputs, run_id, task_id)
    store = JobStore()
    job = _submitted(store, spec, run_id)
    _give_back_grant()
    print(f"training job {spec.namespace}/{spec.name} ({spec.trainer.value}, {spec.instance_count} instances): "
          f"arena get {spec.name} -n {spec.namespace}", flush=True)
    said = ""
    while True:
        job = jobs.get(spec.name, spec.namespace, store)
        if job.status != said:
            said = job.status
            print(f"{job.status}{': ' + job.message if job.message else ''}", flush=True)
        if job.finished:
            break
        if stop.event.wait(POLL_S):
            _stop(store, job, stop.signal)
            raise TaskFailure(f"training job {spec.name}: stopped because its pipeline task got {stop.signal}")
    result = StepResult(job.status, job.name)
    why = _failure(store, job) if job.status == "FAILED" else ""
    if inputs.delete_after:
        jobs.delete(job.name, job.namespace, store)
    if why:
        raise TaskFailure(why)
    return result


def _submitted(store: JobStore, spec: JobSpec, run_id: str) -> JobRecord:
    """The job submitted now, or the one an earlier attempt of this run left under the same name."""
    existing = store.get(spec.name, spec.namespace)
    if existing is not None:
        owner = dict(existing.spec.get("labels") or []).get(RUN_LABEL)
        if not run_id or owner != run_id:
            whose = f"run {owner}" if owner else "arena, the SDK or a manifest"
            raise ConflictError(f"the training job {spec.name} already exists in namespace {spec.namespace} "
                                f"(started by {whose}): give the step another name, or delete that job")
        existing = jobs.observed(store, existing)
        if not existing.finished:
            print(f"waiting again for {spec.name}, which an earlier attempt of this run submitted", flush=True)
            return existing
        jobs.delete(spec.name, spec.namespace, store)  # an earlier attempt's, finished: this attempt runs it again
    return jobs.submit(spec, store)


def _give_back_grant() -> None:
    """Release the ledger grant the engine holds for this task (see the module's docstring)."""
    grant = os.environ.get(GRANT_ENV, "")
    if grant:
        Ledger().release(grant)
        print("gave back this task's resources: the job asks for its own", flush=True)


def _stop(store: JobStore, job: JobRecord, signal_name: str) -> None:
    """Stop the job (its supervisor ends it FAILED) and wait a moment for that end to be recorded."""
    store.add_event(job.uid, "Stopping", f"its pipeline task got {signal_name} (the run was cancelled or timed out)",
                    "Warning")
    supervisor = jobs.supervisor_of(job)
    if not supervisor.signal():
        return
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline and supervisor.is_running():
        time.sleep(0.05)


def _failure(store: JobStore, job: JobRecord) -> str:
    """``training job NAME FAILED: why``, with the last line the failed instance wrote."""
    why = f"training job {job.name} FAILED: {job.message or job.reason or 'no reason recorded'}"
    for instance in store.instances(job.uid):
        if instance.status == "Failed" and instance.exit_code not in (None, 0):
            last = read(instance_log(job.uid, instance.name), tail=1)
            if last and last[0].strip():
                return f"{why} ({instance.name}: {last[0].strip()[:300]})"
    return why


def step_inputs(**values: Any) -> StepInputs:
    """``StepInputs`` from the component's arguments (lists and dicts as KFP hands them over)."""
    try:
        data = tuple(str(item) for item in values.pop("data", None) or ())
        data_dirs = tuple(str(item) for item in values.pop("data_dirs", None) or ())
        env = {str(key): str(value) for key, value in (values.pop("env", None) or {}).items()}
        counts: dict[str, Any] = {key: int(values.pop(key)) for key in ("workers", "gpus", "retry", "nproc_per_node",
                                                                        "ps")
                                  if key in values}  # a NUMBER_INTEGER may arrive as 2.0
    except (TypeError, AttributeError, ValueError):
        raise UserError("data and data_dirs are lists of strings, env a dict of strings, counts whole numbers") \
            from None
    return StepInputs(data=data, data_dirs=data_dirs, env=env, **counts, **values)


def main(**values: Any) -> tuple[str, str]:
    """The component's body: ``(status, job_name)``; a job that FAILED or bad inputs fail the task."""
    result = run_step(step_inputs(**values))
    return result.status, result.job_name

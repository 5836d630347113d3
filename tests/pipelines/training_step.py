"""Pipelines that train through ``millpond.training.components.train_job`` (tests/training/test_training_step.py)."""

from kfp import dsl

from millpond.scheduling.machine import cpu_millis
from millpond.training.components import train_job

ALL_CPUS = f"{cpu_millis()}m"  # every CPU the scheduler counts: what the launcher task holds while its job waits


@dsl.component
def report(status: str, job_name: str) -> str:
    return f"{job_name} ended {status}"


@dsl.pipeline(name="train-step")
def train_step(command: str) -> str:
    """A 2-instance job whose launcher task holds every CPU while the job asks for 1 CPU in all: without the
    task giving its grant back, each would wait for the other for ever."""
    trained = train_job(name="ddp", command=command, workers=2, cpu="500m", env={"EPOCHS": "1"})
    trained.set_cpu_request(ALL_CPUS).set_caching_options(False)
    return report(status=trained.outputs["status"], job_name=trained.outputs["job_name"]).output


@dsl.pipeline(name="train-step-fails")
def train_step_fails(command: str) -> None:
    trained = train_job(command=command, workers=2).set_caching_options(False)
    report(status=trained.outputs["status"], job_name=trained.outputs["job_name"])


@dsl.pipeline(name="train-step-long")
def train_step_long(command: str) -> None:
    train_job(name="long", command=command, workers=2).set_caching_options(False)

"""KFP components that train: ``train_job`` submits a training job, waits for it, and outputs how it ended.

.. code-block:: python

    from kfp import dsl
    from millpond.training.components import train_job

    @dsl.pipeline
    def mnist():
        trained = train_job(name="mnist", command="python /data/train.py --backend gloo", workers=2,
                            data=["mnist:/data"], env={"EPOCHS": "2"})
        report(status=trained.outputs["status"], job=trained.outputs["job_name"])

It is a lightweight Python component (the real ``kfp`` SDK compiles it into the pipeline's IR, and
``compiler.Compiler().compile(train_job, "train_job.yaml")`` writes it as a reusable component
file that ``components.load_component_from_file`` loads back). Its body only calls
``millpond.training.pipeline_step.main``, where the work is: the job is built by the same parser as
``arena submit`` (bad input fails the task with Arena's message), the task gives its own ledger
grant back while it waits, a job that FAILED fails the task with the job's reason and its failed
instance's last line, and a cancelled run stops the job. See ``pipeline_step`` for why.
"""

from typing import NamedTuple

from kfp import dsl

__all__ = ["train_job"]


@dsl.component(base_image="python:3.11")
def train_job(
    command: str,
    name: str = "",
    trainer: str = "pytorch",
    workers: int = 1,
    gpus: int = 0,
    cpu: str = "",
    memory: str = "",
    data: list = [],  # noqa: B006 - KFP's way to declare a LIST input with a default
    data_dirs: list = [],  # noqa: B006
    env: dict = {},  # noqa: B006
    image: str = "",
    working_dir: str = "",
    namespace: str = "default",
    retry: int = 0,
    running_timeout: str = "",
    nproc_per_node: int = 0,
    ps: int = 0,
    chief: bool = False,
    delete_after: bool = False,
) -> NamedTuple("Outputs", [("status", str), ("job_name", str)]):  # type: ignore[valid-type]  # noqa: UP014
    """Submit a training job (Arena's flags by their SDK names), wait for its end, output its status and name."""
    from collections import namedtuple  # noqa: PLC0415 - KFP lightweight component: its body is the whole source the executor runs

    from millpond.training.pipeline_step import main  # noqa: PLC0415 - KFP lightweight component: its body is the whole source the executor runs

    status, job_name = main(
        command=command, name=name, trainer=trainer, workers=workers, gpus=gpus, cpu=cpu, memory=memory, data=data,
        data_dirs=data_dirs, env=env, image=image, working_dir=working_dir, namespace=namespace, retry=retry,
        running_timeout=running_timeout, nproc_per_node=nproc_per_node, ps=ps, chief=chief,
        delete_after=delete_after,
    )
    # kfp runs this function's source alone, so its outputs' NamedTuple is made here, at run time.
    return namedtuple("Outputs", ["status", "job_name"])(status, job_name)  # type: ignore[call-arg]  # made at run time

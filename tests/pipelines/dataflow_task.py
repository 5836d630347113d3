"""A pipeline task that runs a Fluid dataflow (with millpond's Fluid SDK) and waits for it."""

from kfp import dsl


@dsl.component
def preload_and_count(dataset: str, run_id: str) -> str:
    from millpond import fluid

    client = fluid.FluidClient(fluid.ClientConfig())
    flow = client.get_dataset(dataset_name=dataset).preload(target_path="/")
    run = flow.run(run_id=run_id)
    run.wait()
    steps = run.get_current_status()  # one {step name: status} per step, in order
    return ",".join(f"{name}={status['phase']}" for step in steps for name, status in step.items())


@dsl.pipeline(name="dataflow-task")
def dataflow_task(dataset: str = "mnist", run_id: str = "warmup") -> str:
    return preload_and_count(dataset=dataset, run_id=run_id).output

"""Resource requests: a GPU task, and two tasks that each want every CPU of the machine."""

from kfp import dsl

from millpond.scheduling.machine import cpu_millis

ALL_CPUS = str(cpu_millis() // 1000)  # the CPUs the scheduler counts: affinity, bounded by a cgroup quota


@dsl.component
def visible_gpus() -> str:
    import os

    return os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")


@dsl.component
def hog(folder: str, name: str) -> str:
    import os
    import time

    os.makedirs(folder, exist_ok=True)
    mine, others = os.path.join(folder, name), [p for p in os.listdir(folder) if p != name]
    open(mine, "w").close()
    time.sleep(0.5)
    busy = [p for p in os.listdir(folder) if p != name]
    os.remove(mine)
    return "alone" if not busy and not others else "shared"


@dsl.pipeline(name="gpu-task")
def gpu_task() -> str:
    return visible_gpus().set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(1).output


@dsl.pipeline(name="cpu-hogs")
def cpu_hogs(folder: str) -> None:
    hog(folder=folder, name="a").set_cpu_request(ALL_CPUS).set_caching_options(False)
    hog(folder=folder, name="b").set_cpu_request(ALL_CPUS).set_caching_options(False)


@dsl.pipeline(name="too-big")
def too_big() -> None:
    visible_gpus().set_memory_request("100000Gi")


@dsl.component
def gpu_sleeper(seconds: float) -> str:
    import os
    import time

    time.sleep(seconds)
    return os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")


@dsl.pipeline(name="gpu-sleeper")
def gpu_sleeper_pipeline(seconds: float = 1.5) -> str:
    task = gpu_sleeper(seconds=seconds).set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(1)
    return task.set_caching_options(False).output

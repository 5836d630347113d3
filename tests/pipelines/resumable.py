"""Tasks that count their own executions in side-effect files, for the kill-and-resume test."""

from kfp import dsl
from kfp.dsl import Dataset, Input, Output


@dsl.component
def step(folder: str, name: str, seconds: float, data: Output[Dataset]) -> str:
    import os
    import time

    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{name}.started"), "a") as marks:
        marks.write("x")
    time.sleep(seconds)
    with open(data.path, "w") as out:
        out.write(name * 1000)
    with open(os.path.join(folder, f"{name}.done"), "a") as marks:
        marks.write("x")
    return name


@dsl.component
def combine(folder: str, a: Input[Dataset], b: Input[Dataset]) -> str:
    import os

    with open(os.path.join(folder, "combine.started"), "a") as marks:
        marks.write("x")
    left, right = open(a.path).read(), open(b.path).read()
    assert left == "slow1" * 1000 and right == "slow2" * 1000, "corrupt input artifact"
    return f"{len(left)}+{len(right)}"


@dsl.pipeline(name="resumable")
def resumable(folder: str) -> str:
    first = step(folder=folder, name="first", seconds=0.0)
    slow1 = step(folder=folder, name="slow1", seconds=4.0).after(first)
    slow2 = step(folder=folder, name="slow2", seconds=4.0).after(first)
    return combine(folder=folder, a=slow1.outputs["data"], b=slow2.outputs["data"]).output

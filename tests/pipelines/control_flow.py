"""Control flow with the real kfp SDK: conditions, loops, fan-in, exit handlers, OneOf, retries."""

from typing import List

from kfp import dsl
from kfp.dsl import Dataset, Input, Output


@dsl.component
def number(n: int) -> int:
    return n


@dsl.component
def square(x: int) -> int:
    return x * x


@dsl.component
def total(xs: List[int]) -> int:
    return sum(xs)


@dsl.component
def say(word: str) -> str:
    return word


@dsl.component
def write(text: str, out: Output[Dataset]) -> None:
    with open(out.path, "w") as handle:
        handle.write(text)


@dsl.component
def join(items: Input[List[Dataset]]) -> str:
    return ",".join(open(item.path).read() for item in items)


@dsl.component
def explode() -> None:
    raise RuntimeError("exploded on purpose")


@dsl.component
def record_status(status: dsl.PipelineTaskFinalStatus, marker: str) -> str:
    text = f"{status.state}|{status.pipeline_task_name}|{status.error_message is not None}"
    with open(marker, "w") as handle:
        handle.write(text)
    return text


@dsl.component
def flaky(counter: str, succeed_on: int) -> str:
    import os

    count = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
    with open(counter, "w") as handle:
        handle.write(str(count))
    if count < succeed_on:
        raise RuntimeError(f"attempt {count} fails")
    return f"attempt={count}"


@dsl.pipeline(name="branches")
def branches(n: int) -> str:
    picked = number(n=n)
    with dsl.If(picked.output > 10):
        big = say(word="big")
    with dsl.Elif(picked.output > 5):
        medium = say(word="medium")
    with dsl.Else():
        small = say(word="small")
    return dsl.OneOf(big.output, medium.output, small.output)


@dsl.pipeline(name="loops")
def loops(xs: List[int] = [1, 2, 3, 4]) -> int:  # noqa: B006 - KFP compiles this default into the pipeline spec
    with dsl.ParallelFor(xs, parallelism=2) as x:
        squared = square(x=x)
    with dsl.ParallelFor(["a", "b"]) as word:
        with dsl.ParallelFor([1, 2]) as inner:
            say(word=word)
            number(n=inner)
    return total(xs=dsl.Collected(squared.output)).output


@dsl.pipeline(name="artifact-fan-in")
def artifact_fan_in() -> str:
    with dsl.ParallelFor(["x", "y", "z"]) as text:
        written = write(text=text)
    return join(items=dsl.Collected(written.outputs["out"])).output


@dsl.pipeline(name="exit-handling")
def exit_handling(marker: str, fail: bool = True) -> None:
    final = record_status(marker=marker)
    with dsl.ExitHandler(final):
        with dsl.If(fail == True):  # noqa: E712 - a pipeline condition, not Python
            explode()
        say(word="body")


@dsl.pipeline(name="cleanup-after-failure")
def cleanup_after_failure(marker: str) -> None:
    broken = explode()
    say(word="cleanup").after(broken).ignore_upstream_failure()


@dsl.pipeline(name="retrying")
def retrying(counter: str, succeed_on: int = 3) -> str:
    task = flaky(counter=counter, succeed_on=succeed_on)
    task.set_retry(num_retries=3, backoff_duration="0s", backoff_factor=1)
    return task.output

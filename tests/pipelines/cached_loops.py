"""Loops in every shape the engine walks, for cached re-runs: every task of the second run is a cache hit."""

from typing import List

from kfp import dsl
from kfp.dsl import Dataset, Input, Output


@dsl.component
def double(x: float) -> float:
    return x * 2


@dsl.component
def pair(word: str, n: int) -> str:
    return f"{word}{n}"


@dsl.component
def add_up(xs: List[float]) -> float:
    return sum(xs)


@dsl.component
def write(text: str, out: Output[Dataset]) -> None:
    with open(out.path, "w") as handle:
        handle.write(text)


@dsl.component
def read(data: Input[Dataset]) -> str:
    return open(data.path).read()


@dsl.component
def join(items: Input[List[Dataset]]) -> str:
    return ",".join(sorted(open(item.path).read() for item in items))


@dsl.component
def note(status: dsl.PipelineTaskFinalStatus) -> str:
    return status.state


@dsl.pipeline(name="pf")
def plain_loop() -> None:
    with dsl.ParallelFor([0.5, 1.0, 2.0]) as x:
        double(x=x)


@dsl.pipeline(name="nested-loops")
def nested_loops() -> None:
    with dsl.ParallelFor(["a", "b"]) as word:
        with dsl.ParallelFor([1, 2, 3]) as n:
            pair(word=word, n=n)


@dsl.pipeline(name="collected")
def collected() -> float:
    with dsl.ParallelFor([0.5, 1.0, 2.0]) as x:
        doubled = double(x=x)
    return add_up(xs=dsl.Collected(doubled.output)).output


@dsl.pipeline(name="artifact-loops")
def artifact_loops() -> str:
    with dsl.ParallelFor(["x", "y", "z"]) as text:
        written = write(text=text)
        read(data=written.outputs["out"])
    return join(items=dsl.Collected(written.outputs["out"])).output


@dsl.pipeline(name="condition-in-loop")
def condition_in_loop() -> None:
    with dsl.ParallelFor([0.5, 1.0, 2.0]) as x:
        doubled = double(x=x)
        with dsl.If(doubled.output > 1.5):
            double(x=doubled.output)


@dsl.pipeline(name="loop-in-exit-handler")
def loop_in_exit_handler() -> None:
    final = note()
    with dsl.ExitHandler(final):
        with dsl.ParallelFor([0.5, 1.0]) as x:
            double(x=x)


@dsl.pipeline(name="limited-loop")
def limited_loop() -> None:
    with dsl.ParallelFor([1.0, 2.0, 3.0, 4.0, 5.0], parallelism=2) as x:
        double(x=x)


@dsl.pipeline(name="skipped-iterations")
def skipped_iterations(xs: List[float] = [0.5, 1.0, 2.0]) -> None:  # noqa: B006 - a pipeline default
    """Every iteration's task is skipped, so each iteration ends at once, without a process or a cache."""
    with dsl.ParallelFor(xs) as x:
        with dsl.If(x < 0.0):
            double(x=x)


@dsl.component
def run_id_echo(run_id: str) -> str:
    return run_id


@dsl.component
def once_only(flag: str) -> str:
    """Succeeds the first time, fails every time after (its caching is off, so it runs each time)."""
    import os

    if os.path.exists(flag):
        raise RuntimeError(f"{flag} exists: ran before")
    open(flag, "w").close()
    return flag


@dsl.pipeline(name="run-specific")
def run_specific() -> str:
    """Its only task takes the run's id: a second run can never hit the cache."""
    return run_id_echo(run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER).output


def once(flag_path: str) -> "dsl.graph_component.GraphComponent":
    """A pipeline that succeeds once: its uncached task fails when ``flag_path`` exists."""

    @dsl.pipeline(name="once")
    def once_pipeline(flag: str = flag_path) -> str:
        return once_only(flag=flag).set_caching_options(False).output

    return once_pipeline


@dsl.component
def make(text: str, data: Output[Dataset]) -> None:
    with open(data.path, "w") as handle:
        handle.write(text)


@dsl.component
def consume(data: Input[Dataset]) -> None:
    import os

    os.remove(data.path)  # what the cache kept of make is gone: its next run cannot be a hit


@dsl.pipeline(name="lost-cache")
def lost_cache() -> None:
    made = make(text="x")
    consume(data=made.outputs["data"]).set_caching_options(False)

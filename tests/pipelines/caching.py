"""Pipelines for the cache: a chain whose tasks count their executions, and content-equal producers."""

from kfp import dsl
from kfp.dsl import Dataset, Input, Output


@dsl.component
def make(folder: str, text: str, data: Output[Dataset]) -> None:
    import os

    with open(os.path.join(folder, "make.count"), "a") as marks:
        marks.write("x")
    with open(data.path, "w") as out:
        out.write(text)


@dsl.component
def shout(folder: str, data: Input[Dataset], suffix: str) -> str:
    import os

    with open(os.path.join(folder, "shout.count"), "a") as marks:
        marks.write("x")
    return open(data.path).read().upper() + suffix


@dsl.pipeline(name="cached-chain")
def cached_chain(folder: str, text: str = "hello", suffix: str = "!") -> str:
    made = make(folder=folder, text=text)
    return shout(folder=folder, data=made.outputs["data"], suffix=suffix).output


@dsl.pipeline(name="uncached-chain")
def uncached_chain(folder: str, text: str = "hello", suffix: str = "!") -> str:
    made = make(folder=folder, text=text).set_caching_options(False)
    return shout(folder=folder, data=made.outputs["data"], suffix=suffix).output

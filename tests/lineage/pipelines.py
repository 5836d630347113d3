"""Small pipelines for the lineage tests: six Datasets from a loop, and a Model fitted on one of them."""

# no "from __future__ import annotations": kfp reads the components' annotations as types

from kfp import dsl
from kfp.dsl import Dataset, Input, Model, Output


@dsl.component
def make(index: int, data: Output[Dataset]) -> None:
    with open(data.path, "w") as out:
        out.write(str(index))
    data.metadata["index"] = index


@dsl.component
def fit(data: Input[Dataset], model: Output[Model]) -> None:
    with open(data.path) as given, open(model.path, "w") as out:
        out.write(f"fitted on {given.read()}")


@dsl.pipeline(name="lineage-fanout")
def fanout() -> None:
    with dsl.ParallelFor([0, 1, 2, 3, 4, 5]) as index:
        make(index=index)


@dsl.pipeline(name="lineage-fit")
def fit_one(index: int = 7) -> None:
    made = make(index=index)
    fit(data=made.outputs["data"])

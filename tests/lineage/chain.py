"""A four-step pipeline for the lineage UI's tests: raw data gathered, cleaned, a model trained on it and scored, each
step handing its artifact to the next, so an artifact's lineage reaches two steps back and two steps on."""

# no "from __future__ import annotations": kfp reads the components' annotations as types

from kfp import dsl
from kfp.dsl import Dataset, Input, Metrics, Model, Output


@dsl.component
def gather(rows: int, raw: Output[Dataset]) -> None:
    with open(raw.path, "w") as out:
        out.write("\n".join(str(i) for i in range(rows)))


@dsl.component
def clean(raw: Input[Dataset], cleaned: Output[Dataset]) -> None:
    with open(raw.path) as given, open(cleaned.path, "w") as out:
        out.write(given.read().strip())
    cleaned.metadata["rows"] = 3
    cleaned.metadata["note"] = '<img src=x onerror="window.pwned=1">'  # shown as text, never as HTML


@dsl.component
def train(cleaned: Input[Dataset], model: Output[Model]) -> None:
    with open(cleaned.path) as given, open(model.path, "w") as out:
        out.write(f"fitted on {len(given.read().splitlines())} rows")
    model.metadata["framework"] = "counting"


@dsl.component
def score(model: Input[Model], metrics: Output[Metrics]) -> None:
    with open(model.path) as given:
        metrics.log_metric("accuracy", 0.5 + len(given.read()) / 1000)


@dsl.pipeline(name="lineage-chain")
def chain(rows: int = 3) -> None:
    gathered = gather(rows=rows)
    cleaned = clean(raw=gathered.outputs["raw"])
    trained = train(cleaned=cleaned.outputs["cleaned"])
    score(model=trained.outputs["model"])

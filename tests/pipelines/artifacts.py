"""Artifacts between tasks: lightweight and container components, and a nested pipeline."""

from kfp import dsl
from kfp.dsl import Dataset, Input, Model, Output


@dsl.component
def produce(text: str, data: Output[Dataset]) -> None:
    with open(data.path, "w") as out:
        out.write(text)
    data.metadata["chars"] = len(text)


@dsl.component
def consume(data: Input[Dataset], model: Output[Model]) -> str:
    with open(data.path) as src:
        content = src.read()
    with open(model.path, "w") as out:
        out.write(content.upper())
    return f"{content}|{data.metadata['chars']}"


@dsl.container_component
def shout(text: str, out: dsl.OutputPath(str)):
    return dsl.ContainerSpec(
        image="alpine:3",
        command=["sh", "-c", 'mkdir -p "$(dirname "$1")" && printf "%s!" "$0" > "$1"'],
        args=[text, out],
    )


@dsl.container_component
def copy_dataset(src: Input[Dataset], dst: Output[Dataset]):
    return dsl.ContainerSpec(
        image="alpine:3",
        command=["sh", "-c", 'mkdir -p "$(dirname "$1")" && cat "$0" "$0" > "$1"'],
        args=[src.path, dst.path],
    )


@dsl.pipeline(name="inner")
def inner(text: str) -> Dataset:
    return produce(text=text).outputs["data"]


@dsl.pipeline(name="artifacts")
def artifacts_pipeline(text: str = "hello") -> str:
    made = inner(text=text)
    used = consume(data=made.output)
    copy_dataset(src=made.output)
    shout(text=used.outputs["Output"])
    return used.outputs["Output"]

"""A task that fails after writing part of its output, and one that is killed outright."""

from kfp import dsl
from kfp.dsl import Dataset, Output


@dsl.component
def write_then_fail(data: Output[Dataset]) -> None:
    with open(data.path, "w") as out:
        out.write("half")
    print("boom-marker: about to fail")
    raise RuntimeError("deliberate failure")


@dsl.component
def write_then_die(data: Output[Dataset]) -> None:
    import os
    import signal

    with open(data.path, "w") as out:
        out.write("half")
    os.kill(os.getpid(), signal.SIGKILL)


@dsl.component
def after(x: str) -> str:
    return x


@dsl.component
def fine() -> str:
    return "ok"


@dsl.pipeline(name="fails")
def fails() -> None:
    broken = write_then_fail()
    after(x="never").after(broken)
    fine()


@dsl.pipeline(name="dies")
def dies() -> None:
    write_then_die()


@dsl.container_component
def missing_tool():
    return dsl.ContainerSpec(image="example/tool:1", command=["no-such-tool-millpond"], args=["x"])


@dsl.pipeline(name="missing-tool")
def missing_tool_pipeline() -> None:
    missing_tool()

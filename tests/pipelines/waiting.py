"""Tasks that wait for a process slot: each marks its start, then holds its slot until the test opens a gate."""

from kfp import dsl


@dsl.component
def gated(folder: str, name: str) -> str:
    import os
    import time

    os.makedirs(folder, exist_ok=True)
    open(os.path.join(folder, f"{name}.started"), "w").close()
    while not os.path.exists(os.path.join(folder, "gate")):
        time.sleep(0.05)
    return name


@dsl.pipeline(name="gated-pair")
def gated_pair(folder: str) -> None:
    gated(folder=folder, name="a").set_caching_options(False)
    gated(folder=folder, name="b").set_caching_options(False)

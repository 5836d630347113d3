"""Two tasks that can only both succeed when they run at the same time (a file barrier)."""

from kfp import dsl


@dsl.component
def meet(folder: str, me: str, other: str) -> str:
    import os
    import time

    os.makedirs(folder, exist_ok=True)
    open(os.path.join(folder, me), "w").close()
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(folder, other)):
        if time.time() > deadline:
            raise SystemExit(f"{other} never showed up: tasks did not run in parallel")
        time.sleep(0.05)
    return me


@dsl.pipeline(name="parallel")
def parallel(folder: str) -> None:
    meet(folder=folder, me="a", other="b")
    meet(folder=folder, me="b", other="a")
